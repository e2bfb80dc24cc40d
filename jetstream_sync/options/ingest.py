"""Options of message schedules (ADR-51) and fast-ingest batches (ADR-50).

Pure functions, no I/O; checked in the calling thread before anything is
sent. The forms a schedule may take are the server's (``parseMsgSchedule``
in nats-server's ``scheduler.go``): ``@at <RFC 3339>``, ``@every <Go
duration>`` (at least 1 s), the predefined ``@yearly`` … ``@hourly`` and a
6-field cron line (seconds first).
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from .. import errors
from .buckets import msg_ttl
from .checks import duration, flag, handler, rfc3339, subject
from .publish import RETRY_ATTEMPTS, RETRY_WAIT, publish_retry

# Server versions (major, minor) that bring each feature.
SCHEDULES_SINCE = (2, 12)  # "@at" (delayed messages)
REPEATING_SCHEDULES_SINCE = (2, 14)  # @every, cron, predefined; time zones, rollup
FAST_BATCH_SINCE = (2, 14)

PREDEFINED_SCHEDULES = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_GO_DURATION = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h)")
_GO_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_NAMES = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|sun|mon|tue|wed|thu|fri|sat"
_CRON_ITEM = re.compile(rf"(?:\*|\?|(?:\d+|{_NAMES})(?:-(?:\d+|{_NAMES}))?)(?:/\d+)?", re.IGNORECASE)
# Per cron field: (name, lowest, highest).
_CRON_FIELDS = (("seconds", 0, 59), ("minutes", 0, 59), ("hours", 0, 23), ("day of month", 1, 31),
                ("month", 1, 12), ("day of week", 0, 6))  # fmt: skip

MAX_FLOW = 65535  # the server's ceiling (uint16)
MAX_OUTSTANDING_ACKS = 3  # ADR-50: "limited configurability" (1 to 3)
DEFAULT_FAST_FLOW = 100
DEFAULT_MAX_OUTSTANDING_ACKS = 2


def go_duration_ns(text: str) -> Optional[int]:
    """Nanoseconds of a Go ``time.ParseDuration`` string (``1m30s``,
    ``500ms``), or None if it is not one."""
    if not isinstance(text, str) or not text or not re.fullmatch(rf"(?:{_GO_DURATION.pattern})+", text):
        return None
    total = 0.0
    for part in _GO_DURATION.finditer(text):
        m = re.fullmatch(r"([\d.]+)(\D+)", part.group())
        assert m is not None  # the pattern above guarantees the shape
        total += float(m.group(1)) * _GO_UNIT_NS[m.group(2)]
    return int(total)


def _cron_field(line: str, text: str, name: str, low: int, high: int) -> None:
    for item in text.split(","):
        if not _CRON_ITEM.fullmatch(item):
            raise errors.InvalidOptionError(f"schedule {line!r}: bad {name} field {text!r}")
        for number in re.findall(r"(?<![/\d])\d+", item.split("/")[0]):
            if not low <= int(number) <= high:
                raise errors.InvalidOptionError(f"schedule {line!r}: {name} {number} is outside {low}-{high}")


def _at(value: str) -> str:
    when = value[4:]
    try:
        parsed = datetime.datetime.fromisoformat(when.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None or "T" not in when.upper():
        raise errors.InvalidOptionError(
            f"schedule {value!r}: '@at' takes an RFC 3339 time with a zone, like '@at 2030-01-02T03:04:05Z'"
        )
    return value


def schedule_pattern(value: Any) -> str:
    """The ``Nats-Schedule`` value: an aware datetime becomes ``@at <UTC>``;
    a str must be one of the server's forms."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise errors.InvalidOptionError(f"schedule needs an aware datetime (with a timezone), got {value!r}")
        # Whole seconds (the server's RFC 3339 parse), rounded up: never before the time asked for.
        whole = value.replace(microsecond=0) + datetime.timedelta(seconds=1 if value.microsecond else 0)
        return "@at " + rfc3339(whole)
    if not isinstance(value, str) or not value.strip():
        raise errors.InvalidOptionError(f"schedule must be a str or an aware datetime, got {value!r}")
    if value.startswith("@at "):
        return _at(value)
    if value.startswith("@every "):
        ns = go_duration_ns(value[7:])
        if ns is None:
            raise errors.InvalidOptionError(f"schedule {value!r}: '@every' takes a Go duration like '30s' or '1h30m'")
        if ns < 10**9:
            raise errors.InvalidOptionError(f"schedule {value!r}: the shortest '@every' interval is 1s")
        return value
    if value.startswith("@"):
        if value not in PREDEFINED_SCHEDULES:
            raise errors.InvalidOptionError(
                f"schedule {value!r}: not '@at <time>', '@every <duration>' or one of {sorted(PREDEFINED_SCHEDULES)}"
            )
        return value
    fields = value.split()
    if len(fields) != len(_CRON_FIELDS) or " ".join(fields) != value:
        raise errors.InvalidOptionError(
            f"schedule {value!r}: a cron line has 6 fields separated by single spaces "
            "(seconds minutes hours day-of-month month day-of-week)"
        )
    for text, (name, low, high) in zip(fields, _CRON_FIELDS):
        _cron_field(value, text, name, low, high)
    return value


