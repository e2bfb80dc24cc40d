"""SystemClient: the servers' monitoring endpoints over the system account.

A request to ``$SYS.REQ.SERVER.PING.<KIND>`` is answered by every server of
the cluster (and of its gateways and leaf nodes that share the system
account); ``$SYS.REQ.SERVER.<id>.<KIND>`` by one. The answers are gathered
with ``request_many``, so every call ends within its timeout.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Protocol, Type, TypedDict, TypeVar, Unpack

from .. import errors, options
from .._core.message import Msg
from ..replies import Replies
from .model import (
    Accountz,
    Connz,
    Gatewayz,
    Healthz,
    Jsz,
    Leafz,
    Routez,
    Statsz,
    Subsz,
    SystemReply,
    Varz,
    reply_from,
)

__all__ = ["SystemClient"]

_R = TypeVar("_R", bound=SystemReply)

NEEDS_RIGHTS = (
    "the user needs system-account rights: connect as a user of the system account "
    "(the server's 'system_account', $SYS by default) allowed to publish to $SYS.REQ.SERVER.>"
)


class Ask(TypedDict, total=False):
    """The keywords of every endpoint: ``options`` (the endpoint's request
    JSON), ``timeout`` (seconds) and ``expected`` (servers) for this call."""

    options: Mapping[str, Any]
    timeout: float
    expected: int


class _Requester(Protocol):
    """What the system client needs of the core client (``request_many``)."""

    def request_many(
        self, subject: str, data: bytes = ..., *, max_messages: Optional[int] = ..., max_wait: float = ...,
        stall: Optional[float] = ...,
    ) -> Replies: ...  # fmt: skip


class SystemClient:
    """The monitoring endpoints of every server (or one), as ``nats server``
    shows them; made by :meth:`Client.system <jetstream_sync.Client.system>`.

    Each method returns a list with one typed answer per server that replied,
    sorted by server name; pass ``server_id`` (a server's id, as in
    ``Varz.raw["server_id"]`` or ``answer.server.id``) to ask one server.
    Every method takes, as keywords (:class:`Ask`): ``options``, the endpoint's request JSON as the server's monitoring
    API takes it (``{"accounts": True}`` for jsz, ``{"subs": True,
    "limit": 100}`` for connz ...). The gathering ends at ``expected``
    replies when given, else half a second after the last reply, and in any
    case after ``timeout`` seconds: fewer replies than servers are returned as
    they came, not raised.

    Raises :class:`PermissionDeniedError` when the server refuses the request
    (at once) or no server answers (the user lacks system-account rights), :class:`APIError` when a server refuses the
    request (bad options), :class:`InvalidOptionError` for bad arguments
    before anything is sent. Thread-safe: each call is its own request.
    """

    def __init__(self, client: _Requester, *, timeout: float, expected: Optional[int]) -> None:
        options.system_request("VARZ", None, {"timeout": timeout, "expected": expected}, timeout, None)
        self._client = client
        self._timeout = timeout
        self._expected = expected

    def __repr__(self) -> str:
        return f"<jetstream_sync.SystemClient timeout={self._timeout}s expected={self._expected}>"

    def request(self, kind: str, server_id: Optional[str] = None, **ask: Unpack[Ask]) -> List[Dict[str, Any]]:
        """The raw answers (the whole envelopes, ``server`` and ``data``) to
        the endpoint ``kind`` ("VARZ", "JSZ" ...), one per server."""
        return [json.loads(m.data) for m in self._gather(kind.upper(), server_id, ask)]

    def varz(self, server_id: Optional[str] = None, **ask: Unpack[Ask]) -> List[Varz]:
        """VARZ: version, connections, memory, CPU ... of each server."""
        return self._typed(Varz, "VARZ", server_id, ask)

    def connz(self, server_id: Optional[str] = None, **ask: Unpack[Ask]) -> List[Connz]:
        """CONNZ: the client connections of each server (options: ``subs``,
        ``offset``, ``limit``, ``acc``, ``state`` ...)."""
        return self._typed(Connz, "CONNZ", server_id, ask)

    def jsz(self, server_id: Optional[str] = None, **ask: Unpack[Ask]) -> List[Jsz]:
        """JSZ: JetStream usage of each server (options: ``accounts``,
        ``streams``, ``consumer``, ``config``, ``leader_only`` ...)."""
        return self._typed(Jsz, "JSZ", server_id, ask)

    def healthz(self, server_id: Optional[str] = None, **ask: Unpack[Ask]) -> List[Healthz]:
        """HEALTHZ: each server's health (options: ``js-enabled-only``,
        ``js-server-only``, ``details`` ...)."""
        return self._typed(Healthz, "HEALTHZ", server_id, ask)

    def accountz(self, server_id: Optional[str] = None, **ask: Unpack[Ask]) -> List[Accountz]:
        """ACCOUNTZ: the accounts each server knows (option ``account`` for one's details)."""
        return self._typed(Accountz, "ACCOUNTZ", server_id, ask)

    def statsz(self, server_id: Optional[str] = None, **ask: Unpack[Ask]) -> List[Statsz]:
        """STATSZ: each server's statistics (connections, messages, CPU, memory)."""
        return self._typed(Statsz, "STATSZ", server_id, ask)

    def subsz(self, server_id: Optional[str] = None, **ask: Unpack[Ask]) -> List[Subsz]:
        """SUBSZ: each server's subscription table (option ``subs`` lists them)."""
        return self._typed(Subsz, "SUBSZ", server_id, ask)

    def routez(self, server_id: Optional[str] = None, **ask: Unpack[Ask]) -> List[Routez]:
        """ROUTEZ: each server's routes to the others of its cluster."""
        return self._typed(Routez, "ROUTEZ", server_id, ask)

    def leafz(self, server_id: Optional[str] = None, **ask: Unpack[Ask]) -> List[Leafz]:
        """LEAFZ: each server's leaf node connections."""
        return self._typed(Leafz, "LEAFZ", server_id, ask)

    def gatewayz(self, server_id: Optional[str] = None, **ask: Unpack[Ask]) -> List[Gatewayz]:
        """GATEWAYZ: each server's gateways to other clusters."""
        return self._typed(Gatewayz, "GATEWAYZ", server_id, ask)

    def _typed(self, cls: Type[_R], kind: str, server_id: Optional[str], ask: Ask) -> List[_R]:
        body = "statsz" if kind == "STATSZ" else "data"
        out = []
        for msg in self._gather(kind, server_id, ask):
            envelope = _envelope(msg, kind)
            out.append(reply_from(cls, envelope.get("server") or {}, envelope.get(body) or {}))
        return sorted(out, key=lambda r: r.server.name)

    def _gather(self, kind: str, server_id: Optional[str], ask: Ask) -> List[Msg]:
        req = options.system_request(kind, server_id, ask, self._timeout, self._expected)
        try:
            with self._client.request_many(
                req.subject, req.body, max_messages=req.expected, max_wait=req.timeout, stall=req.stall
            ) as replies:
                got = list(replies)
        except errors.NoRespondersError:
            got = []
        except errors.PermissionDeniedError as exc:  # the server refused the request: said at once
            raise errors.PermissionDeniedError(f"the server refused the request to {req.subject}: {NEEDS_RIGHTS}") from exc
        if not got:
            raise _nobody(req.subject, server_id, req.timeout)
        return got


def _nobody(subject: str, server_id: Optional[str], timeout: float) -> errors.JetStreamError:
    if server_id is not None:
        return errors.NoRespondersError(
            f"no server answered {subject} within {timeout}s: no server has id {server_id!r}, or {NEEDS_RIGHTS}"
        )
    return errors.PermissionDeniedError(f"no server answered {subject} within {timeout}s: {NEEDS_RIGHTS}")


def _envelope(msg: Msg, kind: str) -> Dict[str, Any]:
    """One reply's JSON; APIError when the server answered with an error."""
    try:
        envelope = json.loads(msg.data)
    except ValueError:
        raise errors.APIError(0, 0, f"a server's {kind} reply is not JSON") from None
    if not isinstance(envelope, dict):
        raise errors.APIError(0, 0, f"a server's {kind} reply is not a JSON object")
    err = envelope.get("error")
    if err:
        name = (envelope.get("server") or {}).get("name", "?")
        raise errors.APIError(int(err.get("code", 0)), 0, f"server {name} refused {kind}: {err.get('description', '')}")
    return envelope


