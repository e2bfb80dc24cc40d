"""The credential files of a connect, read and checked before it: a creds
file, an nkey seed file, a user JWT file (the TLS files are read by
:mod:`.tls`). nats-py reads them only when a server sends a nonce, so a
missing file would fail late with a bare "no such file or directory", or
not at all against a server without authentication (connected with no
credentials); a creds file without its JWT makes nats-py's reader loop.

:func:`check_credentials` is the one check, for ``connect()``'s options, a
NATS context's fields, the Spark source's options and the worker's
``--creds``; each caller says how its messages name the option. A message
shows the path and what is wrong, never the file's content, and never a
value that looks like a credential rather than a path.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any, Mapping, Optional, Tuple

from .. import errors

__all__ = ["CREDENTIAL_OPTIONS", "check_credentials", "file_problem", "is_nkey_seed"]

# connect()'s options that name credential files (or hold a seed): what each holds.
CREDENTIAL_OPTIONS = ("user_credentials", "nkeys_seed", "nkeys_seed_str")
_MAX_SIZE = 1024 * 1024  # far above any creds, seed or certificate file: a larger one is the wrong file

# An nkey seed ("SU..." for a user): base32 text, as opposed to a path to a seed file.
_NKEY_SEED = re.compile(rb"S[A-Z][A-Z2-7]{40,}")
_JWT = re.compile(rb"[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+")
_JWT_MARK = b"BEGIN NATS USER JWT"
_SEED_MARK = b"BEGIN USER NKEY SEED"


def is_nkey_seed(value: str) -> bool:
    """True for an nkey seed itself (``SU...``), False for a path to a seed file."""
    return _NKEY_SEED.fullmatch(value.strip().encode(errors="replace")) is not None


def check_credentials(options: Mapping[str, Any], names: Optional[Mapping[str, str]] = None) -> None:
    """Read and check the credentials among connect ``options``:
    ``user_credentials`` (a creds file's path; a ``(jwt file, seed file)``
    pair; nats-py's ``RawCredentials`` text), ``nkeys_seed`` (a seed file's
    path), ``nkeys_seed_str`` (the seed itself). InvalidOptionError names
    the option (as ``names`` says, default ``option 'user_credentials'``)
    and the file, and says what is wrong with it."""
    names = names or {}
    for option in CREDENTIAL_OPTIONS:
        value = options.get(option)
        if value is None:
            continue
        label = names.get(option) or f"option {option!r}"
        if option == "nkeys_seed_str":
            _seed_text(label, value)
        elif option == "nkeys_seed":
            content = _read(label, "nkey seed file", value, "nkeys_seed_str")
            _seed(label, f"the nkey seed file {os.fspath(value)}", content)
        elif isinstance(value, tuple):
            _pair(label, value)
        elif _is_text_credentials(value):  # nats-py's RawCredentials: the content itself
            _creds(label, "the credentials text", str(value).encode())
        else:
            _creds(label, f"the credentials file {os.fspath(value)}", _read(label, "credentials file", value))


def _is_text_credentials(value: Any) -> bool:
    """nats-py's ``RawCredentials`` (a ``UserString``), told without importing nats-py here."""
    return not isinstance(value, (str, os.PathLike)) and hasattr(value, "data") and isinstance(value.data, str)


def _pair(label: str, value: Tuple[Any, ...]) -> None:
    if len(value) != 2:
        raise errors.InvalidOptionError(f"{label}: a pair (user JWT file, nkey seed file) has 2 paths, got {len(value)}")
    jwt_path, seed_path = value
    jwt = _read(label, "user JWT file", jwt_path)
    if _JWT.fullmatch(jwt.strip()) is None:
        raise errors.InvalidOptionError(f"{label}: the user JWT file {os.fspath(jwt_path)} does not hold a user JWT")
    seed = _read(label, "nkey seed file", seed_path)
    _seed(label, f"the nkey seed file {os.fspath(seed_path)}", seed)
    if seed != seed.strip():  # nats-py reads this one whole, and the seed fails to decode
        raise errors.InvalidOptionError(
            f"{label}: the nkey seed file {os.fspath(seed_path)} must hold the seed alone, "
            "without a line break or spaces around it"
        )


