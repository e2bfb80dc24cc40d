"""The one boundary where nats-py's exceptions become this library's.

Every mapping from a nats-py (or asyncio / OS) exception to a
:mod:`jetstream_sync.errors` one is here; callers ``raise ... from exc`` so
the cause is kept. Three kinds:

- :func:`translate`: any failure of a nats-py call (``run()`` applies it to
  what a call raises: :data:`NATS_ERRORS`);
- :func:`api_request_error` and :func:`request_timed_out`: a JetStream API or
  direct-get request nobody answered, or not in time;
- the connection's own reports: a ``-ERR Permissions Violation``
  (:func:`permission_violation`), a slow consumer (:func:`slow_consumer`)
  and why a connect failed
  (:func:`connect_error`, :func:`describe_connect_error`).

The texts are part of the interface: tests and docs quote them.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple, Type

import nats.errors as _nerr

from .. import errors

__all__ = [
    "NATS_ERRORS",
    "API_REQUEST_FAILURES",
    "translate",
    "api_request_error",
    "request_timed_out",
    "PermissionViolation",
    "permission_violation",
    "SlowConsumer",
    "slow_consumer",
    "slow_consumer_error",
    "InsecureServer",
    "most_specific",
    "connect_error",
    "describe_connect_error",
]

# What a nats-py call fails with (its TimeoutError is an asyncio one too): what
# run() translates.
NATS_ERRORS: Tuple[Type[BaseException], ...] = (_nerr.Error, asyncio.TimeoutError)


def translate(exc: BaseException) -> BaseException:
    """Map a nats-py / asyncio / OS exception to this library's hierarchy
    (ours and any other are returned as they are); ``raise translate(exc)
    from exc``."""
    if isinstance(exc, errors.JetStreamError):
        return exc
    if isinstance(exc, _nerr.SlowConsumerError):
        return slow_consumer_error(_subscription_subject(exc))
    if isinstance(exc, (_nerr.ConnectionClosedError, _nerr.ConnectionDrainingError)):
        return errors.ConnectionClosedError(str(exc) or "connection closed")
    if isinstance(exc, _nerr.NoRespondersError):
        return errors.NoRespondersError("no responders available for request")
    if isinstance(exc, (_nerr.TimeoutError, asyncio.TimeoutError)):
        return errors.TimeoutError(str(exc) or "timed out")
    if isinstance(exc, _nerr.NoServersError):
        return errors.NoServersError(str(exc) or "no servers available for connection")
    if isinstance(exc, (_nerr.BadSubjectError, _nerr.MaxPayloadError, _nerr.BadHeaderError)):
        return errors.InvalidOptionError(str(exc) or exc.__class__.__name__)
    if isinstance(exc, _nerr.Error):
        return errors.JetStreamError(str(exc) or exc.__class__.__name__)
    return exc


def slow_consumer_error(subject: str) -> errors.SlowConsumerError:
    """What a subscription on ``subject`` that drops messages reports to error_cb."""
    return errors.SlowConsumerError(f"slow consumer on {subject!r}: pending limit reached, dropping messages")


class SlowConsumer(NamedTuple):
    sid: int
    subject: str  # the subscription's


def slow_consumer(exc: BaseException) -> Optional[SlowConsumer]:
    """The subscription an error nats-py reported to error_cb says is slow
    (one report per dropped message), or None if it is not such a report."""
    if not isinstance(exc, _nerr.SlowConsumerError):
        return None
    return SlowConsumer(exc.sid, _subscription_subject(exc))


def _subscription_subject(exc: _nerr.SlowConsumerError) -> str:
    """The subject subscribed to (a wildcard one too), else the dropped message's."""
    subject = getattr(exc.sub, "subject", None)
    return subject if isinstance(subject, str) and subject else exc.subject


# -- requests ---------------------------------------------------------------------------

# What a JetStream API request (Connection.request) fails with that
# api_request_error names: nobody answered, or not in time.
API_REQUEST_FAILURES: Tuple[Type[BaseException], ...] = (_nerr.NoRespondersError, _nerr.TimeoutError)


def api_request_error(exc: BaseException, subject: str, prefix: str, timeout: float) -> BaseException:
    """The error for a JetStream API request to ``subject`` (API ``prefix``,
    ``timeout`` seconds) that failed with ``exc``, one of
    :data:`API_REQUEST_FAILURES`::

        except nats_errors.API_REQUEST_FAILURES as exc:
            raise nats_errors.api_request_error(exc, subject, prefix, timeout) from exc

    No responders: JetStreamNotEnabledError; a timeout: TimeoutError; any
    other: as :func:`translate`."""
    if isinstance(exc, _nerr.NoRespondersError):
        return errors.JetStreamNotEnabledError(
            f"no JetStream API answered on {prefix} (JetStream not enabled, or wrong domain/prefix)"
        )
    if isinstance(exc, _nerr.TimeoutError):
        return request_timed_out(f"JetStream API request {subject}", timeout)
    return translate(exc)


