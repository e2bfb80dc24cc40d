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

import functools
import os
import ssl
import tempfile
from typing import Any, Dict, Mapping, Union

import jetstream_sync as jss

from ..options.connection import ConnectionSettings, TlsSettings, connection_settings, is_pem

__all__ = ["shared_client", "close_all", "connect_options", "Connection"]

# What the helpers take as connection settings: a servers string, a mapping of
# the data source's connection options, or settings already parsed.
Connection = Union[str, Mapping[str, str], ConnectionSettings]


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


@functools.cache  # one context per settings: shared clients are keyed by its identity
def tls_context(tls: TlsSettings) -> ssl.SSLContext:
    """An SSLContext that trusts ``tls.ca`` (else the system's CAs) and
    presents ``tls.cert``/``tls.key`` when given. PEM texts are written to a
    private temporary directory for ``load_cert_chain`` and removed at once."""
    ca_pem = tls.ca is not None and is_pem(tls.ca)
    try:
        ctx = ssl.create_default_context(cafile=None if ca_pem else tls.ca, cadata=tls.ca if ca_pem else None)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise jss.InvalidOptionError(
            f"option 'tls.ca': the CA certificates could not be loaded ({_why(exc)})"
        ) from None
    if tls.cert is None:
        return ctx
    with tempfile.TemporaryDirectory(prefix="jss-tls-") as private:  # mode 0700
        cert, key = (_as_file(private, part, text) for part, text in (("cert", tls.cert), ("key", tls.key)))
        try:
            ctx.load_cert_chain(cert, key, password=tls.key_password)
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise jss.InvalidOptionError(
                f"options 'tls.cert'/'tls.key': the client certificate and key could not be loaded ({_why(exc)})"
            ) from None
    return ctx


def _as_file(directory: str, part: str, text: Any) -> Any:
    """A path for ``text``: itself, or a file holding it when it is PEM text."""
    if text is None or not is_pem(text):
        return text
    path = os.path.join(directory, f"{part}.pem")
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(text)
    return path


def _why(exc: BaseException) -> str:
    """What went wrong, without the value (a PEM key must not reach a message)."""
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason or exc.__class__.__name__)
    if isinstance(exc, OSError):
        return f"{exc.strerror}: {exc.filename}" if exc.filename else str(exc.strerror)
    return exc.__class__.__name__


def shared_client(connection: Connection) -> jss.Client:
    """This process's client for these settings, connecting on first use.

    ``connection``: a servers string, a mapping of the data source's
    connection options (see :func:`connect_options`), or parsed settings.
    One client per process and settings, as :func:`jetstream_sync.shared_client`
    keeps them: a closed client, or one inherited over fork(), is replaced.
    """
    kwargs = connect_options(connection)
    return jss.shared_client(kwargs.pop("servers"), **kwargs)


def close_all(timeout: float = 5.0) -> None:
    """Close every shared client of this process (tests, or ``reuse=false`` workers)."""
    jss.close_shared_clients(timeout=timeout)
