"""The options of a pull: messages()/consume() (ADR-37 consume), fetch()/
fetch_no_wait()/next(), push subscriptions, and priority groups (ADR-42):
their defaults and validation."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple, cast

from .. import errors
from .checks import count, duration

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
        mbytes = count("max_bytes", max_bytes)
        msgs = count("max_messages", max_messages) if limit_bytes else BYTES_MODE_BATCH
    else:
        mbytes = 0
        msgs = DEFAULT_MAX_MESSAGES if max_messages is None else count("max_messages", max_messages)
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
        t_msgs = count("threshold_messages", threshold_messages)
        if t_msgs > msgs:
            raise errors.InvalidOptionError(f"threshold_messages ({t_msgs}) must not exceed max_messages ({msgs})")
    if threshold_bytes is None:
        t_bytes = 0 if limit_bytes else math.ceil(mbytes / 2)
    else:
        if not mbytes or limit_bytes:
            raise errors.InvalidOptionError(
                "threshold_bytes needs max_bytes without max_messages (with both, max_bytes only caps each pull)"
            )
        t_bytes = count("threshold_bytes", threshold_bytes)
        if t_bytes > mbytes:
            raise errors.InvalidOptionError(f"threshold_bytes ({t_bytes}) must not exceed max_bytes ({mbytes})")
    after = 0 if stop_after is None else count("stop_after", stop_after)
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
    mbytes = count("max_bytes", max_bytes) if max_bytes is not None else 0
    msgs = count("max_messages", max_messages) if max_messages is not None else BYTES_MODE_BATCH
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
        0 if min_pending is None else count("min_pending", min_pending),
        0 if min_ack_pending is None else count("min_ack_pending", min_ack_pending),
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




def half_of_timeout(heartbeat: float, timeout: float) -> None:
    """A pull subscription's fetch heartbeat (seconds) fits its timeout: at most half of it."""
    if heartbeat > timeout / 2:
        raise errors.InvalidOptionError(f"heartbeat ({heartbeat}s) must be at most half of timeout ({timeout}s)")
