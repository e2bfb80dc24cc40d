"""consume()'s credit without a lock: the worker thread counts each handled
message on its own, and the pull engine's pending count (requested and not
yet handled, ADR-37) must stay exact whenever that count moves."""

from __future__ import annotations

import json

import pytest
from typing import Any, List, Tuple

from jetstream_sync._engines.pull import PullEngine, PullTarget
from jetstream_sync._engines.receiver import _PACE_RUN, Receiver
from jetstream_sync.options import consume_options

from .fakes import FakeConn


class _Conn(FakeConn):
    """Every message a pull asks for is delivered at once: the worker may credit it."""

    def __init__(self) -> None:
        super().__init__()
        self.pulls: List[int] = []
        self.receiver: Any = None

    def send_pub(self, subject: str, reply: str, payload: bytes) -> bool:
        batch = json.loads(payload)["batch"]
        self.pulls.append(batch)
        self.receiver.handleable += batch
        return super().send_pub(subject, reply, payload)


class _RacingReceiver(Receiver):
    """consume()'s worker credits one more message just before every reading
    of the count, while any requested one is left to handle: the worst
    interleaving with the engine's arithmetic."""

    racing = True
    handleable = 0  # messages requested (all delivered at once) and not lost

    @property
    def credited(self) -> int:
        if self.racing and self._credited < self.handleable:
            self._credited += 1
        return self._credited


class _CountingLock:
    """Counts how often the receiver's lock is taken."""

    def __init__(self) -> None:
        self.taken = 0

    def __enter__(self) -> None:
        self.taken += 1

    def __exit__(self, *exc: Any) -> None:
        pass

    def acquire(self) -> None:
        self.taken += 1

    def release(self) -> None:
        pass


def _engine(max_messages: int) -> Tuple[PullEngine, _RacingReceiver, _Conn]:
    conn = _Conn()
    receiver = conn.receiver = _RacingReceiver(conn)  # type: ignore[arg-type]
    receiver.explicit_credit = True  # as ConsumeContext sets it
    target = PullTarget("S", "C", "$JS.API.CONSUMER.INFO.S.C", 30.0, 5.0, "$JS.API.CONSUMER.MSG.NEXT.S.C")
    engine = PullEngine(conn, receiver, target, consume_options(max_messages=max_messages))  # type: ignore[arg-type]
    return engine, receiver, conn


def _pending(engine: PullEngine, receiver: _RacingReceiver) -> int:
    receiver.racing = False
    try:
        return engine._pending_msgs
    finally:
        receiver.racing = True


def test_credits_racing_the_engine_keep_pending_exact():
    engine, receiver, conn = _engine(max_messages=100)
    assert receiver.lock_free  # consume() in message mode credits without the lock
    for _ in range(100):
        engine._maybe_pull()  # a refill, when due, from one reading of the count
        requested = sum(conn.pulls)
        assert _pending(engine, receiver) == max(requested - receiver._credited, 0)
    assert len(conn.pulls) > 1  # the credits made room for more than the first pull


def test_a_status_that_ends_part_of_a_pull_while_credits_race():
    engine, receiver, conn = _engine(max_messages=100)
    engine._maybe_pull()
    assert conn.pulls == [100]
    receiver._credited += 5  # handled meanwhile
    receiver.handleable -= 30  # the pull expires with 30 of its messages never sent
    engine._on_status("408", "Request Timeout", {"Nats-Pending-Messages": "30", "Nats-Pending-Bytes": "0"})
    # 30 of the pull will never come; the rest less what was handled is still pending.
    assert _pending(engine, receiver) == max(sum(conn.pulls) - 30 - receiver._credited, 0)


class _Handled(BaseException):
    """Ends serve() after the last buffered message."""


def test_credit_asks_for_a_refill_past_the_threshold_without_the_lock():
    engine, receiver, conn = _engine(max_messages=10)
    receiver.racing = False
    engine._maybe_pull()
    asked: List[int] = []
    engine.want_more = lambda: asked.append(receiver._credited)  # type: ignore[method-assign]
    lock = receiver._lock = _CountingLock()  # type: ignore[assignment]
    receiver._buf.extend(object() for _ in range(10))  # type: ignore[misc]
    handled: List[object] = []

    def handler(msg: object) -> None:
        handled.append(msg)
        if len(handled) == 10:
            raise _Handled()  # credited on the way out, as a handler that returns

    with pytest.raises(_Handled):
        receiver.serve(handler, lambda msg, exc: None)
    assert receiver._credited == 10
    assert lock.taken == 10 // _PACE_RUN  # only the callers' pace is sampled under it
    assert asked and asked[0] == receiver.refill_at + 1  # the first credit past the threshold asks
