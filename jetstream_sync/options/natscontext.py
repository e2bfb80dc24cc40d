"""NATS contexts (ADR-21): the ``nats`` CLI's connection profiles, one JSON
file each, read into the settings ``connect(context=...)`` uses.

Where they are: ``$XDG_CONFIG_HOME/nats/context/<name>.json`` (default
``~/.config/nats``); the CLI's selected context is named in
``.../nats/context.txt``. A context may also be given as a path to a JSON file.

The connection fields go through :mod:`.connection`'s settings, the one parser
of connection settings (TLS, credentials, nkeys). A context file is read by
:func:`load_context`; the files it names by :meth:`NatsContext.read_files`
before a connect: credentials by :func:`.credentials.check_credentials`,
certificates by :func:`.tls.tls_context`. Secrets (``password``, ``token``,
``user_jwt``) never reach a message or a ``repr``; JSON errors name the file
and the line, never a value.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from .. import errors
from .checks import api_prefix, inbox_prefix
from .config import validate_name
from .connect import check_servers
from .connection import ConnectionSettings, TlsSettings
from .credentials import check_credentials
from .tls import tls_context

__all__ = [
    "CONTEXT_ENV",
    "CONTEXT_FIELDS",
    "DEFAULT_URL",
    "NatsContext",
    "config_dir",
    "context_for",
    "context_path",
    "selected_context",
    "load_context",
    "parse_context",
]

CONTEXT_ENV = "NATS_CONTEXT"
DEFAULT_URL = "nats://127.0.0.1:4222"  # the CLI's, when a context has no url
# Every field of the format (nats CLI / natscontext), and what it holds.
_TEXT_FIELDS = (
    "name", "description", "url", "socks_proxy", "token", "user", "password", "creds", "nkey", "cert", "key", "ca",
    "nsc", "jetstream_domain", "jetstream_api_prefix", "jetstream_event_prefix", "inbox_prefix", "user_jwt",
    "color_scheme", "windows_cert_store", "windows_cert_match_by", "windows_cert_match",
)  # fmt: skip
CONTEXT_FIELDS: Tuple[str, ...] = (*_TEXT_FIELDS, "tls_first", "windows_ca_certs_match")
# Fields this client cannot honour: connecting without them would go around
# what the file asks for (a proxy, a key in the Windows store), so refused.
_UNSUPPORTED = {
    "socks_proxy": "nats-py cannot connect through a SOCKS proxy",
    "nsc": "nsc lookups run the nsc tool: export the user's credentials and set 'creds' instead",
    "windows_cert_store": "the Windows certificate store is not supported: set 'cert' and 'key' files",
    "windows_cert_match_by": "the Windows certificate store is not supported: set 'cert' and 'key' files",
    "windows_cert_match": "the Windows certificate store is not supported: set 'cert' and 'key' files",
    "windows_ca_certs_match": "the Windows certificate store is not supported: set a 'ca' file",
}
_SECRET = frozenset({"password", "token", "user_jwt"})
_PATHS = ("creds", "nkey", "cert", "key", "ca")  # '~' expanded, as the CLI does
# The connect option each credential field becomes.
_CREDENTIAL_FIELDS = {"user_credentials": "creds", "nkeys_seed": "nkey", "nkeys_seed_str": "nkey"}
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True, repr=False)
class NatsContext:
    """One context file, checked.

    ``connection``: where and how to connect (URLs, credentials, TLS);
    ``jetstream_domain`` / ``jetstream_api_prefix``: the defaults of
    ``nc.jetstream()``; ``inbox_prefix``, ``tls_first``, ``user_jwt``: more
    connect options; ``description``, ``color_scheme``,
    ``jetstream_event_prefix``: kept for the reader, not used to connect.
    """

    path: str
    connection: ConnectionSettings
    jetstream_domain: Optional[str] = None
    jetstream_api_prefix: Optional[str] = None
    inbox_prefix: Optional[str] = None
    tls_first: bool = False
    user_jwt: Optional[str] = field(default=None)
    description: str = ""
    color_scheme: str = ""
    jetstream_event_prefix: Optional[str] = None

    @property
    def name(self) -> str:
        """The context's name: its file name without ``.json``."""
        return Path(self.path).stem

    def connect_options(self) -> Dict[str, Any]:
        """``connect()`` keywords (``servers`` aside), without ``tls``: the
        SSLContext is made from :attr:`connection` ``.tls`` by the caller."""
        out = self.connection.connect_options()
        if self.inbox_prefix is not None:
            out["inbox_prefix"] = self.inbox_prefix
        if self.tls_first:
            out["tls_handshake_first"] = True
        if self.user_jwt is not None:  # the JWT here, its seed in the nkey file
            jwt = self.user_jwt.encode()
            out["user_jwt_cb"] = lambda: bytearray(jwt)
        return out

    @property
    def where(self) -> str:
        """How messages name this context: its name and its file."""
        return f"NATS context {self.name!r} in {self.path}"

    def read_files(self, given: Mapping[str, Any]) -> Dict[str, Any]:
        """The connect keywords of :meth:`connect_options` that ``given``
        does not set, with the files they name read and checked: the creds
        file or nkey seed file, and the SSLContext of the TLS files (not
        made when ``given`` has ``tls``). InvalidOptionError names the
        context, its field and the file."""
        out = {k: v for k, v in self.connect_options().items() if k not in given}
        check_credentials(out, {opt: f"{self.where}: field {field!r}" for opt, field in _CREDENTIAL_FIELDS.items()})
        if self.connection.tls is not None and "tls" not in given:
            out["tls"] = tls_context(self.connection.tls, self.where)
        return out

    def jetstream_options(self) -> Dict[str, str]:
        """``nc.jetstream()`` defaults: ``domain`` or ``api_prefix``."""
        if self.jetstream_domain is not None:
            return {"domain": self.jetstream_domain}
        if self.jetstream_api_prefix is not None:
            return {"api_prefix": self.jetstream_api_prefix}
        return {}

    def __repr__(self) -> str:
        secret = " user_jwt=***" if self.user_jwt else ""
        return f"<NatsContext {self.name!r} {self.path} {self.connection!r}{secret}>"


