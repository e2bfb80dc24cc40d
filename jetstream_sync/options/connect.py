"""The checks of ``connect(servers, **options)``: option names, callbacks,
server URLs (and how a URL is shown without its secret).

Pure functions, no I/O; nats-py's own option names are given by the caller
(only ``_core`` reads nats-py).
"""

from __future__ import annotations

import urllib.parse
from typing import Any, Callable, Collection, List, Mapping

from .. import errors

_SCHEMES = frozenset({"nats", "tls", "ws", "wss"})  # what nats-py connects with


def known_options(given: Mapping[str, Any], known: Collection[str]) -> None:
    """Every name in ``given`` is a connect option."""
    unknown = set(given) - set(known)
    if unknown:
        raise errors.InvalidOptionError(f"unknown connect option(s): {', '.join(sorted(unknown))}")


def callback(name: str, cb: Any) -> Callable[..., Any]:
    """A connection callback (``error_cb``, ``closed_cb`` ...)."""
    if not callable(cb):
        raise errors.InvalidOptionError(f"{name} must be callable")
    return cb  # type: ignore[no-any-return]


def check_servers(servers: List[str]) -> List[str]:
    """``servers`` if each is a URL nats-py can connect to; InvalidOptionError otherwise."""
    if not servers or not all(isinstance(s, str) and s for s in servers):
        raise errors.InvalidOptionError("servers must be a URL or a non-empty list of URLs")
    for url in servers:
        scheme = url.partition("://")[0].lower() if "://" in url else "nats"
        if scheme not in _SCHEMES:  # http:// would otherwise fail as an unresolvable host name
            raise errors.InvalidOptionError(
                f"unsupported URL scheme {scheme!r} in {redact_url(url)}: use nats://, tls://, ws:// or wss://"
            )
        full = url if "://" in url else "nats://" + url
        try:  # as nats-py will read it; else its connect fails with a bare "Error"
            parts = urllib.parse.urlsplit(full)
            _ = parts.port
            if "@" in full.partition("://")[2] and "@" not in parts.netloc:
                raise ValueError("a '#', '/' or '?' cut the user part off")  # nats-py would dial the secret as a host
        except ValueError:  # its text may quote a piece of the password: not shown
            raise errors.InvalidOptionError(
                f"invalid server URL {redact_url(url)}: its host or port cannot be read "
                "(percent-encode '#', '/' and '?' in a password or token)"
            ) from None
    return servers


def redact_url(url: str) -> str:
    """``url`` with any password (or token in the user part) replaced by ``***``.

    By hand, not urlsplit: a password with an unencoded ``#``, ``/`` or ``?``
    ends urlsplit's netloc before the ``@``, and the secret came back whole.
    The credentials run to the last ``@`` (one in a path would over-redact,
    never leak)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    at = rest.rfind("@")
    if at < 0:
        return url
    user, colon, _secret = rest[:at].partition(":")
    cred = f"{user}:***" if colon else "***"
    return f"{scheme}{sep}{cred}@{rest[at + 1:]}"
