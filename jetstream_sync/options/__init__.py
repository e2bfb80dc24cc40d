"""Argument validation, and the options of messages()/consume() and fetch():
ADR-37 defaults, the pull-request body, the refill rule and the status table.

This module is the one place where arguments are checked: durations,
subjects, names, headers and wire limits. Pure functions, no I/O: everything
here is unit-tested without a server. Bad input raises
``errors.InvalidOptionError`` (a ``ValueError``) naming the argument and the
value. Durations are seconds here and nanoseconds on the wire.
"""

from __future__ import annotations

import datetime
import enum
import inspect
import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple, cast

from .. import errors

__all__ = [
    "MAX_DURATION",
    "MAX_CONTROL_LINE",
    "MAX_NAME_LEN",
    "duration",
    "optional_timeout",
    "connect_durations",
    "duration_text",
    "subject",
    "name",
    "api_prefix",
    "header_block",
    "control_line",
    "reply_room",
    "inbox_prefix",
    "payload_size",
    "ack_reply",
    "term_reason",
    "ConsumeOptions",
    "FetchOptions",
    "PriorityOptions",
    "consume_options",
    "fetch_options",
    "PushOptions",
    "push_options",
    "check_option_names",
    "priority_options",
    "priority_config",
    "pause_until",
    "pull_request",
    "refill",
    "StatusKind",
    "classify_status",
    "pending_from_headers",
]

DEFAULT_MAX_MESSAGES = 500
BYTES_MODE_BATCH = 1_000_000  # ADR-37: batch 0 would mean "one message"
DEFAULT_EXPIRES = 30.0
MIN_EXPIRES = 1.0
MIN_HEARTBEAT = 0.5
MAX_HEARTBEAT = 30.0
MIN_SERVER_HEARTBEAT = 0.1  # a consumer's idle_heartbeat: the server refuses less (10083)
FETCH_HEARTBEAT = 5.0  # fetch/next: heartbeat when expires >= 10 s (nats.go)
FETCH_HEARTBEAT_FROM = 10.0
FETCH_MARGIN = 1.0  # client-side fetch deadline = expires + this, re-armed per message
NO_WAIT_TIMEOUT = 1.0
_NS = 1_000_000_000


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
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise errors.InvalidOptionError(f"{name} must be a number of seconds, got {value!r}")
    maximum = min(maximum, MAX_DURATION)
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


_count = count


@dataclass(frozen=True)
class ConsumeOptions:
    """Validated options of a continuous pull (``messages()`` / ``consume()``).

    ``max_bytes`` is 0 in message mode. ``max_messages`` is the batch of a
    full pull (1,000,000 in bytes mode). With ``limit_bytes`` (both
    max_messages and max_bytes given) the buffer is counted in messages and
    every pull also carries ``max_bytes`` as a per-pull cap (nats.go
    PullMaxMessagesWithBytesLimit). ``stop_after`` (0: never) ends the
    context after that many messages were handed out.
    """

    max_messages: int
    max_bytes: int
    expires: float
    idle_heartbeat: float
    threshold_messages: int
    threshold_bytes: int
    stop_after: int = 0
    limit_bytes: bool = False
    priority: Optional["PriorityOptions"] = None

    @property
    def bytes_mode(self) -> bool:
        """The buffer is bounded in bytes (max_bytes without max_messages)."""
        return self.max_bytes > 0 and not self.limit_bytes


