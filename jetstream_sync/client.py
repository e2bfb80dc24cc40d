"""connect() and Client: the public face of one connection core, with its
JetStream context (the core NATS calls are :class:`CoreClient`, ``core.py``)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from . import options as _options
from ._core.connection import Connection
from .core import CoreClient
from .jetstream import JetStream
from .services import Service

__all__ = ["connect", "Client"]


def connect(servers: Union[str, List[str]] = "nats://127.0.0.1:4222", **options: Any) -> "Client":
    """Connect to NATS and return a :class:`Client`.

    Every nats-py ``connect`` option passes through (``name``, ``user``,
    ``password``, ``token``, ``tls``, ``user_credentials``, ``nkeys_seed``,
    ``max_reconnect_attempts``, ``reconnect_time_wait``, ``connect_timeout``
    …). Callbacks (``error_cb``, ``disconnected_cb``, ``reconnected_cb``,
    ``closed_cb``, ``discovered_server_cb``) may be plain functions — they run
    on a dedicated callback thread, so they may call this API — or coroutine
    functions, which run on the loop thread.

    Unless ``retry_on_failed_connect=True``, the first connection attempt
    gives up after one pass over ``servers`` (``connect_timeout`` each, 2 s by
    default) and raises :class:`NoServersError` saying why (connection
    refused, name not resolved, a TLS error, a client certificate the server
    requires; :class:`AuthorizationError` for rejected credentials).
    Passwords in URLs never appear in messages.
    """
    conn = Connection("jetstream-sync")
    conn.connect(servers, options)
    return Client(conn)


class Client(CoreClient):
    """A NATS connection usable from any number of threads.

    Create it with :func:`connect`. Every method blocks the calling thread
    only; the connection itself is driven by a background loop thread.
    """

    def __init__(self, conn: Connection) -> None:
        super().__init__(conn)
        self._connection = conn  # what its JetStream contexts use

    def jetstream(
        self, *, domain: Optional[str] = None, api_prefix: Optional[str] = None, timeout: float = 5.0
    ) -> "JetStream":
        """A :class:`JetStream` context on this connection."""
        return JetStream(self._connection, client=self, domain=domain, api_prefix=api_prefix, timeout=timeout)

    def add_service(
        self,
        name: str,
        version: str,
        *,
        description: str = "",
        metadata: Optional[Dict[str, str]] = None,
        queue_group: Optional[str] = None,
        workers: int = _options.DEFAULT_SERVICE_WORKERS,
    ) -> Service:
        """Start an ADR-32 service (the "micro" API of nats.go and nats-py)
        and return it; add endpoints with ``svc.add_endpoint(...)``,
        ``svc.add_group(...)`` or ``@svc.endpoint(...)``.

        ``name`` is ``A-Z a-z 0-9 - _``; ``version`` is SemVer ("1.0.0");
        ``metadata`` maps str to str. Endpoints join ``queue_group``
        (default "q") unless they name their own. Handlers run on
        ``workers`` threads (default 4): above 1 they must be thread-safe.
        The service answers discovery (``$SRV.PING``/``INFO``/``STATS``) at
        once; it ends with ``svc.stop()``, ``svc.drain()``, or when this
        client closes or drains.
        """
        conn = self._connection
        conn.check()
        opts = _options.service_options(name, version, description, metadata, queue_group, workers)
        return Service(conn, opts)

    def __enter__(self) -> "Client":
        return self
