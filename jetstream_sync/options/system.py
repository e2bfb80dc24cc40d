"""The system client's arguments: which monitoring endpoint, which server,
how long and how many replies to wait for, and the request's JSON options.
Pure, no I/O."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from .. import errors

__all__ = ["SYSTEM_KINDS", "DEFAULT_SYSTEM_TIMEOUT", "DEFAULT_SYSTEM_STALL", "SystemRequest", "system_request"]

# The $SYS.REQ.SERVER.<id|PING>.<KIND> endpoints the system client asks.
SYSTEM_KINDS = frozenset({"VARZ", "CONNZ", "JSZ", "HEALTHZ", "ACCOUNTZ", "STATSZ", "SUBSZ", "ROUTEZ", "LEAFZ", "GATEWAYZ"})
DEFAULT_SYSTEM_TIMEOUT = 2.0  # seconds to gather the replies of every server
DEFAULT_SYSTEM_STALL = 0.5  # seconds without a new reply that end the gathering when the count is unknown
_BAD_ID_CHARS = frozenset(" \t\r\n.*>")


@dataclass(frozen=True)
class SystemRequest:
    """One system request, checked: its subject, JSON body and bounds."""

    subject: str
    body: bytes
    timeout: float  # seconds, finite, > 0
    expected: Optional[int]  # replies that end the gathering; 1 for one server
    stall: Optional[float]  # seconds without a reply (after one) that end it


def system_request(
    kind: str, server_id: Any, ask: Mapping[str, Any], default_timeout: float, default_expected: Optional[int]
) -> SystemRequest:
    """Check one system request's arguments. ``server_id`` None asks every
    server (``PING``); ``ask`` holds the call's keywords: ``options`` (the
    request JSON), ``timeout`` (seconds; default ``default_timeout``),
    ``expected`` (servers, >= 1, or None; default ``default_expected``), which
    ends the gathering at that many replies, else it ends
    ``DEFAULT_SYSTEM_STALL`` seconds after the last reply or at ``timeout``."""
    unknown = set(ask) - {"options", "timeout", "expected"}
    if unknown:  # **kwargs: a misspelled keyword must not be dropped silently
        raise errors.InvalidOptionError(
            f"unknown keyword(s) {', '.join(sorted(unknown))}: a system request takes options, timeout and expected"
        )
    options = ask.get("options")
    timeout = ask.get("timeout", default_timeout)
    expected = ask.get("expected", default_expected if server_id is None else None)
    if kind not in SYSTEM_KINDS:
        raise errors.InvalidOptionError(f"unknown system endpoint {kind!r}: one of {', '.join(sorted(SYSTEM_KINDS))}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (0 < timeout < math.inf):
        raise errors.InvalidOptionError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
    if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int) or expected < 1):
        raise errors.InvalidOptionError(f"expected must be a number of servers >= 1 or None, got {expected!r}")
    if server_id is not None:
        if not isinstance(server_id, str) or not server_id or _BAD_ID_CHARS & set(server_id):
            raise errors.InvalidOptionError(
                f"server_id must be a server's id (as in varz' server_id; no '.', '*', '>' or spaces), got {server_id!r}"
            )
        if expected is not None and expected != 1:
            raise errors.InvalidOptionError(f"server_id asks one server: expected must be 1 or None, got {expected}")
        expected = 1
    body = b""
    if options:
        if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
            raise errors.InvalidOptionError(f"options must be a mapping of the endpoint's option names, got {options!r}")
        try:
            body = json.dumps(dict(options)).encode()
        except (TypeError, ValueError) as exc:
            raise errors.InvalidOptionError(f"options must be JSON-serializable: {exc}") from None
    stall = None if expected is not None else DEFAULT_SYSTEM_STALL
    where = "PING" if server_id is None else server_id
    return SystemRequest(f"$SYS.REQ.SERVER.{where}.{kind}", body, float(timeout), expected, stall)
