"""One client per process and connection settings, for Spark executors.

Spark reuses Python workers across tasks, so a connection made by one task
serves the next. A client is never pickled or captured in a closure: only the
settings travel, and each process makes its own client from them through
:func:`jetstream_sync.shared_client` (which drops a parent's clients in a
forked child: they would share its socket).
"""

from __future__ import annotations

import functools
import os
import ssl
from typing import Any, Dict, Mapping, Optional, Tuple

import jetstream_sync as jss

__all__ = ["shared_client", "close_all", "connect_options", "connection_settings"]

# Data source option (lower case) -> jetstream_sync.connect() keyword.
_PASS_THROUGH = {
    "user": "user",
    "password": "password",
    "token": "token",
    "creds": "user_credentials",
    "nkey": "nkeys_seed",
    "name": "name",
}


_CONNECTION_KEYS = {"servers", *_PASS_THROUGH}


def connection_settings(options: Mapping[str, str]) -> Tuple[Tuple[str, str], ...]:
    """The connection options among data-source options (lower-cased keys),
    as a picklable, hashable tuple to ship to executors."""
    return tuple(sorted((k, v) for k, v in options.items() if k in _CONNECTION_KEYS or k.startswith("tls.")))


def connect_options(options: Mapping[str, str]) -> Dict[str, Any]:
    """connect() keywords from data-source style options (string values,
    case-insensitive keys): ``servers``, ``user``, ``password``, ``token``,
    ``creds`` (credentials file), ``nkey`` (seed file), ``tls.ca``,
    ``tls.cert``, ``tls.key``, ``name``."""
    opts = {k.lower(): v for k, v in options.items()}
    servers = opts.get("servers") or "nats://127.0.0.1:4222"
    out: Dict[str, Any] = {"servers": [s.strip() for s in servers.split(",") if s.strip()]}
    for key, kw in _PASS_THROUGH.items():
        if opts.get(key):
            out[kw] = opts[key]
    tls = {k: opts[f"tls.{k}"] for k in ("ca", "cert", "key") if opts.get(f"tls.{k}")}
    if tls:
        out["tls"] = tuple(sorted(tls.items()))  # made into an SSLContext in the process that connects
    return out


@functools.cache  # one context per spec: shared clients are keyed by its identity
def _tls_context(spec: Tuple[Tuple[str, str], ...]) -> ssl.SSLContext:
    files = dict(spec)
    ctx = ssl.create_default_context(cafile=files.get("ca"))
    if files.get("cert"):
        ctx.load_cert_chain(files["cert"], files.get("key"))
    return ctx


def shared_client(options: Optional[Mapping[str, Any]] = None, **connect_kwargs: Any) -> jss.Client:
    """This process's client for these settings, connecting on first use.

    ``options`` are data-source style string options (see
    :func:`connect_options`); keywords go to :func:`jetstream_sync.connect`
    as they are. One client per process and settings, as
    :func:`jetstream_sync.shared_client` keeps them: a closed client, or one
    inherited over fork(), is replaced.
    """
    settings = connect_options(options) if options is not None else {}
    settings.update(connect_kwargs)
    servers = settings.pop("servers", "nats://127.0.0.1:4222")
    settings.setdefault("name", f"jetstream-sync-spark-{os.getpid()}")  # one per process: visible in /connz
    if isinstance(settings.get("tls"), tuple):
        settings["tls"] = _tls_context(settings["tls"])
    # Bounded reconnects: a worker must not retry forever after the server is gone.
    settings.setdefault("max_reconnect_attempts", 30)
    settings.setdefault("reconnect_time_wait", 1)
    return jss.shared_client(servers, **settings)


def close_all(timeout: float = 5.0) -> None:
    """Close every shared client of this process (tests, or ``reuse=false`` workers)."""
    jss.close_shared_clients(timeout=timeout)
