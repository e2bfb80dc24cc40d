"""ServiceRequest: what an endpoint's handler is given, and how it answers."""

from __future__ import annotations

import json
import threading
from typing import Any, Dict, Optional

from .. import options
from .._core.message import Msg
from .model import ERROR_CODE_HEADER, ERROR_HEADER

__all__ = ["ServiceRequest"]


class ServiceRequest:
    """One request to an endpoint: ``data``, ``headers``, ``subject``,
    ``reply``; answer with :meth:`respond`, :meth:`respond_json` or
    :meth:`respond_error` (from the handler's thread or any other).

    A handler need not answer before it returns (ADR-32); an answer given
    later is not counted in the endpoint's stats.
    """

    __slots__ = ("_msg", "_lock", "_error", "_answered")

    def __init__(self, msg: Msg) -> None:
        self._msg = msg
        self._lock = threading.Lock()  # guards _error and _answered: another thread may answer
        self._error = ""  # "code:description" of the last error answer sent
        self._answered = False

    def __repr__(self) -> str:
        return f"<jetstream_sync.ServiceRequest {self.subject!r} {len(self.data)} bytes>"

    @property
    def data(self) -> bytes:
        """The request's payload."""
        return self._msg.data

    @property
    def headers(self) -> Optional[Dict[str, str]]:
        """The request's headers, None when it has none."""
        return self._msg.headers

    @property
    def subject(self) -> str:
        """The subject the request was sent to."""
        return self._msg.subject

    @property
    def reply(self) -> str:
        """Where the answer goes ("" when the sender wants none)."""
        return self._msg.reply

    @property
    def msg(self) -> Msg:
        """The underlying message."""
        return self._msg

    @property
    def answered(self) -> bool:
        """True once an answer (an error too) was sent."""
        with self._lock:
            return self._answered

    @property
    def error(self) -> str:
        """``"code:description"`` of the last error answer sent, "" if none."""
        with self._lock:
            return self._error

    def respond(self, data: Any = b"", headers: Optional[Dict[str, str]] = None) -> None:
        """Send ``data`` (bytes or str) with optional ``headers`` to the
        requester; returns once it is written. Raises :class:`RespondError`
        when the request has no reply subject."""
        self._msg.respond(data, headers)
        with self._lock:
            self._answered = True

    def respond_json(self, value: Any, headers: Optional[Dict[str, str]] = None) -> None:
        """Answer with ``value`` as JSON."""
        self.respond(json.dumps(value).encode(), headers)

    def respond_error(
        self, code: Any, description: str, data: Any = b"", headers: Optional[Dict[str, str]] = None
    ) -> None:
        """Answer with a service error: the ``Nats-Service-Error-Code``
        (``code``, an int or a numeric str such as "400") and
        ``Nats-Service-Error`` (``description``) headers, ``data`` as the
        payload, and any other ``headers``. Counted in the endpoint's
        ``num_errors`` and ``last_error`` when sent before the handler returns."""
        text, desc = options.service_error(code, description)
        merged = dict(headers or {})
        merged[ERROR_HEADER] = desc
        merged[ERROR_CODE_HEADER] = text
        self._msg.respond(data, merged)
        with self._lock:
            self._answered = True
            self._error = f"{text}:{desc}"
