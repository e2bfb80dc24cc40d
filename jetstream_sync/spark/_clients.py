"""One client per process and connection settings, for Spark executors.

Spark reuses Python workers across tasks, so a connection made by one task
serves the next. A client is never pickled or captured in a closure: only the
settings travel (:class:`~jetstream_sync.options.connection.ConnectionSettings`,
plain strings), and each process makes its own client from them through
:func:`jetstream_sync.shared_client` (which drops a parent's clients in a
forked child: they would share its socket). The SSLContext is made here, in
the process that connects, from the ``tls.*`` files or PEM texts.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Mapping, Union

import jetstream_sync as jss

from ..options.connection import ConnectionSettings, connection_settings
from ..options.credentials import check_credentials
from ..options.tls import tls_context

__all__ = ["shared_client", "close_all", "connect_options", "tls_context", "Connection"]

# What the helpers take as connection settings: a servers string, a mapping of
# the data source's connection options, or settings already parsed.
Connection = Union[str, Mapping[str, str], ConnectionSettings]
# The data source's option behind each connect option that names a credential.
_OPTION_NAMES = {"user_credentials": "option 'creds'", "nkeys_seed": "option 'nkey'", "nkeys_seed_str": "option 'nkey'"}


def connect_options(connection: Connection) -> Dict[str, Any]:
    """``jetstream_sync.connect()`` keywords, ``servers`` included, from the
    data source's connection options: ``servers`` (required), ``user``,
    ``password``, ``token``, ``creds`` (credentials file), ``nkey`` (seed
    file or seed), ``name``, ``tls.ca``, ``tls.cert``, ``tls.key`` (each a
    file path or PEM text), ``tls.keyPassword``. Keys are case-insensitive;
    ``jss.connect(**connect_options(opts))`` connects as the data source does.
    """
    settings = connection_settings(connection)
    out: Dict[str, Any] = {"servers": list(settings.servers), **settings.connect_options()}
    if settings.tls is not None:
        out["tls"] = tls_context(settings.tls)
    out.setdefault("name", f"jetstream-sync-spark-{os.getpid()}")  # one per process: visible in /connz
    # Bounded reconnects: a worker must not retry forever after the server is gone.
    out["max_reconnect_attempts"] = 30
    out["reconnect_time_wait"] = 1
    return out


def shared_client(connection: Connection) -> jss.Client:
    """This process's client for these settings, connecting on first use.

    ``connection``: a servers string, a mapping of the data source's
    connection options (see :func:`connect_options`), or parsed settings.
    One client per process and settings, as :func:`jetstream_sync.shared_client`
    keeps them: a closed client, or one inherited over fork(), is replaced.
    """
    kwargs = connect_options(connection)
    check_credentials(kwargs, _OPTION_NAMES)  # named as the data source's options: 'creds', 'nkey'
    return jss.shared_client(kwargs.pop("servers"), **kwargs)


# What else close_all() ends first: the watches of KVLookup (which uses this module).
CLOSE_HOOKS: List[Callable[[], None]] = []


def close_all(timeout: float = 5.0) -> None:
    """Close every shared client of this process (tests, or ``reuse=false``
    workers), after stopping the watches of its :class:`KVLookup` copies."""
    for hook in CLOSE_HOOKS:
        hook()
    jss.close_shared_clients(timeout=timeout)