def consume_options(
    max_messages: Optional[int] = None,
    max_bytes: Optional[int] = None,
    expires: Optional[float] = None,
    idle_heartbeat: Optional[float] = None,
    threshold_messages: Optional[int] = None,
    threshold_bytes: Optional[int] = None,
    stop_after: Optional[int] = None,
    priority: Optional["PriorityOptions"] = None,
) -> ConsumeOptions:
    """Defaults and validation of ADR-37 consume options; raises InvalidOptionError.

    ``max_messages`` and ``max_bytes`` together: batch ``max_messages``,
    each pull capped at ``max_bytes`` (thresholds count messages only).
    """
    limit_bytes = max_messages is not None and max_bytes is not None
    if max_bytes is not None:
        mbytes = _count("max_bytes", max_bytes)
        msgs = _count("max_messages", max_messages) if limit_bytes else BYTES_MODE_BATCH
    else:
        mbytes = 0
        msgs = DEFAULT_MAX_MESSAGES if max_messages is None else _count("max_messages", max_messages)
    exp = DEFAULT_EXPIRES if expires is None else duration("expires", expires, minimum=MIN_EXPIRES)
    if idle_heartbeat is None:
        hb = min(exp / 2, MAX_HEARTBEAT)
    else:
        hb = duration("idle_heartbeat", idle_heartbeat, minimum=MIN_HEARTBEAT, maximum=MAX_HEARTBEAT)
        if hb > exp / 2:
            raise errors.InvalidOptionError(f"idle_heartbeat ({hb}s) must be at most half of expires ({exp}s)")
    if threshold_messages is None:
        t_msgs = math.ceil(msgs / 2)
    else:
        t_msgs = _count("threshold_messages", threshold_messages)
        if t_msgs > msgs:
            raise errors.InvalidOptionError(f"threshold_messages ({t_msgs}) must not exceed max_messages ({msgs})")
    if threshold_bytes is None:
        t_bytes = 0 if limit_bytes else math.ceil(mbytes / 2)
    else:
        if not mbytes or limit_bytes:
            raise errors.InvalidOptionError(
                "threshold_bytes needs max_bytes without max_messages (with both, max_bytes only caps each pull)"
            )
        t_bytes = _count("threshold_bytes", threshold_bytes)
        if t_bytes > mbytes:
            raise errors.InvalidOptionError(f"threshold_bytes ({t_bytes}) must not exceed max_bytes ({mbytes})")
    after = 0 if stop_after is None else _count("stop_after", stop_after)
    return ConsumeOptions(msgs, mbytes, exp, hb, t_msgs, t_bytes, after, limit_bytes, priority)


CONSUME_OPTION_NAMES = (
    "max_messages",
    "max_bytes",
    "expires",
    "idle_heartbeat",
    "threshold_messages",
    "threshold_bytes",
    "stop_after",
)


def check_option_names(given: Mapping[str, Any], allowed: Tuple[str, ...], hint: str = "") -> None:
    """InvalidOptionError naming the options that are not in ``allowed``."""
    unknown = set(given) - set(allowed)
    if unknown:
        raise errors.InvalidOptionError(f"unknown option(s): {', '.join(sorted(unknown))}{hint}")


# ADR-15: a push subscription raises its alarm after 3 heartbeats missed (pulls: 2, ADR-37).
PUSH_ALARM_FACTOR = 3
PUSH_OPTION_NAMES = ("heartbeat_alarm",)
_PUSH_HINT = (
    "; a push consumer's pace is set by its config (max_ack_pending, flow_control,"
    " idle_heartbeat, rate_limit_bps), not per messages()/consume()"
)


@dataclass(frozen=True)
class PushOptions:
    """Validated options of a push ``messages()`` / ``consume()``.

    ``heartbeat_alarm``: seconds without any traffic before NoHeartbeatError
    is reported; 0 when the consumer has no idle heartbeat (no watchdog).
    """

    heartbeat_alarm: float


def push_options(idle_heartbeat: Optional[float], given: Mapping[str, Any]) -> PushOptions:
    """Options of a push messages()/consume() on a consumer whose config has
    ``idle_heartbeat`` (seconds, None or 0 = none); raises InvalidOptionError.
    Pull-only options (max_messages, expires …) are refused by name."""
    check_option_names(given, PUSH_OPTION_NAMES, _PUSH_HINT)
    alarm = given.get("heartbeat_alarm")
    if alarm is None:
        return PushOptions(PUSH_ALARM_FACTOR * idle_heartbeat if idle_heartbeat else 0.0)
    if not idle_heartbeat:
        raise errors.InvalidOptionError("heartbeat_alarm needs a consumer with idle_heartbeat set")
    return PushOptions(duration("heartbeat_alarm", alarm, minimum=idle_heartbeat))


