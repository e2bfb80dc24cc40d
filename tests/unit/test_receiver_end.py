"""The end of a read on the user side, without a server: a fetch iterated to
its end closes without waking the loop thread (the engine that ended it
closes on its own), while one given up early still hands its shutdown and
its unread messages to the loop."""

from __future__ import annotations

import queue
from typing import Any, List

import pytest

from jetstream_sync._engines.receiver import End, Exhausted, Receiver

from .fakes import FakeConn


class _Engine:
    def want_more(self) -> None:
        pass

    def took(self, msg: Any) -> None:
        pass

    def shutdown(self, mode: str) -> None:
        pass

    def nak_later(self, msgs: List[Any]) -> None:
        pass


def _receiver(*items: Any) -> "tuple[Receiver, FakeConn]":
    conn = FakeConn()
    receiver = Receiver(conn)  # type: ignore[arg-type]
    receiver.engine = _Engine()
    handoff: "queue.Queue[Any]" = queue.Queue()
    for item in items:
        handoff.put(item)
    receiver.attach(handoff)
    return receiver, conn


def test_closing_a_read_seen_to_its_end_wakes_nothing_on_the_loop():
    receiver, conn = _receiver(["m1"], End(None))
    assert receiver.take(1.0) == "m1"
    with pytest.raises(Exhausted):
        receiver.take(1.0)
    assert receiver.stop()
    assert conn.soon == []  # no shutdown handed to the loop: the engine closes itself
    assert receiver.settled.is_set()
    with pytest.raises(Exhausted):
        receiver.take(0.0)  # and it stays ended


def test_closing_a_read_given_up_early_shuts_its_engine_down_on_the_loop():
    receiver, conn = _receiver(["m1", "m2"])
    assert receiver.take(1.0) == "m1"
    assert receiver.stop()
    assert len(conn.soon) == 2  # the NAK of the unread "m2", then the shutdown