def config_dir(env: Optional[Mapping[str, str]] = None) -> Path:
    """``$XDG_CONFIG_HOME/nats``, by default ``~/.config/nats``."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "nats"


def context_path(context: Union[str, "os.PathLike[str]"], env: Optional[Mapping[str, str]] = None) -> Path:
    """The file of ``context``: a name (``"prod"``, found in the contexts
    directory) or a path to a JSON file (it has a ``/`` or ends in ``.json``)."""
    text = os.fspath(context)
    if not isinstance(text, str) or not text:
        raise errors.InvalidOptionError(f"context must be a context name or a path to a JSON file, got {context!r}")
    if os.sep in text or "/" in text or text.endswith(".json") or not isinstance(context, str):
        return Path(os.path.expanduser(text))
    if not _NAME.fullmatch(text) or text in (".", ".."):
        raise errors.InvalidOptionError(f"invalid context name {text!r}: use letters, digits, '.', '-' and '_'")
    return config_dir(env) / "context" / f"{text}.json"


def selected_context(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The context to use when none is named: ``$NATS_CONTEXT``, else the
    name in the CLI's ``context.txt``; None when neither says one."""
    env = os.environ if env is None else env
    if env.get(CONTEXT_ENV):
        return env[CONTEXT_ENV]
    try:
        name = (config_dir(env) / "context.txt").read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise errors.InvalidOptionError(f"cannot read the selected context from {exc.filename}: {exc.strerror}") from None
    return name or None


def context_for(context: Any, servers_given: bool, env: Optional[Mapping[str, str]] = None) -> Optional[NatsContext]:
    """The context ``connect(servers, context=context)`` uses: the one named
    (or at a path), the selected one for ``True``, ``$NATS_CONTEXT``'s when
    neither servers nor a context are given; else None."""
    env = os.environ if env is None else env
    if context is None or context is False:
        name = env.get(CONTEXT_ENV) if not servers_given else None
        return load_context(name, env) if name else None
    if context is True:
        selected = selected_context(env)
        if selected is None:
            raise errors.InvalidOptionError(
                f"context=True: no context is selected (set {CONTEXT_ENV} or run 'nats context select NAME')"
            )
        return load_context(selected, env)
    if not isinstance(context, (str, os.PathLike)):
        raise errors.InvalidOptionError(f"context must be a name, a path or True, got {context!r}")
    return load_context(context, env)