def consume_options_from(given: Mapping[str, Any]) -> ConsumeOptions:
    """:func:`consume_options` from keyword arguments, refusing unknown names."""
    check_option_names(given, CONSUME_OPTION_NAMES)
    return consume_options(**given)


@dataclass(frozen=True)
class FetchOptions:
    """Validated options of one pull (``fetch()``, ``fetch_no_wait()``, ``next()``)."""

    max_messages: int
    max_bytes: int
    expires: float  # 0 with no_wait
    idle_heartbeat: float  # 0 = none
    no_wait: bool
    priority: Optional["PriorityOptions"] = None

    @property
    def client_timeout(self) -> float:
        """How long to wait after the last thing received before giving up."""
        return self.expires + FETCH_MARGIN if self.expires else NO_WAIT_TIMEOUT


def fetch_options(
    max_messages: Optional[int] = None,
    max_bytes: Optional[int] = None,
    expires: Optional[float] = None,
    idle_heartbeat: Optional[float] = None,
    no_wait: bool = False,
    priority: Optional["PriorityOptions"] = None,
) -> FetchOptions:
    """Defaults and validation of ADR-37 fetch options; raises InvalidOptionError.

    ``max_messages`` and/or ``max_bytes`` (at least one; the pull ends at
    whichever is reached first). ``no_wait`` with ``expires`` (seconds) is
    nats.java's "no wait, expires in": it waits up to ``expires`` for the
    first messages and returns with what is there; without, nothing waits.
    ``expires`` None: 30 s (no wait: none)."""
    if max_messages is None and max_bytes is None:
        raise errors.InvalidOptionError("give max_messages, max_bytes or both")
    mbytes = _count("max_bytes", max_bytes) if max_bytes is not None else 0
    msgs = _count("max_messages", max_messages) if max_messages is not None else BYTES_MODE_BATCH
    if no_wait:
        if idle_heartbeat:
            raise errors.InvalidOptionError("fetch_no_wait takes no idle_heartbeat")
        exp = duration("expires", expires) if expires is not None else 0.0
        return FetchOptions(msgs, mbytes, exp, 0.0, True, priority)
    exp = duration("expires", DEFAULT_EXPIRES if expires is None else expires)
    if idle_heartbeat is None:
        hb = FETCH_HEARTBEAT if exp >= FETCH_HEARTBEAT_FROM else 0.0
    else:
        hb = duration("idle_heartbeat", idle_heartbeat)
        if hb > exp / 2:
            raise errors.InvalidOptionError(f"idle_heartbeat ({hb}s) must be at most half of expires ({exp}s)")
    return FetchOptions(msgs, mbytes, exp, hb, False, priority)


# Priority groups (ADR-42)

PRIORITY_OPTION_NAMES = ("group", "min_pending", "min_ack_pending", "priority")
PRIORITY_POLICIES = ("none", "overflow", "pinned_client", "prioritized")
MAX_PRIORITY = 9
_GROUP_NAME = re.compile(r"[A-Za-z0-9/_=-]{1,16}")  # the server's validGroupName


@dataclass(frozen=True)
class PriorityOptions:
    """The priority-group fields of every pull of one fetch/messages/consume.
    ``pinned``: the consumer's policy is pinned_client (the engine keeps a pin id)."""

    group: str
    min_pending: int = 0
    min_ack_pending: int = 0
    priority: int = 0
    pinned: bool = False


def group_name(value: Any) -> str:
    """A priority group name as the server allows it: 1-16 of A-Z a-z 0-9 / _ = -."""
    if not isinstance(value, str) or not _GROUP_NAME.fullmatch(value):
        raise errors.InvalidOptionError(
            f"priority group must be 1-16 characters of A-Z, a-z, 0-9, '/', '_', '=', '-', got {value!r}"
        )
    return value


def _policy(config: Any) -> Tuple[List[str], str]:
    """The consumer's (priority_groups, priority_policy) from its cached config."""
    groups = list(getattr(config, "priority_groups", None) or [])
    return groups, str(getattr(config, "priority_policy", None) or "none")


