"""The checks every argument goes through: durations, counts, subjects,
names, headers and the wire's limits (control line, payload).

Pure functions, no I/O. Bad input raises ``errors.InvalidOptionError`` (a
``ValueError``) naming the argument and the value. Durations are seconds here
and nanoseconds on the wire (``NS_PER_SECOND``).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import inspect
import math
import re
from typing import Any, List, Literal, Mapping, Optional, Set, Tuple

from .. import errors

NS_PER_SECOND = 1_000_000_000

# Validation

# A Go time.Duration is int64 nanoseconds (~292 years); 10 years is plenty and
# keeps int(MAX_DURATION * 1e9) far inside int64.
MAX_DURATION = 10 * 365 * 86400.0

MAX_CONTROL_LINE = 4096  # nats-server's default max_control_line
DEFAULT_INBOX_PREFIX = "_INBOX"  # nats-py's
_NUID_LEN = 22
MAX_NAME_LEN = 255  # nats-server's JSMaxNameLen (bytes)
ACK_PREFIX = "$JS.ACK."
_SIZE_DIGITS = len(str(2**31 - 1))  # the server's max_payload is an int32

_BAD_SUBJECT_CHAR = re.compile(r"[\s\x00-\x1f\x7f]")
_BAD_NAME_CHAR = re.compile(r"[\s\x00-\x1f\x7f.*>/\\]")
_HEADER_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 7230 tchar


def _utf8(what: str, value: str) -> bytes:
    try:
        return value.encode()
    except UnicodeEncodeError:
        raise errors.InvalidOptionError(f"{what} is not valid UTF-8 text: {value!r}") from None


def duration(
    name: str,
    value: Any,
    *,
    minimum: float = 0.0,
    allow_zero: bool = False,
    maximum: float = MAX_DURATION,
    allow_negative: bool = False,
    none_means: str = "",
) -> float:
    """A duration in seconds: an int or float (not bool), finite, > 0 (>= 0 with
    ``allow_zero``), within [minimum, maximum]; ``maximum`` is capped at MAX_DURATION.

    The one check of every duration the API takes. ``allow_negative``: any
    finite value from -maximum passes (where <= 0 means "none", as nats.go's
    -1). ``none_means``: what None means where the caller takes it ("no
    limit"); an infinite value is then told to use None."""
    # The common case, once per call of a hot method such as next(timeout=...):
    # a positive float within bounds passes every check below (NaN fails the comparisons).
    if type(value) is float and 0.0 < value <= maximum and value <= MAX_DURATION and value >= minimum:
        return value
    maximum = min(maximum, MAX_DURATION)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise errors.InvalidOptionError(f"{name} must be a number of seconds, got {value!r}")
    try:
        seconds = float(value)
    except OverflowError:  # an int too big for a float
        raise errors.InvalidOptionError(f"{name} must be at most {maximum:g}s, got {value!r}") from None
    if not math.isfinite(seconds):
        hint = f" (use None for {none_means})" if none_means else ""
        raise errors.InvalidOptionError(f"{name} must be a finite number of seconds{hint}, got {value!r}")
    if allow_negative and seconds <= 0:
        if seconds < -maximum:
            raise errors.InvalidOptionError(f"{name} must be at least {-maximum:g}s, got {value!r}")
        return seconds
    if allow_zero:
        if seconds < 0:
            raise errors.InvalidOptionError(f"{name} must be >= 0 seconds, got {value!r}")
    elif seconds <= 0:
        raise errors.InvalidOptionError(f"{name} must be > 0 seconds, got {value!r}")
    if seconds < minimum:
        raise errors.InvalidOptionError(f"{name} must be at least {minimum:g}s, got {value!r}")
    if seconds > maximum:
        raise errors.InvalidOptionError(f"{name} must be at most {maximum:g}s, got {value!r}")
    return seconds


def as_bytes(data: Any) -> bytes:
    """A message payload as bytes (str is UTF-8 encoded)."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        try:
            return data.encode()
        except UnicodeEncodeError as exc:  # a lone surrogate: not text that UTF-8 can carry
            raise errors.InvalidOptionError(f"data is not valid UTF-8 text: {exc.reason} at {exc.start}") from None
    raise errors.InvalidOptionError(f"data must be bytes or str, not {type(data).__name__}")


def handler(what: str, fn: Any, optional: bool = False) -> Any:
    """A plain callable for a worker thread to call. A coroutine function
    (an ``async def`` ported from nats-py) is refused: called from a thread
    it would only make a coroutine that never runs. So is a generator
    function: called, it returns a generator without running its body (and
    an auto-ack would then settle a message nobody handled)."""
    if fn is None and optional:
        return None
    if not callable(fn):
        raise errors.InvalidOptionError(f"{what} must be callable, got {fn!r}")
    # The __call__ method itself is inspected (an object with async __call__), not callability.
    for f in (fn, getattr(fn, "__call__", None)):  # noqa: B004
        if inspect.iscoroutinefunction(f):
            raise errors.InvalidOptionError(f"{what} must be a plain function: it is called on a worker thread, not awaited")
        if inspect.isgeneratorfunction(f) or inspect.isasyncgenfunction(f):
            raise errors.InvalidOptionError(
                f"{what} must be a plain function, not a generator function: "
                "called, it would return a generator without running its body"
            )
    return fn


class _Default(enum.Enum):
    DEFAULT = "DEFAULT"

    def __repr__(self) -> str:
        return "jetstream_sync.DEFAULT"


# "Use the context's default" for a timeout, where None means "no limit"
# (httpx's USE_CLIENT_DEFAULT): the JetStream calls default to it.
DEFAULT = _Default.DEFAULT
DefaultType = Literal[_Default.DEFAULT]


def timeout_or_default(name: str, value: Any, default: float) -> float:
    """A bounded timeout in seconds: ``DEFAULT`` gives ``default``; None (no
    limit) is refused here, where a call must not wait forever."""
    if value is DEFAULT:
        return default
    if value is None:
        raise errors.InvalidOptionError(
            f"{name}=None would wait without limit, which this call does not do: give seconds, or leave "
            f"{name} out (or pass jetstream_sync.DEFAULT) for the default of {default:g}s"
        )
    return duration(name, value)


def optional_timeout(name: str, value: Any) -> Optional[float]:
    """None (wait forever) or a duration >= 0 in seconds."""
    return None if value is None else duration(name, value, allow_zero=True, none_means="no limit")


def duration_text(name: str, text: Any, default: float) -> float:
    """A duration in seconds given as text (string options such as Spark's);
    ``default`` when None."""
    if text is None:
        return default
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise errors.InvalidOptionError(f"{name} must be a number of seconds, got {text!r}") from None
    return duration(name, value)


# nats-py's connect() options in seconds: (allow_zero, None allowed: "no limit").
_CONNECT_DURATIONS = {
    "connect_timeout": (False, False),
    "reconnect_time_wait": (True, False),
    "ping_interval": (False, False),
    "drain_timeout": (False, False),
    "flush_timeout": (False, True),
}


def connect_durations(given: Mapping[str, Any]) -> None:
    """Check the durations among connect() options (nats-py's, passed through)."""
    for key, (allow_zero, none_ok) in _CONNECT_DURATIONS.items():
        if key in given and not (none_ok and given[key] is None):
            duration(key, given[key], allow_zero=allow_zero, none_means="no limit" if none_ok else "")


_PLAIN_SUBJECT = re.compile(r"[\w$\-:]+(?:\.[\w$\-:]+)*", re.ASCII)
# Plain subjects already checked: a program publishes to a few, many times over.
_CHECKED: Set[str] = set()
checked_subjects = _CHECKED  # read it, never add to it: plain subjects subject() has accepted


def subject(value: Any, *, what: str = "subject", wildcards: bool = False) -> str:
    """A NATS subject: '.'-separated non-empty tokens, no whitespace or control
    characters. With ``wildcards``, '*' may be a whole token and '>' the whole
    last token; without, neither may appear."""
    if type(value) is str:
        if value in _CHECKED:
            return value
        if _PLAIN_SUBJECT.fullmatch(value):  # the common case, one C call
            if len(_CHECKED) < 1024:
                _CHECKED.add(value)
            return value
    if not isinstance(value, str) or not value:
        raise errors.InvalidOptionError(f"{what} must be a non-empty string, got {value!r}")
    bad = _BAD_SUBJECT_CHAR.search(value)
    if bad:
        raise errors.InvalidOptionError(
            f"{what} must not contain whitespace or control characters, got {value!r} (has {bad.group()!r})"
        )
    if not value.isascii():
        _utf8(what, value)
    tokens = value.split(".")
    last = len(tokens) - 1
    for i, token in enumerate(tokens):
        if not token:
            raise errors.InvalidOptionError(
                f"{what} must not have empty tokens (leading, trailing or '..'), got {value!r}"
            )
        if "*" in token or ">" in token:
            if not wildcards:
                raise errors.InvalidOptionError(f"{what} must not contain wildcards ('*', '>'), got {value!r}")
            if token != "*" and not (token == ">" and i == last):
                raise errors.InvalidOptionError(
                    f"{what}: '*' must be a whole token and '>' the whole last token, got {value!r}"
                )
    return value


def subject_covers(pattern: str, subject: str) -> bool:
    """Every subject matching ``subject`` (wildcards allowed) also matches ``pattern``."""
    pt, st = pattern.split("."), subject.split(".")
    for i, token in enumerate(pt):
        if token == ">":
            return len(st) > i
        if i >= len(st) or st[i] == ">" or (token != "*" and (st[i] == "*" or token != st[i])):
            return False
    return len(pt) == len(st)


def subjects_overlap(a: str, b: str) -> bool:
    """Some subject matches both patterns."""
    at, bt = a.split("."), b.split(".")
    for x, y in zip(at, bt):
        if x == ">" or y == ">":
            return True
        if x != y and x != "*" and y != "*":
            return False
    return len(at) == len(bt)


def disjoint_filters(subjects: List[str], what: str = "filters") -> List[str]:
    """``subjects`` without duplicates and without those another one covers
    (the server refuses overlapping filter subjects); order kept. Patterns
    that overlap only in part cannot be merged: InvalidOptionError."""
    out: List[str] = []
    for i, subj in enumerate(subjects):
        if subj in out or any(subject_covers(o, subj) for j, o in enumerate(subjects) if j != i and o != subj):
            continue
        clash = next((o for o in out if subjects_overlap(o, subj)), None)
        if clash is not None:
            raise errors.InvalidOptionError(f"{what} {clash!r} and {subj!r} overlap; give one that covers both")
        out.append(subj)
    return out


def name(kind: str, value: Any) -> str:
    """A stream, consumer or domain name (ADR-6): non-empty, at most 255 bytes,
    no '.', '*', '>', '/', '\\', whitespace or control characters."""
    if not isinstance(value, str) or not value:
        raise errors.InvalidOptionError(f"{kind} name must be a non-empty string, got {value!r}")
    bad = _BAD_NAME_CHAR.search(value)
    if bad:
        raise errors.InvalidOptionError(
            f"{kind} name must not contain '.', '*', '>', '/', '\\', whitespace or control characters,"
            f" got {value!r} (has {bad.group()!r})"
        )
    size = len(_utf8(f"{kind} name", value))
    if size > MAX_NAME_LEN:
        raise errors.InvalidOptionError(
            f"{kind} name must be at most {MAX_NAME_LEN} bytes, got {size} bytes ({value[:32]!r}...)"
        )
    return value


def api_prefix(value: Any) -> str:
    """A JetStream API prefix: a subject without wildcards; one trailing '.' is dropped."""
    if not isinstance(value, str):
        raise errors.InvalidOptionError(f"api_prefix must be a string, got {value!r}")
    prefix = value[:-1] if value.endswith(".") else value
    if not prefix:
        raise errors.InvalidOptionError(f"api_prefix must be a non-empty subject, got {value!r}")
    return subject(prefix, what="api_prefix")


def header_block(headers: Any) -> bytes:
    """The ``NATS/1.0`` header block of a mapping of str to str (or list of str:
    one line per item). Bad keys or values raise; nothing is stripped or replaced."""
    if not isinstance(headers, Mapping):
        raise errors.InvalidOptionError(f"headers must be a mapping of str to str, got {headers!r}")
    lines: List[bytes] = [b"NATS/1.0\r\n"]
    for key, value in headers.items():
        if not isinstance(key, str) or not _HEADER_TOKEN.fullmatch(key):
            raise errors.InvalidOptionError(
                f"header name must be a non-empty str of RFC 7230 token characters"
                f" (no ':', whitespace or control characters), got {key!r}"
            )
        if isinstance(value, str):
            values = [value]
        elif isinstance(value, (list, tuple)):
            values = list(value)
        else:
            raise errors.InvalidOptionError(f"header {key!r} value must be a str or a list of str, got {value!r}")
        for item in values:
            if not isinstance(item, str):
                raise errors.InvalidOptionError(f"header {key!r} value must be a str, got {item!r}")
            if "\r" in item or "\n" in item:
                raise errors.InvalidOptionError(f"header {key!r} value must not contain CR or LF, got {item!r}")
            lines.append(b"%s: %s\r\n" % (key.encode(), _utf8(f"header {key!r} value", item)))
    lines.append(b"\r\n")
    return b"".join(lines)


def reply_room(inbox_prefix: str = DEFAULT_INBOX_PREFIX) -> int:
    """Bytes of the longest reply subject the client makes on ``inbox_prefix``:
    nats-py's request inbox ``<prefix>.<nuid>.<nuid + 4 hex>`` (the async
    publisher's ``<prefix>.<nuid>.<counter>`` is shorter)."""
    return len(inbox_prefix.encode()) + 1 + _NUID_LEN + 1 + _NUID_LEN + 4


def control_line(
    subject: Any, reply: Any = "", *, reply_room: int = 0, max_control_line: int = MAX_CONTROL_LINE
) -> None:
    """Raise if ``HPUB <subject> <reply> <hdr> <total>`` would exceed the server's
    max_control_line (it counts the arguments; sizes are taken at their widest).

    The one check of every line the client writes: a SUB passes its queue
    group as ``reply`` (its sid fits in the room kept for the sizes); a line
    whose reply is an inbox made later passes ``reply_room`` (its length, see
    :func:`reply_room`) instead. UNSUB lines carry only numbers."""
    reply = "" if reply is None else reply
    if not isinstance(subject, str) or not isinstance(reply, str):
        raise errors.InvalidOptionError(f"subject and reply must be strings, got {subject!r} and {reply!r}")
    size = len(subject.encode(errors="replace")) + 2 * (1 + _SIZE_DIGITS)
    if reply:
        size += 1 + len(reply.encode(errors="replace"))
    if reply_room:
        size += 1 + reply_room
    if size > max_control_line:
        extra = len(reply) or reply_room
        with_extra = f" with a {extra}-char reply, queue group or reply inbox" if extra else ""
        raise errors.InvalidOptionError(
            f"subject ({len(subject)} chars){with_extra} is too long: the protocol line"
            f" would be {size} bytes, over the server's max_control_line of {max_control_line}"
        )


def inbox_prefix(value: Any) -> str:
    """The ``inbox_prefix`` connect option (str or bytes): a subject without
    wildcards of at most MAX_NAME_LEN bytes, so that every reply inbox fits
    a protocol line next to a subject."""
    text = value.decode(errors="replace") if isinstance(value, (bytes, bytearray)) else value
    subject(text, what="inbox_prefix")
    if len(text.encode()) > MAX_NAME_LEN:
        raise errors.InvalidOptionError(f"inbox_prefix must be at most {MAX_NAME_LEN} bytes, got {len(text.encode())}")
    return str(text)


def payload_size(total: int, max_payload: Optional[int], what: str = "message") -> None:
    """Raise if ``total`` bytes (headers + data) exceed the server's max_payload
    (0 or None: not known yet, no check)."""
    if max_payload and total > max_payload:
        raise errors.InvalidOptionError(
            f"{what} is {total} bytes (headers + data), over the server's max_payload of {max_payload} bytes"
        )


def ack_reply(reply: Any) -> str:
    """The reply subject of an ackable JetStream message; NotJSMessageError otherwise."""
    if not isinstance(reply, str) or not reply.startswith(ACK_PREFIX) or len(reply) == len(ACK_PREFIX):
        raise errors.NotJSMessageError(
            f"not a JetStream message: reply subject {reply!r} is not a {ACK_PREFIX} subject"
        )
    try:
        return subject(reply, what="ack reply subject")
    except errors.InvalidOptionError as exc:
        raise errors.NotJSMessageError(f"not a JetStream message: {exc}") from None


def term_reason(reason: Any, max_payload: Optional[int]) -> bytes:
    """The body of a ``+TERM`` ack, with an optional one-line str reason."""
    if reason is None or reason == "":
        body = b"+TERM"
    elif not isinstance(reason, str):
        raise errors.InvalidOptionError(f"term reason must be a str, got {reason!r}")
    elif "\r" in reason or "\n" in reason:
        raise errors.InvalidOptionError(f"term reason must not contain CR or LF, got {reason!r}")
    else:
        body = b"+TERM " + _utf8("term reason", reason)
    payload_size(len(body), max_payload, "+TERM with its reason")
    return body


MAX_INT = 2**63 - 1  # the server's counts and sequences are 64-bit


def count(name: str, value: Any, *, allow_zero: bool = False) -> int:
    """An integer >= 1 (>= 0 with ``allow_zero``) that fits the server's 64 bits."""
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise errors.InvalidOptionError(f"{name} must be an integer >= {low}, got {value!r}")
    if value > MAX_INT:
        raise errors.InvalidOptionError(f"{name} must be at most {MAX_INT} (64 bits), got {value!r}")
    return value


def at_least(name: str, value: Any, minimum: int) -> int:
    """An integer (not bool) >= ``minimum``, with no 64-bit cap (see ``count``)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise errors.InvalidOptionError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def integer(name: str, value: Any) -> int:
    """Any int (not bool), of any size or sign."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.InvalidOptionError(f"{name} must be an integer, got {value!r}")
    return value


def pending_limit(name: str, value: Any) -> int:
    """A subscription's pending limit: an integer >= 0, 0 for none."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise errors.InvalidOptionError(f"{name} must be an integer >= 0 (0: no limit), got {value!r}")
    return value


def any_callable(what: str, fn: Any) -> Any:
    """A callable, of any kind (``handler`` is for those a worker thread calls)."""
    if not callable(fn):
        raise errors.InvalidOptionError(f"{what} must be callable, got {fn!r}")
    return fn


def dataclass_from(cls: Any, config: Any, fields: Mapping[str, Any], what: str) -> Any:
    """``config`` with ``fields`` replaced, or a new ``cls(**fields)``; an
    unknown or missing field is "WHAT: <the TypeError's text>"."""
    try:
        return dataclasses.replace(config, **fields) if config is not None else cls(**fields)
    except TypeError as exc:
        raise errors.InvalidOptionError(f"{what}: {exc}") from None


def model_or_dict(name: str, value: Any, cls: Any) -> Any:
    """None, a ``cls`` model or the dict of one (made a ``cls``)."""
    if isinstance(value, dict):
        value = cls.from_response(value)
    if value is not None and not isinstance(value, cls):
        raise errors.InvalidOptionError(f"{name} must be a {cls.__name__} or a dict, got {value!r}")
    return value


def flag(name: str, value: Any) -> bool:
    """A bool, nothing that merely looks true or false."""
    if not isinstance(value, bool):
        raise errors.InvalidOptionError(f"{name} must be a bool, got {value!r}")
    return value


def flags(*pairs: Tuple[str, Any]) -> None:
    """``flag`` over (name, value) pairs, in order: the first wrong one wins."""
    for name, value in pairs:
        flag(name, value)


def exclusive(what: str, a_name: str, a: Any, b_name: str, b: Any, *, mutually: bool = True) -> None:
    """Refuse ``a`` and ``b`` both given (not None): "[what: ]A and B are
    [mutually ]exclusive". Callers for whom an empty value means "not given"
    pass ``value or None``."""
    if a is not None and b is not None:
        head = f"{what}: " if what else ""
        raise errors.InvalidOptionError(f"{head}{a_name} and {b_name} are {'mutually ' if mutually else ''}exclusive")


def exactly_one(what: str, a_name: str, a: Any, b_name: str, b: Any) -> str:
    """The name of the one of ``a``, ``b`` that is given (not None); both or
    neither: "WHAT: give exactly one of A or B"."""
    if (a is None) == (b is None):
        raise errors.InvalidOptionError(f"{what}: give exactly one of {a_name} or {b_name}")
    return a_name if a is not None else b_name


def aware_datetime(name: str, value: Any) -> datetime.datetime:
    """A datetime with a timezone."""
    if not isinstance(value, datetime.datetime) or value.tzinfo is None:
        raise errors.InvalidOptionError(f"{name} must be an aware datetime, got {value!r}")
    return value


def instance(name: str, value: Any, cls: type) -> Any:
    """``value`` if it is a ``cls``: "NAME must be a/an CLS, got TYPE" otherwise."""
    if not isinstance(value, cls):
        article = "an" if cls.__name__[:1] in "AEIOU" else "a"
        raise errors.InvalidOptionError(f"{name} must be {article} {cls.__name__}, got {type(value).__name__}")
    return value


def config_type(config: Any, cls: type) -> None:
    """A ``config=`` argument that is None or a ``cls``."""
    if config is not None and not isinstance(config, cls):
        article = "an" if cls.__name__[:1] in "AEIOU" else "a"
        raise errors.InvalidOptionError(f"config must be {article} {cls.__name__}, not {type(config).__name__}")


def mapping(name: str, value: Any) -> Any:
    """None or a mapping."""
    if value is not None and not isinstance(value, Mapping):
        raise errors.InvalidOptionError(f"{name} must be a mapping, got {value!r}")
    return value


def subjects_sequence(name: str, value: Any) -> None:
    """None or a list or tuple (its subjects are checked where they are used)."""
    if value is not None and not isinstance(value, (list, tuple)):
        raise errors.InvalidOptionError(f"{name} must be a list of subjects, got {value!r}")


def non_empty_subjects(name: str, value: Any) -> List[Any]:
    """A non-empty list or tuple (not a str); its items are checked by the caller."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise errors.InvalidOptionError(f"{name} must be a non-empty list of subjects, got {value!r}")
    return list(value)


def pause_until(until: Any, now: Optional[datetime.datetime] = None) -> datetime.datetime:
    """When a pause ends, as an aware UTC datetime: ``until`` is an aware
    datetime or seconds from ``now`` (> 0)."""
    if isinstance(until, datetime.datetime):
        if until.tzinfo is None or until.utcoffset() is None:
            raise errors.InvalidOptionError(f"pause until needs an aware datetime (with a timezone), got {until!r}")
        return until.astimezone(datetime.timezone.utc)
    seconds = duration("until", until)
    start = now or datetime.datetime.now(datetime.timezone.utc)
    return start + datetime.timedelta(seconds=seconds)


def rfc3339(when: datetime.datetime) -> str:
    """An aware datetime as the server's RFC 3339 UTC form (``...Z``)."""
    return when.astimezone(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


