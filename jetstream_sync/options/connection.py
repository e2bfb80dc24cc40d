"""Connection settings given as option strings: the one parser of them for
the Spark data source (reader and writer), ``publish_partition`` and the
Spark ``shared_client``. Pure, no I/O: files named here are read by the
process that connects (an executor), never by this module.

Every value is plain text, so the settings pickle as they are and travel to
executors; nothing (an ``SSLContext``, a callback) has to. Secrets
(``password``, ``token``, ``nkey``, ``tls.key``, ``tls.keyPassword``) never
appear in an error message or a ``repr``; URLs are shown without their
password (:func:`~.connect.redact_url`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from .. import errors
from .connect import check_servers, redact_url
from .credentials import is_nkey_seed

__all__ = [
    "CONNECTION_OPTIONS",
    "TlsSettings",
    "ConnectionSettings",
    "option_strings",
    "connection_from",
    "connection_settings",
    "is_pem",
]

# In their documented spelling; compared case-insensitively (Spark lower-cases keys).
CONNECTION_OPTIONS: Tuple[str, ...] = (
    "servers", "user", "password", "token", "creds", "nkey", "name",
    "tls.ca", "tls.cert", "tls.key", "tls.keyPassword",
)  # fmt: skip
HELPER_ROLE = "publish_partition/shared_client"


def is_pem(value: str) -> bool:
    """True for PEM text (``-----BEGIN ...``), False for a file path."""
    return "-----BEGIN" in value


def _shown(value: Optional[str], secret: bool) -> Optional[str]:
    if value is None:
        return None
    if secret:
        return "***"
    return "<PEM>" if is_pem(value) else value


@dataclass(frozen=True, repr=False)
class TlsSettings:
    """``tls.ca`` / ``tls.cert`` / ``tls.key``: each a file path or PEM text;
    ``tls.keyPassword`` decrypts an encrypted key. Hashable: one SSLContext
    per distinct settings in a process."""

    ca: Optional[str] = None
    cert: Optional[str] = None
    key: Optional[str] = None
    key_password: Optional[str] = None

    def __repr__(self) -> str:
        parts = (("ca", self.ca, False), ("cert", self.cert, False), ("key", self.key, True),
                 ("key_password", self.key_password, True))  # fmt: skip
        return "TlsSettings(" + ", ".join(f"{n}={_shown(v, s)!r}" for n, v, s in parts if v is not None) + ")"


@dataclass(frozen=True, repr=False)
class ConnectionSettings:
    """Where and how to connect, parsed from option strings.

    ``servers``: the URLs (``servers`` option, comma-separated; required).
    ``user``/``password``, ``token``: credentials; ``creds``: a credentials
    file; ``nkey``: an nkey seed file, or the seed itself; ``name``: the
    connection name (default ``jetstream-sync-spark-<pid>``); ``tls``: see
    :class:`TlsSettings`.
    """

    servers: Tuple[str, ...]
    user: Optional[str] = None
    password: Optional[str] = None
    token: Optional[str] = None
    creds: Optional[str] = None
    nkey: Optional[str] = None
    name: Optional[str] = None
    tls: Optional[TlsSettings] = None

    def connect_options(self) -> Dict[str, Any]:
        """``jetstream_sync.connect()`` keywords, without ``servers`` and ``tls``
        (the SSLContext is made by the process that connects)."""
        out: Dict[str, Any] = {}
        for key, value in (("user", self.user), ("password", self.password), ("token", self.token),
                           ("user_credentials", self.creds), ("name", self.name)):  # fmt: skip
            if value is not None:
                out[key] = value
        if self.nkey is not None:
            out["nkeys_seed_str" if is_nkey_seed(self.nkey) else "nkeys_seed"] = self.nkey
        return out

    def __repr__(self) -> str:
        shown = [f"servers={tuple(redact_url(s) for s in self.servers)!r}"]
        for key, value, secret in (("user", self.user, False), ("password", self.password, True),
                                   ("token", self.token, True), ("creds", self.creds, False),
                                   ("nkey", self.nkey, True), ("name", self.name, False)):  # fmt: skip
            if value is not None:
                shown.append(f"{key}={_shown(value, secret)!r}")
        if self.tls is not None:
            shown.append(f"tls={self.tls!r}")
        return f"ConnectionSettings({', '.join(shown)})"


def _closest(key: str, known: Iterable[str], cutoff: float) -> Optional[str]:
    """The known name most like ``key``; or one that ``key`` extends (``tls.certificate``)."""
    spelled = {k.lower(): k for k in known}
    low = key.lower()
    close = difflib.get_close_matches(low, list(spelled), n=1, cutoff=cutoff)
    if not close:
        close = sorted((k for k in spelled if len(k) >= 4 and low.startswith(k)), key=len, reverse=True)
    return spelled[close[0]] if close else None


def option_strings(
    given: Mapping[str, Any], role: str, known: Iterable[str], elsewhere: Optional[Mapping[str, Iterable[str]]] = None
) -> Dict[str, str]:
    """``given`` with lower-case keys, once every key is one of ``known``
    (compared case-insensitively) and every value is text.

    An unknown key raises InvalidOptionError naming the closest known one
    ("did you mean 'subjects'?"), or listing them all; a key that is an
    option of another role (``elsewhere``: role -> its options) says so.
    """
    known = tuple(known)
    lower = {k.lower() for k in known}
    out: Dict[str, str] = {}
    for key, value in given.items():
        low = str(key).lower()
        if low not in lower:
            raise errors.InvalidOptionError(_unknown(str(key), role, known, elsewhere or {}))
        if not isinstance(value, str):
            raise errors.InvalidOptionError(f"option {key!r} must be a string, got a {type(value).__name__}")
        out[low] = value
    return out


def _unknown(key: str, role: str, known: Tuple[str, ...], elsewhere: Mapping[str, Iterable[str]]) -> str:
    spelled = {n.lower(): n for names in elsewhere.values() for n in names}

    def roles_of(option: str) -> str:
        return " and ".join(r for r, names in elsewhere.items() if option.lower() in {n.lower() for n in names})

    if key.lower() in spelled:  # another role's option: a typo only if nearly identical to one of ours
        name = spelled[key.lower()]
        close = _closest(key, known, 0.9)
        hint = f"; did you mean {close!r}?" if close else ""
        return f"unknown option {name!r} for {role}{hint} ({name!r} is an option of {roles_of(name)} only)"
    close = _closest(key, known, 0.75)
    if close is not None:
        return f"unknown option {key!r} for {role}; did you mean {close!r}?"
    other = _closest(key, spelled.values(), 0.75)
    if other is not None:
        return f"unknown option {key!r} for {role}; did you mean {other!r}? (an option of {roles_of(other)} only)"
    return f"unknown option {key!r} for {role}; its options are: {', '.join(known)}"


def connection_from(given: Mapping[str, str]) -> ConnectionSettings:
    """The connection settings among checked options (lower-case keys, see
    :func:`option_strings`). ``servers`` is required: there is no default
    server, a forgotten option must not read whatever listens on localhost."""
    servers = [s.strip() for s in given.get("servers", "").split(",") if s.strip()]
    if not servers:
        raise errors.InvalidOptionError(
            "option 'servers' is required: the NATS server URLs, comma-separated (e.g. nats://127.0.0.1:4222)"
        )
    check_servers(servers)

    def text(key: str) -> Optional[str]:
        value = given.get(key)
        return value if value else None

    if text("password") and not text("user"):
        raise errors.InvalidOptionError("option 'password' needs option 'user'")
    tls = TlsSettings(text("tls.ca"), text("tls.cert"), text("tls.key"), text("tls.keypassword"))
    if tls.key and not tls.cert:
        raise errors.InvalidOptionError("option 'tls.key' needs option 'tls.cert' (the client certificate)")
    if tls.key_password and not tls.cert:
        raise errors.InvalidOptionError("option 'tls.keyPassword' needs options 'tls.cert' and 'tls.key'")
    return ConnectionSettings(
        servers=tuple(servers), user=text("user"), password=text("password"), token=text("token"),
        creds=text("creds"), nkey=text("nkey"), name=text("name"), tls=tls if tls != TlsSettings() else None,
    )  # fmt: skip


def connection_settings(connection: Any) -> ConnectionSettings:
    """The settings of ``publish_partition`` and the Spark ``shared_client``:
    a servers string (comma-separated URLs), a mapping of the data source's
    connection options (``{"servers": ..., "tls.ca": ..., "user": ...}``),
    or settings already parsed."""
    if isinstance(connection, ConnectionSettings):
        return connection
    if isinstance(connection, str):
        connection = {"servers": connection}
    if not isinstance(connection, Mapping):
        raise errors.InvalidOptionError(
            "connection settings must be a servers string or a mapping of option strings "
            f"(servers, tls.ca, user ...), got a {type(connection).__name__}"
        )
    return connection_from(option_strings(connection, HELPER_ROLE, CONNECTION_OPTIONS))