def priority_options(
    config: Any,
    group: Optional[str] = None,
    min_pending: Optional[int] = None,
    min_ack_pending: Optional[int] = None,
    priority: Optional[int] = None,
) -> Optional[PriorityOptions]:
    """Check a pull's priority-group options against the consumer's config
    (``ConsumerConfig`` or None); None when the pull names no group."""
    groups, policy = _policy(config)
    if group is None:
        given = [n for n, v in (("min_pending", min_pending), ("min_ack_pending", min_ack_pending),
                                ("priority", priority)) if v is not None]
        if given:
            raise errors.InvalidOptionError(f"{', '.join(given)} needs group=")
        if groups:
            raise errors.InvalidOptionError(
                f"the consumer has priority groups {groups} (policy {policy!r}): pass group= one of them"
                " (the server refuses a pull without one: 400 Priority Group missing)"
            )
        return None
    group_name(group)
    if not groups:
        raise errors.InvalidOptionError(f"group={group!r} given, but the consumer has no priority groups")
    if group not in groups:
        raise errors.InvalidOptionError(f"group={group!r} is not one of the consumer's priority groups {groups}")
    if (min_pending is not None or min_ack_pending is not None) and policy != "overflow":
        raise errors.InvalidOptionError(
            f"min_pending/min_ack_pending need priority_policy 'overflow', the consumer's is {policy!r}"
        )
    if priority is not None:
        if policy != "prioritized":
            raise errors.InvalidOptionError(f"priority needs priority_policy 'prioritized', the consumer's is {policy!r}")
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= MAX_PRIORITY:
            raise errors.InvalidOptionError(f"priority must be an integer from 0 to {MAX_PRIORITY}, got {priority!r}")
    return PriorityOptions(
        group,
        0 if min_pending is None else _count("min_pending", min_pending),
        0 if min_ack_pending is None else _count("min_ack_pending", min_ack_pending),
        priority or 0,
        policy == "pinned_client",
    )


def priority_config(policy: Any, groups: Any, timeout: Optional[float], deliver_subject: Any) -> Optional[str]:
    """Check a consumer config's ADR-42 fields as the server will; returns the
    policy (None when unset)."""
    if policy is not None and policy not in PRIORITY_POLICIES:
        allowed = ", ".join(repr(p) for p in PRIORITY_POLICIES)
        raise errors.InvalidOptionError(f"priority_policy must be one of {allowed}, got {policy!r}")
    if groups is not None:
        if not isinstance(groups, (list, tuple)):
            raise errors.InvalidOptionError(f"priority_groups must be a list of group names, got {groups!r}")
        for g in groups:
            group_name(g)
    if policy in (None, "none"):
        if groups:
            raise errors.InvalidOptionError("priority_groups need a priority_policy other than 'none'")
        if timeout:
            raise errors.InvalidOptionError("priority_timeout needs a priority_policy other than 'none'")
        return cast(Optional[str], policy)  # None or "none", checked above
    if not groups:
        raise errors.InvalidOptionError(f"priority_policy {policy!r} needs at least one priority group")
    if deliver_subject:
        raise errors.InvalidOptionError("a push consumer (deliver_subject) cannot have a priority_policy")
    return cast(str, policy)  # one of PRIORITY_POLICIES, checked above


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


def pull_request(
    batch: int,
    expires: float = 0.0,
    max_bytes: int = 0,
    idle_heartbeat: float = 0.0,
    no_wait: bool = False,
    priority: Optional[PriorityOptions] = None,
    pin_id: str = "",
) -> bytes:
    """The JSON body of a ``CONSUMER.MSG.NEXT`` request (durations in ns)."""
    body: Dict[str, Any] = {"batch": batch}
    if expires:
        body["expires"] = int(expires * _NS)
    if max_bytes:
        body["max_bytes"] = max_bytes
    if idle_heartbeat:
        body["idle_heartbeat"] = int(idle_heartbeat * _NS)
    if no_wait:
        body["no_wait"] = True
    if priority is not None:
        body["group"] = priority.group
        if priority.min_pending:
            body["min_pending"] = priority.min_pending
        if priority.min_ack_pending:
            body["min_ack_pending"] = priority.min_ack_pending
        if priority.priority:
            body["priority"] = priority.priority
        if pin_id:
            body["id"] = pin_id
    return json.dumps(body, separators=(",", ":")).encode()