def load_context(context: Union[str, "os.PathLike[str]"], env: Optional[Mapping[str, str]] = None) -> NatsContext:
    """Read and check the context ``context`` (a name or a JSON file's path)."""
    path = context_path(context, env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise errors.InvalidOptionError(f"NATS context {context!s} not found: no file {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise errors.InvalidOptionError(f"cannot read NATS context file {path}: {why}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:  # its msg says where, never what: no secret in it
        raise errors.InvalidOptionError(
            f"NATS context file {path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    return parse_context(data, str(path))


def parse_context(data: Any, path: str) -> NatsContext:
    """The checked settings of one context file's JSON (``path`` names it in
    errors). Fields the format does not have are ignored (newer CLI versions
    add some); empty strings mean "not set", as in the CLI."""
    where = f"NATS context file {path}"
    if not isinstance(data, dict):
        raise errors.InvalidOptionError(f"{where} must hold a JSON object, got a {type(data).__name__}")
    values = {k: _typed(where, k, v) for k, v in data.items() if k in CONTEXT_FIELDS}
    for key, why in _UNSUPPORTED.items():
        if values.get(key):
            raise errors.InvalidOptionError(f"{where}: field {key!r} is not supported ({why})")

    def text(key: str) -> Optional[str]:
        value = values.get(key)
        if not value:
            return None
        return os.path.expanduser(str(value)) if key in _PATHS else str(value)

    urls = [u.strip() for u in (text("url") or DEFAULT_URL).split(",") if u.strip()]
    try:
        check_servers(urls)
        connection = _connection(urls, text)
        domain, prefix = text("jetstream_domain"), text("jetstream_api_prefix")
        if domain is not None:
            validate_name("jetstream_domain", domain)
        if prefix is not None:
            prefix = api_prefix(prefix)
        inbox = None if text("inbox_prefix") is None else inbox_prefix(text("inbox_prefix"))
    except errors.InvalidOptionError as exc:
        raise errors.InvalidOptionError(f"{where}: {exc}") from None
    if domain is not None and prefix is not None:
        raise errors.InvalidOptionError(f"{where} sets both 'jetstream_domain' and 'jetstream_api_prefix': keep one")
    return NatsContext(
        path=path, connection=connection, jetstream_domain=domain, jetstream_api_prefix=prefix,
        inbox_prefix=inbox, tls_first=bool(values.get("tls_first")), user_jwt=text("user_jwt"),
        description=text("description") or "", color_scheme=text("color_scheme") or "",
        jetstream_event_prefix=text("jetstream_event_prefix"),
    )  # fmt: skip


def _typed(where: str, key: str, value: Any) -> Any:
    """``value`` if it has the field's JSON type (the message never shows a secret's value)."""
    wanted: Any = bool if key == "tls_first" else list if key == "windows_ca_certs_match" else str
    if value is None or isinstance(value, wanted):
        return value
    shown = "" if key in _SECRET else f" ({json.dumps(value)[:40]})"
    raise errors.InvalidOptionError(
        f"{where}: field {key!r} must be a JSON {_JSON_TYPE[wanted]}, got a {type(value).__name__}{shown}"
    )


_JSON_TYPE = {str: "string", bool: "boolean (true/false)", list: "list of strings"}


def _connection(urls: List[str], text: Callable[[str], Optional[str]]) -> ConnectionSettings:
    """The connection part, checked as the option strings of the Spark source are."""
    if text("password") and not text("user"):
        raise errors.InvalidOptionError("field 'password' needs field 'user'")
    if text("user_jwt") and not text("nkey"):
        raise errors.InvalidOptionError("field 'user_jwt' needs field 'nkey' (the user's seed file)")
    if text("key") and not text("cert"):
        raise errors.InvalidOptionError("field 'key' needs field 'cert' (the client certificate)")
    if text("cert") and not text("key"):
        raise errors.InvalidOptionError("field 'cert' needs field 'key' (the client certificate's key)")
    tls = TlsSettings(ca=text("ca"), cert=text("cert"), key=text("key"))
    return ConnectionSettings(
        servers=tuple(urls), user=text("user"), password=text("password"), token=text("token"),
        creds=text("creds"), nkey=text("nkey"), tls=None if tls == TlsSettings() else tls,
    )  # fmt: skip
