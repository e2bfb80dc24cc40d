"""The pull protocol as pure logic (ADR-13, ADR-37): the body of a pull
request, when to refill, what a status message means, and the heartbeat
watchdog. No I/O: the engines call these; unit tests run them without a server."""

from __future__ import annotations

import enum
import json
import math
import time
from typing import Any, Dict, Optional, Tuple

from .. import errors
from ..options import NS_PER_SECOND, ConsumeOptions, PriorityOptions


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
        body["expires"] = int(expires * NS_PER_SECOND)
    if max_bytes:
        body["max_bytes"] = max_bytes
    if idle_heartbeat:
        body["idle_heartbeat"] = int(idle_heartbeat * NS_PER_SECOND)
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