def is_repeating(pattern: str) -> bool:
    """True for every form but ``@at`` (those need server 2.14)."""
    return not pattern.startswith("@at ")


def schedule_headers(
    subject_: str,
    schedule: Any,
    target: Any,
    ttl: Optional[float] = None,
    time_zone: Optional[str] = None,
    source: Optional[str] = None,
    rollup: bool = False,
) -> Dict[str, str]:
    """The ``Nats-Schedule*`` headers of a schedule published on ``subject_``."""
    pattern = schedule_pattern(schedule)
    out = {"Nats-Schedule": pattern}
    out["Nats-Schedule-Target"] = subject(target, what="schedule target")
    if target == subject_:
        raise errors.InvalidOptionError(f"schedule target must differ from the schedule's own subject {subject_!r}")
    if ttl is not None:
        out["Nats-Schedule-TTL"] = msg_ttl("schedule ttl", ttl)
    if time_zone is not None:
        if not isinstance(time_zone, str) or not time_zone.strip() or time_zone != time_zone.strip():
            raise errors.InvalidOptionError(f"time_zone must be a zone name like 'Europe/Amsterdam', got {time_zone!r}")
        if pattern.startswith(("@at ", "@every ")):
            raise errors.InvalidOptionError("time_zone goes only with cron schedules, not '@at' or '@every'")
        out["Nats-Schedule-Time-Zone"] = time_zone
    if source is not None:
        out["Nats-Schedule-Source"] = subject(source, what="schedule source")
        if source == subject_:
            raise errors.InvalidOptionError("schedule source must differ from the schedule's own subject")
    if flag("rollup", rollup):
        out["Nats-Schedule-Rollup"] = "sub"
    return out


@dataclasses.dataclass(frozen=True)
class FastBatchOptions:
    """A fast batch's flow control (ADR-50): ``flow`` is the ack frequency
    asked for (the server may lower it), ``max_outstanding_acks`` how many
    flow acks may be outstanding before ``add()`` waits, ``ack_timeout``
    (seconds) the longest wait for one, ``continue_on_gap`` the gap mode."""

    flow: int = DEFAULT_FAST_FLOW
    max_outstanding_acks: int = DEFAULT_MAX_OUTSTANDING_ACKS
    ack_timeout: float = 5.0
    continue_on_gap: bool = False
    error_handler: Optional[Callable[[BaseException], Any]] = None
    retry: Tuple[int, float] = (RETRY_ATTEMPTS, RETRY_WAIT)  # the first message's, after "no responders"


def fast_batch_options(
    flow: Any, max_outstanding_acks: Any, ack_timeout: Any, continue_on_gap: Any, error_handler: Any,
    retry_attempts: Any = None, retry_wait: Any = None,
) -> FastBatchOptions:
    """Checked :class:`FastBatchOptions`; ``ack_timeout`` already resolved from its default."""
    for name, value, high in (("flow", flow, MAX_FLOW), ("max_outstanding_acks", max_outstanding_acks, MAX_OUTSTANDING_ACKS)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            raise errors.InvalidOptionError(f"{name} must be an int from 1 to {high}, got {value!r}")
    return FastBatchOptions(
        flow,
        max_outstanding_acks,
        duration("ack_timeout", ack_timeout),
        flag("continue_on_gap", continue_on_gap),
        handler("error_handler", error_handler, optional=True),
        publish_retry(retry_attempts, retry_wait) or (RETRY_ATTEMPTS, RETRY_WAIT),
    )


def fast_batch_items(messages: Any) -> List[Any]:
    """The items of ``publish_fast_batch(messages)``: one or more (no upper limit)."""
    items = list(messages) if not isinstance(messages, (str, bytes)) and isinstance(messages, Iterable) else None
    if not items:
        raise errors.InvalidOptionError("publish_fast_batch takes one or more (subject, data[, headers]) tuples")
    return items