def request_timed_out(what: str, timeout: float) -> errors.TimeoutError:
    """``"<what> timed out after <timeout>s"``: a request whose reply did not come in time."""
    return errors.TimeoutError(f"{what} timed out after {timeout}s")


# -- permission violations ------------------------------------------------------------------

# nats-server: 'Permissions Violation for Subscription to "x" using queue "q"' (queue when
# given); nats-py lowercases the -ERR text it passes to error_cb.
_PERMISSION = re.compile(
    r'Permissions Violation for (Publish|Subscription) to "?([^"\s]+)"?(?: using queue "?([^"\s]+)"?)?', re.IGNORECASE
)


class PermissionViolation(NamedTuple):
    kind: str  # "publish" or "subscription"
    subject: str  # as the server named it
    queue: str  # the queue group of a refused subscription, "" if none
    error: errors.PermissionDeniedError


def permission_violation(exc: BaseException) -> Optional[PermissionViolation]:
    """The refusal an error nats-py reported to error_cb names, or None if it is not one."""
    match = _PERMISSION.search(str(exc))
    if match is None:
        return None
    kind, subject, queue = match.group(1).lower(), match.group(2), match.group(3) or ""
    group = f" (queue group {queue!r})" if queue else ""
    return PermissionViolation(
        kind, subject, queue, errors.PermissionDeniedError(f"permission denied: {kind} to {subject!r}{group}")
    )


# -- failed connects -------------------------------------------------------------------------


class InsecureServer(Exception):
    """TLS was asked for; the server offered a plain connection."""


def connect_error(
    cause: Optional[BaseException], where: str, info: Optional[Dict[str, Any]], tls: bool
) -> errors.JetStreamError:
    """AuthorizationError or NoServersError for a connect to ``where`` (the
    server URLs, passwords redacted) that failed with ``cause`` (None: timed
    out); ``info`` and ``tls`` as :func:`describe_connect_error`."""
    reason = describe_connect_error(cause, info, tls)
    if reason == "authorization violation":
        return errors.AuthorizationError(f"could not connect to {where}: {reason}")
    return errors.NoServersError(f"could not connect to {where}: {reason}")


def most_specific(attempts: List[BaseException]) -> BaseException:
    """Of several failed attempts, one that names a cause a user can act on."""
    for exc in attempts:
        if describe_connect_error(exc) not in ("timed out", "connection refused"):
            return exc
    return attempts[-1]


_CLIENT_CERT = "load one signed by a CA the server trusts with ssl_ctx.load_cert_chain() on the tls context"


def describe_connect_error(
    exc: Optional[BaseException], info: Optional[Dict[str, Any]] = None, tls: bool = False
) -> str:
    """A short, secret-free reason for a failed connection attempt; ``info``
    is the last INFO the server sent (if any), ``tls`` whether TLS was asked for.

    A server that verifies client certificates (``tls { verify: true }``)
    rejects a client without one after the TLS 1.3 handshake: the alert
    "certificate required", or, as often, only a reset or EOF. Python's
    SSLContext cannot tell whether a certificate was loaded into it, so that
    case names both causes."""
    if exc is None:
        return "timed out"
    if isinstance(exc, InsecureServer):
        return "TLS error: secure connection not available (the server does not offer TLS)"
    seen: Set[int] = set()
    cur: Optional[BaseException] = exc
    while cur is not None and id(cur) not in seen:  # the most specific cause
        seen.add(id(cur))
        reason = _tls_reason(cur, info, tls) or _reason(cur)
        if reason is not None:
            return reason
        cur = cur.__cause__ or cur.__context__
    return type(exc).__name__


def _tls_reason(exc: BaseException, info: Optional[Dict[str, Any]], tls: bool) -> Optional[str]:
    """What ``exc`` says about authorization or TLS, else None."""
    if isinstance(exc, _nerr.AuthorizationError) or "authorization violation" in str(exc).lower():
        return "authorization violation"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate error: {exc.verify_message or exc.reason}"
    if isinstance(exc, ssl.SSLError) and "CERTIFICATE_REQUIRED" in str(exc.reason):
        return f"TLS error: the server requires a client certificate (verify mode) and none was sent: {_CLIENT_CERT}"
    if _closed_by_peer(exc) and info and info.get("tls_verify"):
        return (
            "TLS error: the server requires a client certificate (verify mode) and closed the connection"
            f" after the TLS handshake: none was sent, or it was refused; {_CLIENT_CERT}"
        )
    if _closed_by_peer(exc) and (tls or info and info.get("tls_required")):
        return f"connection closed by the server during TLS setup: the server may require a client certificate (verify mode); {_CLIENT_CERT}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS error: {exc.reason or exc}"
    return None


def _reason(exc: BaseException) -> Optional[str]:
    """What ``exc`` says about reaching the server (name, refusal, time), else None."""
    if isinstance(exc, socket.gaierror):
        return f"name not resolved ({exc.strerror})"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return None


def _closed_by_peer(exc: BaseException) -> bool:
    """A reset or EOF from the other end (as a server that refused the TLS client is seen)."""
    return isinstance(
        exc, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError, EOFError, ssl.SSLEOFError, _nerr.UnexpectedEOF)
    )