def refill(
    opts: ConsumeOptions, pending_msgs: int, pending_bytes: int, delivered: int = 0, cap: Optional[int] = None
) -> Optional[Tuple[int, int]]:
    """The (batch, max_bytes) of the pull that tops the buffer up, or None.

    A pull is due when pending messages fall below ``threshold_messages`` or,
    in bytes mode, pending bytes below ``threshold_bytes``. Message mode asks
    for ``max - pending`` messages (with ``limit_bytes``, each pull capped at
    max_bytes); bytes mode for ``max_bytes - pending`` bytes with the full
    1,000,000 batch. ``cap`` (message mode) holds the buffer below
    max_messages, its threshold halved with it. With ``stop_after`` no pull
    asks for more than ``stop_after - delivered - pending``.
    """
    pending = max(pending_msgs, 0)
    if opts.bytes_mode:
        if pending_msgs >= opts.threshold_messages and pending_bytes >= opts.threshold_bytes:
            return None
        batch, nbytes = opts.max_messages, opts.max_bytes - max(pending_bytes, 0)
    else:
        limit, threshold = opts.max_messages, opts.threshold_messages
        if cap is not None and cap < limit:
            limit, threshold = cap, min(threshold, math.ceil(cap / 2))
        if pending_msgs >= threshold:
            return None
        batch, nbytes = limit - pending, (opts.max_bytes if opts.limit_bytes else 0)
    if opts.stop_after:
        left = opts.stop_after - delivered - pending
        if left <= 0:
            return None
        batch = min(batch, left)
    return batch, nbytes


class StatusKind(enum.Enum):
    """What a status message on a pull inbox means to the engine."""

    HEARTBEAT = "heartbeat"  # 100: traffic, nothing else
    END = "end"  # the pull ended normally (404, 408, 409 max bytes / batch completed, 423)
    LIMIT = "limit"  # 409 Exceeded Max…: warning; back off, do not re-pull at once
    LEADERSHIP = "leadership"  # 409 Leadership Change: reset pending, re-pull
    SHUTDOWN = "shutdown"  # 409 Server Shutdown: report, keep going
    NO_RESPONDERS = "no_responders"  # 503: report; missing heartbeats follow
    CONSUMER_DELETED = "consumer_deleted"  # terminal
    PUSH_BASED = "push_based"  # terminal
    BAD_REQUEST = "bad_request"  # terminal
    OTHER = "other"  # unknown status: reported, not terminal for consume

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = {StatusKind.CONSUMER_DELETED, StatusKind.PUSH_BASED, StatusKind.BAD_REQUEST}

_409 = (
    ("message size exceeds maxbytes", StatusKind.END),
    ("batch completed", StatusKind.END),
    ("exceeded max", StatusKind.LIMIT),  # MaxWaiting, MaxRequestBatch/Expires/MaxBytes
    ("leadership change", StatusKind.LEADERSHIP),
    ("server shutdown", StatusKind.SHUTDOWN),
    ("consumer deleted", StatusKind.CONSUMER_DELETED),
    ("consumer is push based", StatusKind.PUSH_BASED),
)


def classify_status(code: str, description: str = "") -> StatusKind:
    """Classify a status line (code and description) per ADR-37 and the server's strings."""
    if code == "100":
        return StatusKind.HEARTBEAT
    if code in ("404", "408", "423"):
        return StatusKind.END
    if code == "400" or code == "412":  # 412 Required Api Level: can never succeed
        return StatusKind.BAD_REQUEST
    if code == "503":
        return StatusKind.NO_RESPONDERS
    if code == "409":
        desc = description.lower()
        for text, kind in _409:
            if desc.startswith(text):
                return kind
    return StatusKind.OTHER


def pending_from_headers(headers: Optional[Dict[str, str]]) -> Tuple[int, int]:
    """``Nats-Pending-Messages`` / ``Nats-Pending-Bytes`` of a status (0 if absent or malformed)."""
    if not headers:
        return 0, 0

    def value(key: str) -> int:
        try:
            return max(int(headers.get(key, 0)), 0)
        except (TypeError, ValueError):
            return 0

    return value("Nats-Pending-Messages"), value("Nats-Pending-Bytes")


