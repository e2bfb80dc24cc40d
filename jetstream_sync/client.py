"""connect() and Client: the public face of one connection core, with its
JetStream context (the core NATS calls are :class:`CoreClient`, ``core.py``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Union

from . import options as _options
from ._core.connection import Connection
from ._core.lazy import lazy_module
from .core import CoreClient
from .jetstream import JetStream

# NATS contexts, services and the system client: imported at their first use
# (a process that only reads streams never needs them; _core/lazy.py).
if TYPE_CHECKING:
    from . import services
    from .options import natscontext
    from .options.natscontext import NatsContext
    from .services import Service
    from .system import SystemClient, client as system_client
else:
    natscontext = lazy_module("jetstream_sync.options.natscontext")
    services = lazy_module("jetstream_sync.services")
    system_client = lazy_module("jetstream_sync.system.client")

__all__ = ["connect", "Client"]


def connect(
    servers: Union[str, List[str], None] = None,
    *,
    context: Union[None, bool, str, "os.PathLike[str]"] = None,
    **options: Any,
) -> "Client":
    """Connect to NATS and return a :class:`Client`.

    ``servers``: a URL or a list of URLs. Without it, the URL comes from the
    NATS context named by ``context`` or, when ``context`` is not given, by
    the ``NATS_CONTEXT`` environment variable; else ``nats://127.0.0.1:4222``.

    ``context``: a ``nats`` CLI context (ADR-21): a name (``"prod"``, read
    from ``$XDG_CONFIG_HOME/nats/context/prod.json``, default
    ``~/.config/nats``), a path to a context JSON file, or ``True`` for the
    context the CLI has selected (``NATS_CONTEXT``, else ``context.txt``).
    Its URL, credentials (user/password, token, creds, nkey, user JWT), TLS
    files (cert, key, ca, tls_first) and inbox prefix become connect
    options; its JetStream domain or API prefix become the defaults of
    :meth:`Client.jetstream`. Arguments given here win over the context's,
    each on its own (``servers=`` replaces its URL, ``tls=`` its TLS files,
    ``user=`` its user). A missing or broken context file raises
    :class:`InvalidOptionError` naming the file; secrets are never shown.

    Credential files (``user_credentials``: a creds file or a ``(JWT file,
    seed file)`` pair; ``nkeys_seed``; a context's ``creds``, ``nkey``,
    ``cert``, ``key``, ``ca``) are read and checked before anything
    connects: a missing, unreadable or malformed one raises
    :class:`InvalidOptionError` naming the option (or the context and its
    field) and the file, never its content.

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
    # Servers given and no context asked for: no context, as context_for() would
    # say, without importing natscontext.py (each Spark worker connects so).
    if servers is not None and (context is None or context is False):
        nats_context = None
    else:
        nats_context = natscontext.context_for(context, servers_given=servers is not None)
    jetstream_defaults: Dict[str, str] = {}
    if nats_context is not None:
        options = {**nats_context.read_files(given=options), **options}  # explicit arguments win
        jetstream_defaults = nats_context.jetstream_options()
        if servers is None:
            servers = list(nats_context.connection.servers)
    conn = Connection("jetstream-sync")
    conn.connect(natscontext.DEFAULT_URL if servers is None else servers, options)
    return Client(conn, jetstream_defaults=jetstream_defaults, nats_context=nats_context)


class Client(CoreClient):
    """A NATS connection usable from any number of threads.

    Create it with :func:`connect`. Every method blocks the calling thread
    only; the connection itself is driven by a background loop thread.
    """

    def __init__(
        self,
        conn: Connection,
        *,
        jetstream_defaults: Optional[Mapping[str, str]] = None,
        nats_context: Optional[NatsContext] = None,
    ) -> None:
        super().__init__(conn)
        self._connection = conn  # what its JetStream contexts use
        self._jetstream_defaults = dict(jetstream_defaults or {})  # a NATS context's domain or API prefix
        self.nats_context = nats_context
        """The NATS context this client was connected with (``connect(context=...)``), or None."""

    def jetstream(
        self, *, domain: Optional[str] = None, api_prefix: Optional[str] = None, timeout: float = 5.0
    ) -> "JetStream":
        """A :class:`JetStream` context on this connection.

        Without ``domain`` and ``api_prefix``, those of the NATS context the
        client connected with (if any) apply."""
        if domain is None and api_prefix is None:
            domain = self._jetstream_defaults.get("domain")
            api_prefix = self._jetstream_defaults.get("api_prefix")
        return JetStream(self._connection, client=self, domain=domain, api_prefix=api_prefix, timeout=timeout)

    def system(
        self, *, timeout: float = _options.DEFAULT_SYSTEM_TIMEOUT, expected: Optional[int] = None
    ) -> SystemClient:
        """A :class:`SystemClient`: the servers' monitoring endpoints (varz,
        jsz, healthz ...) over the system account; this client's user needs
        system-account rights.

        ``timeout`` (seconds, default 2.0) bounds each call; ``expected``
        (default None) is the number of servers to wait for: a call returns
        as soon as that many answered, else half a second after the last
        answer (or at ``timeout``)."""
        self._connection.check()
        return system_client.SystemClient(self, timeout=timeout, expected=expected)

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
        once; it ends with ``svc.stop()``, ``svc.drain()``, or with this
        client: ``drain()`` drains it first, ``close()`` ends it at once.
        """
        conn = self._connection
        conn.check()
        opts = _options.service_options(name, version, description, metadata, queue_group, workers)
        return services.Service(conn, opts)

    def __enter__(self) -> "Client":
        return self
