"""The SSLContext of connection settings' ``tls.*`` values, made in the
process that connects (a Spark executor, a ``connect(context=...)``): the
one place that reads certificate files and says what is wrong with them
(each file checked first, as credential files are, by
:func:`.credentials.file_problem`).
Nothing of a key (a path is shown, PEM text never) reaches a message.
"""

from __future__ import annotations

import functools
import os
import ssl
import tempfile
from typing import Any, Optional

from .. import errors
from .connection import TlsSettings, is_pem
from .credentials import file_problem

__all__ = ["tls_context"]


@functools.cache  # one context per settings: shared clients are keyed by its identity
def tls_context(tls: TlsSettings, where: Optional[str] = None) -> ssl.SSLContext:
    """An SSLContext that trusts ``tls.ca`` (else the system's CAs) and
    presents ``tls.cert``/``tls.key`` when given. PEM texts are written to a
    private temporary directory for ``load_cert_chain`` and removed at once.
    ``where`` names the file the settings came from in messages (a context
    file: its fields ``ca``, ``cert``, ``key``); None for the options
    ``tls.ca``, ``tls.cert``, ``tls.key``."""
    ca_pem = tls.ca is not None and is_pem(tls.ca)
    _check_files(tls, where)
    try:
        ctx = ssl.create_default_context(cafile=None if ca_pem else tls.ca, cadata=tls.ca if ca_pem else None)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise errors.InvalidOptionError(
            f"{_names(where, 'ca')}: the CA certificates could not be loaded ({_why(exc)}: {_files(tls.ca)})"
        ) from None
    if tls.cert is None:
        return ctx
    with tempfile.TemporaryDirectory(prefix="jss-tls-") as private:  # mode 0700
        cert, key = (_as_file(private, part, text) for part, text in (("cert", tls.cert), ("key", tls.key)))
        try:
            ctx.load_cert_chain(cert, key, password=tls.key_password)
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise errors.InvalidOptionError(
                f"{_names(where, 'cert', 'key')}: the client certificate and key could not be loaded "
                f"({_why(exc)}: {_files(tls.cert, tls.key)})"
            ) from None
    return ctx


def _check_files(tls: TlsSettings, where: Optional[str]) -> None:
    """Each file named (PEM texts aside) exists and can be read: else which one, and why."""
    for parts, value, what in ((("ca",), tls.ca, "the CA certificates"),
                               (("cert", "key"), tls.cert, "the client certificate and key"),
                               (("cert", "key"), tls.key, "the client certificate and key")):  # fmt: skip
        if value is None or is_pem(value):
            continue
        problem = file_problem(value)
        if problem is not None:
            raise errors.InvalidOptionError(f"{_names(where, *parts)}: {what} could not be loaded ({problem}: {value})")


def _names(where: Optional[str], *parts: str) -> str:
    """How a message names the settings: options ``'tls.cert'/'tls.key'``, or a file's fields."""
    if where is None:
        return ("option " if len(parts) == 1 else "options ") + "/".join(f"'tls.{p}'" for p in parts)
    return f"{where}: " + ("field " if len(parts) == 1 else "fields ") + "/".join(f"{p!r}" for p in parts)


def _as_file(directory: str, part: str, text: Any) -> Any:
    """A path for ``text``: itself, or a file holding it when it is PEM text."""
    if text is None or not is_pem(text):
        return text
    path = os.path.join(directory, f"{part}.pem")
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(text)
    return path


def _files(*values: Optional[str]) -> str:
    """The files a message names: their paths, a PEM text as such (never its content)."""
    return ", ".join("PEM text" if is_pem(v) else v for v in dict.fromkeys(values) if v is not None)


def _why(exc: BaseException) -> str:
    """What went wrong, without the value (a PEM key must not reach a message)."""
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason or exc.__class__.__name__)
    if isinstance(exc, OSError):
        return str(exc.strerror or exc.__class__.__name__)
    return exc.__class__.__name__