def status_error(kind: StatusKind, code: str, description: str) -> errors.JetStreamError:
    """The exception a status stands for."""
    status = int(code) if code.isdigit() else 0
    if kind is StatusKind.CONSUMER_DELETED:
        return errors.ConsumerDeletedError(status, description)
    if kind is StatusKind.PUSH_BASED:
        return errors.ConsumerPushBasedError(status, description)
    if kind is StatusKind.BAD_REQUEST:
        return errors.BadRequestError(status, description)
    if kind is StatusKind.NO_RESPONDERS:
        return errors.NoRespondersError("no responders: the consumer or stream does not exist, or JetStream is down")
    return errors.PullStatusError(status, description)


class Watchdog:
    """Heartbeat and client-deadline bookkeeping of one pull (monotonic clock).

    ``missed()`` is due after ``alarm_after`` seconds (2 × idle_heartbeat)
    without traffic of any kind, counted from the later of the last traffic
    and ``since`` (when a caller started waiting); it re-arms itself.
    ``expired()`` is due ``deadline_after`` seconds after the last traffic.
    """

    __slots__ = ("alarm_after", "deadline_after", "last")

    def __init__(self, alarm_after: float, deadline_after: float = 0.0) -> None:
        self.alarm_after = alarm_after
        self.deadline_after = deadline_after
        self.last = time.monotonic()

    def traffic(self) -> None:
        self.last = time.monotonic()

    def missed(self, since: float = 0.0) -> bool:
        if not self.alarm_after:
            return False
        now = time.monotonic()
        if now - max(self.last, since) < self.alarm_after:
            return False
        self.last = now
        return True

    def expired(self) -> bool:
        return bool(self.deadline_after) and time.monotonic() - self.last >= self.deadline_after


# Key-value buckets (ADR-8, ADR-48)

KV_MAX_HISTORY = 64
MAX_REPLICAS = 5
MIN_MSG_TTL = 1.0  # ADR-43: the server refuses a Nats-TTL or marker TTL below 1 s
_KV_BUCKET = re.compile(r"[a-zA-Z0-9_-]+")
_KV_KEY = re.compile(r"[-/_=.a-zA-Z0-9]+")
_KV_FILTER = re.compile(r"[-/_=.a-zA-Z0-9*>]+")


def kv_bucket(value: Any) -> str:
    """A bucket name: 1+ of A-Z a-z 0-9 _ - (its stream ``KV_<bucket>`` is a valid name)."""
    if not isinstance(value, str) or not _KV_BUCKET.fullmatch(value):
        raise errors.InvalidBucketNameError(f"bucket name must be 1+ of A-Z, a-z, 0-9, '_', '-', got {value!r}")
    if len(value) + 3 > MAX_NAME_LEN:
        raise errors.InvalidBucketNameError(f"bucket name must be at most {MAX_NAME_LEN - 3} characters, got {len(value)}")
    return value


def kv_key(value: Any, *, wildcards: bool = False) -> str:
    """A key: '.'-separated non-empty tokens of A-Z a-z 0-9 - / _ = . With
    ``wildcards`` (watch and keys filters) '*' may be a whole token and '>'
    the whole last token."""
    pattern = _KV_FILTER if wildcards else _KV_KEY
    if not isinstance(value, str) or not pattern.fullmatch(value):
        allowed = "A-Z, a-z, 0-9, '-', '/', '_', '=', '.'" + (" and wildcards" if wildcards else "")
        raise errors.InvalidKeyError(f"key must be 1+ of {allowed}, got {value!r}")
    try:
        subject(value, what="key", wildcards=wildcards)
    except errors.InvalidOptionError as exc:
        raise errors.InvalidKeyError(str(exc)) from None
    return value


def kv_history(value: Any) -> int:
    """Values kept per key: an integer from 1 to 64."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= KV_MAX_HISTORY:
        raise errors.InvalidOptionError(f"history must be an integer from 1 to {KV_MAX_HISTORY}, got {value!r}")
    return value


def kv_replicas(value: Any) -> int:
    """A replica count the server accepts (1-5), for buckets and object stores."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REPLICAS:
        raise errors.InvalidOptionError(f"replicas must be an integer from 1 to {MAX_REPLICAS}, got {value!r}")
    return value


