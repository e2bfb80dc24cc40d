"""One client per process and connection settings, for Spark executors.

Spark reuses Python workers across tasks, so a connection made by one task
serves the next. A client is never pickled or captured in a closure: only the
settings travel, and each process makes its own client from them. Clients of
a parent process are dropped in a forked child (they would share its socket).
"""

from __future__ import annotations

import os
import ssl
import threading
from typing import Any, Dict, Mapping, Optional, Tuple

import jetstream_sync as jss

__all__ = ["shared_client", "close_all", "connect_options", "connection_settings"]

_lock = threading.Lock()
_clients: Dict[Tuple[Any, ...], jss.Client] = {}
_pid = os.getpid()

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
    as they are. A closed client, or one inherited over fork(), is replaced.
    """
    settings = connect_options(options) if options is not None else {}
    settings.update(connect_kwargs)
    key = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in settings.items()))
    _check_pid()
    with _lock:
        client = _clients.get(key)
        if client is not None and not client.is_closed:
            return client
        kwargs = dict(settings)
        servers = kwargs.pop("servers", "nats://127.0.0.1:4222")
        kwargs.setdefault("name", f"jetstream-sync-spark-{os.getpid()}")  # one per process: visible in /connz
        if isinstance(kwargs.get("tls"), tuple):
            kwargs["tls"] = _tls_context(kwargs["tls"])
        # Bounded reconnects: a worker must not retry forever after the server is gone.
        kwargs.setdefault("max_reconnect_attempts", 30)
        kwargs.setdefault("reconnect_time_wait", 1)
        client = _clients[key] = jss.connect(servers, **kwargs)
        return client


def close_all(timeout: float = 5.0) -> None:
    """Close every cached client of this process (tests, or ``reuse=false`` workers)."""
    _check_pid()
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close(timeout=timeout)


def _check_pid() -> None:
    global _pid, _lock
    if os.getpid() != _pid:  # forked: the parent's clients are not ours to use or close
        _pid = os.getpid()
        _lock = threading.Lock()
        _clients.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_check_pid)