def _read(label: str, what: str, path: Any, text_option: str = "") -> bytes:
    """The content of the file at ``path`` (a regular file, at most 1 MiB)."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise errors.InvalidOptionError(f"{label} must be a path to the {what}, got a {type(path).__name__}")
    name = os.fspath(path)
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if _looks_secret(name):  # a credential where its file's path belongs: never shown
        hint = f" (the seed itself goes in {text_option!r})" if text_option else ""
        raise errors.InvalidOptionError(f"{label} must be a path to the {what}, not its content{hint}")
    try:
        problem = file_problem(name)
        if problem is None:
            with open(name, "rb") as f:
                return f.read(_MAX_SIZE)
    except OSError as exc:
        problem = exc.strerror or type(exc).__name__
    raise errors.InvalidOptionError(f"{label}: cannot read the {what} {name} ({problem})")


def file_problem(path: str) -> Optional[str]:
    """Why the file at ``path`` cannot be read as a small regular file
    (``"No such file or directory"``, ``"Is a directory"``, ``"Permission
    denied"`` ...), or None when it can."""
    try:
        info = os.stat(path)  # before opening: opening a FIFO would block
        if stat.S_ISDIR(info.st_mode):
            return "Is a directory"
        if not stat.S_ISREG(info.st_mode):
            return "not a regular file"
        if info.st_size > _MAX_SIZE:
            return f"too large for a credentials or certificate file: {info.st_size} bytes"
        with open(path, "rb"):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def _looks_secret(text: str) -> bool:
    """A seed, a JWT or a creds file's text given as a path."""
    raw = text.strip().encode(errors="replace")
    return "\n" in text or b"-----BEGIN" in raw or bool(_NKEY_SEED.fullmatch(raw) or _JWT.fullmatch(raw))


def _creds(label: str, what: str, content: bytes) -> None:
    """A creds file's content: a user JWT and an nkey seed, each on the line after its marker."""
    for mark, pattern, holds in ((_JWT_MARK, _JWT, "user JWT"), (_SEED_MARK, _NKEY_SEED, "nkey seed")):
        if _after(content, mark, pattern) is None:
            raise errors.InvalidOptionError(
                f"{label}: {what} holds no {holds} (a line '-----{mark.decode()}-----' followed by the {holds} "
                "on the next line): is it a NATS credentials file?"
            )


def _after(content: bytes, mark: bytes, pattern: "re.Pattern[bytes]") -> Optional[bytes]:
    """The line after the one with ``mark``, when it matches ``pattern`` (as nats-py reads it)."""
    lines = content.splitlines()
    for i, line in enumerate(lines[:-1]):
        if mark in line:
            value = lines[i + 1].strip()
            return value if pattern.fullmatch(value) else None
    return None


def _seed(label: str, what: str, content: bytes) -> None:
    if _NKEY_SEED.fullmatch(content.strip()) is None:
        raise errors.InvalidOptionError(f"{label}: {what} does not hold an nkey seed (one line, 'SU...')")


def _seed_text(label: str, value: Any) -> None:
    """``nkeys_seed_str`` is the seed itself, never read as a file."""
    if not isinstance(value, str):
        raise errors.InvalidOptionError(f"{label} must be an nkey seed (a string), got a {type(value).__name__}")
    if is_nkey_seed(value):
        return
    if os.path.exists(value.strip()):
        raise errors.InvalidOptionError(f"{label} takes the seed itself, not a file: give a seed file as 'nkeys_seed'")
    raise errors.InvalidOptionError(f"{label} is not an nkey seed ('SU...'; its value is not shown)")