def optional_size(name: str, value: Any) -> Optional[int]:
    """None (no limit) or a byte count >= 1."""
    return None if value is None else _count(name, value)


def msg_ttl(name: str, value: Any) -> str:
    """A ``Nats-TTL`` header value from seconds (>= 1): a Go duration string."""
    seconds = duration(name, value, minimum=MIN_MSG_TTL)
    return f"{int(seconds)}s" if seconds.is_integer() else f"{round(seconds * 1000)}ms"


def string_map(name: str, value: Any) -> Optional[Dict[str, str]]:
    """None or a dict of str to str (stream metadata)."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise errors.InvalidOptionError(f"{name} must be a mapping of str to str, got {value!r}")
    return dict(value)


# -- object store (ADR-20) --

OBJECT_STREAM_PREFIX = "OBJ_"


def object_store_name(value: Any) -> str:
    """A bucket name (ADR-20 ``restricted-term``): 1 or more of A-Z, a-z, 0-9,
    '-', '_', short enough for the stream name ``OBJ_<bucket>``."""
    limit = MAX_NAME_LEN - len(OBJECT_STREAM_PREFIX)
    if not isinstance(value, str) or not _KV_BUCKET.fullmatch(value) or len(value) > limit:
        raise errors.InvalidObjectStoreNameError(
            f"object store name must be 1-{limit} characters of A-Z, a-z, 0-9, '-', '_', got {value!r}"
        )
    return value


def object_name(value: Any, prefix_len: int = 0) -> str:
    """An object name: any non-empty text. It travels URL-safe base64 encoded
    after a ``prefix_len``-byte subject prefix, which must fit the control line."""
    if not isinstance(value, str) or not value:
        raise errors.InvalidObjectNameError(f"object name must be a non-empty string, got {value!r}")
    try:
        raw = value.encode()
    except UnicodeEncodeError:
        raise errors.InvalidObjectNameError(f"object name is not valid UTF-8 text: {value!r}") from None
    try:
        control_line("x" * (prefix_len + 4 * math.ceil(len(raw) / 3)), reply_room=reply_room())
    except errors.InvalidOptionError:
        raise errors.InvalidObjectNameError(f"object name is too long for a subject ({len(raw)} bytes)") from None
    return value


def chunk_size(value: Any, max_payload: Optional[int]) -> int:
    """Bytes per chunk: an integer >= 1, at most the server's max_payload."""
    size = _count("chunk_size", value)
    payload_size(size, max_payload, f"chunk_size {size}")
    return size


def optional_text(what: str, value: Any) -> Optional[str]:
    """None or a str (descriptions)."""
    if value is not None and not isinstance(value, str):
        raise errors.InvalidOptionError(f"{what} must be a string, got {value!r}")
    return value


def object_headers(value: Any) -> Optional[Dict[str, List[str]]]:
    """None or object headers as nats.go stores them: name -> list of values
    (a str value is a one-item list); checked as message headers are."""
    if value is None:
        return None
    header_block(value)  # names are tokens, values str without CR/LF
    return {k: [v] if isinstance(v, str) else list(v) for k, v in value.items()}


def object_store_limits(ttl: Any, max_bytes: Any, replicas: Any, compression: Any) -> Tuple[float, int, int]:
    """An object store's (ttl seconds, 0 = keep forever; max_bytes, -1 = no
    limit, None and 0 mean -1 as in nats.go; replicas 1-5)."""
    age = 0.0 if ttl is None else duration("ttl", ttl, allow_zero=True, none_means="no limit")
    if max_bytes is None:
        max_bytes = -1
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < -1:
        raise errors.InvalidOptionError(f"max_bytes must be an integer >= 1 or -1 (no limit), got {max_bytes!r}")
    limit = max_bytes or -1  # 0 means no limit, as in nats.go
    replicas = kv_replicas(replicas)
    if not isinstance(compression, bool):
        raise errors.InvalidOptionError(f"compression must be a bool, got {compression!r}")
    return age, limit, replicas
