"""Publish options: the ``Nats-Msg-Id`` / ``Nats-Expected-*`` / ``Nats-TTL``
headers, atomic batches (ADR-50), counters (ADR-49), the async publisher's window.

Pure functions, no I/O; checked in the calling thread before anything is sent.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .. import errors
from .buckets import msg_ttl as _msg_ttl
from .checks import duration, subject

MAX_BATCH = 1000  # messages per atomic batch (the server's default limit, ADR-50)
# A publish that met "no responders" (ADR-22; nats.go's defaults): tried this
# many more times, this many seconds apart, within the call's timeout.
RETRY_ATTEMPTS = 2
RETRY_WAIT = 0.25


def publish_retry(attempts: Any, wait: Any) -> Optional[Tuple[int, float]]:
    """``retry_attempts`` (an int >= 0, or -1: until the timeout) and
    ``retry_wait`` (seconds >= 0) of a publish; None when both are the
    defaults (RETRY_ATTEMPTS, RETRY_WAIT)."""
    if attempts is None and wait is None:
        return None
    if attempts is None:
        attempts = RETRY_ATTEMPTS
    elif isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < -1:
        raise errors.InvalidOptionError(f"retry_attempts must be an integer >= 0, or -1 (until the timeout), got {attempts!r}")
    wait = RETRY_WAIT if wait is None else duration("retry_wait", wait, allow_zero=True)
    return attempts, wait


def may_retry(retry: Tuple[int, float], tried: int, deadline: float) -> bool:
    """A publish that met "no responders" ``tried`` times already may be sent
    again: attempts are left (-1: unbounded) and its wait ends before
    ``deadline`` (monotonic seconds)."""
    attempts, wait = retry
    return (attempts < 0 or tried < attempts) and time.monotonic() + wait < deadline


def publish_headers(
    headers: Optional[Dict[str, str]],
    msg_id: Optional[str] = None,
    expected_stream: Optional[str] = None,
    expected_last_seq: Optional[int] = None,
    expected_last_subject_seq: Optional[int] = None,
    expected_last_msg_id: Optional[str] = None,
    expected_last_subject_seq_subject: Optional[str] = None,
    msg_ttl: Optional[float] = None,
) -> Optional[Dict[str, str]]:
    """User headers plus the ``Nats-Msg-Id`` / ``Nats-Expected-*`` / ``Nats-TTL`` ones."""
    out = dict(headers) if headers else {}
    for key, arg, value in (
        ("Nats-Msg-Id", "msg_id", msg_id),
        ("Nats-Expected-Stream", "expected_stream", expected_stream),
        ("Nats-Expected-Last-Msg-Id", "expected_last_msg_id", expected_last_msg_id),
    ):
        if value is not None:
            if not isinstance(value, str) or not value:
                raise errors.InvalidOptionError(f"{arg} must be a non-empty string, got {value!r}")
            out[key] = value
    for key, arg, seq in (
        ("Nats-Expected-Last-Sequence", "expected_last_seq", expected_last_seq),
        ("Nats-Expected-Last-Subject-Sequence", "expected_last_subject_seq", expected_last_subject_seq),
    ):
        if seq is not None:
            if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
                raise errors.InvalidOptionError(f"{arg} must be a sequence number (int >= 0), got {seq!r}")
            out[key] = str(seq)
    if expected_last_subject_seq_subject is not None:
        if expected_last_subject_seq is None:
            raise errors.InvalidOptionError("expected_last_subject_seq_subject goes with expected_last_subject_seq")
        out["Nats-Expected-Last-Subject-Sequence-Subject"] = subject(
            expected_last_subject_seq_subject, what="expected_last_subject_seq_subject", wildcards=True
        )
    if msg_ttl is not None:
        out["Nats-TTL"] = _msg_ttl("msg_ttl", msg_ttl)
    return out or None


def batch_items(messages: Any) -> List[Any]:
    """The items of ``publish_batch(messages)``: 1 to MAX_BATCH of them."""
    items = list(messages) if not isinstance(messages, (str, bytes)) else None
    if not items or len(items) > MAX_BATCH:
        raise errors.InvalidOptionError(f"publish_batch takes 1 to {MAX_BATCH} (subject, data[, headers]) tuples")
    return items


def batch_item(seq: int, item: Any) -> Tuple[Any, Any, Optional[Mapping[str, Any]]]:
    """Batch item ``seq`` (from 1) as (subject, data, headers or None)."""
    if not isinstance(item, tuple) or len(item) not in (2, 3):
        raise errors.InvalidOptionError(f"batch item {seq} must be (subject, data) or (subject, data, headers)")
    extra = item[2] if len(item) == 3 else None
    if extra is not None and not isinstance(extra, Mapping):
        raise errors.InvalidOptionError(f"headers of batch item {seq} must be a mapping, got {extra!r}")
    return item[0], item[1], extra
