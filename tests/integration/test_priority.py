"""Priority groups (ADR-42) on a real server: pinned client, unpin, overflow,
prioritized, and every new option refused before anything is sent."""

from __future__ import annotations

import threading
import time
from typing import List, Optional, Set

import pytest

import jetstream_sync as jss

from ..helpers import PullSpy, publish, wait_until

pytestmark = pytest.mark.timeout(60)


class Worker:
    """Iterates a messages() context on a thread of its own, acking; records
    the stream sequences and the pin ids it got."""

    def __init__(self, ctx: jss.MessagesContext) -> None:
        self.ctx = ctx
        self.seqs: List[int] = []
        self.pins: Set[Optional[str]] = set()
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for msg in self.ctx:
                msg.ack()
                self.pins.add((msg.headers or {}).get("Nats-Pin-Id"))
                self.seqs.append(msg.metadata.sequence.stream)
        except Exception as exc:  # reported by the test
            self.error = exc

    def stop(self) -> None:
        self.ctx.stop()
        self._thread.join(5)
        assert not self._thread.is_alive() and self.error is None, self.error


def pinned(stream: jss.Stream, ttl: float, name: str = "pin") -> jss.Consumer:
    return stream.create_consumer(
        durable_name=name,
        ack_policy="explicit",
        priority_policy="pinned_client",
        priority_groups=["A"],
        priority_timeout=ttl,
    )


def pin_of(cons: jss.Consumer) -> Optional[str]:
    """The pin the server holds for group A (None when unpinned)."""
    groups = cons.info().extra.get("priority_groups") or [{}]
    return groups[0].get("pinned_client_id") or None


def test_pinned_client_only_the_pinned_worker_receives_and_the_other_takes_over(js, stream, subj):
    # Pulls re-sent every second (expires=1) keep a 3 s pin alive while idle.
    cons = pinned(stream, ttl=3.0)
    publish(js, subj, 100)
    first = Worker(cons.messages(group="A", expires=1, max_messages=20))
    wait_until(lambda: first.seqs)
    second = Worker(cons.messages(group="A", expires=1, max_messages=20))
    wait_until(lambda: second.ctx.stats.pulls >= 1)
    publish(js, subj, 50)
    wait_until(lambda: len(first.seqs) == 150, timeout=10)
    assert first.seqs == list(range(1, 151))
    assert second.seqs == [] and len(first.pins) == 1 and None not in first.pins

    first.stop()
    stopped = time.monotonic()
    publish(js, subj, 20)
    wait_until(lambda: len(second.seqs) == 20, timeout=15)
    took_over = time.monotonic() - stopped
    assert took_over > 1.0  # not before the first worker's pin lapsed (priority_timeout)
    assert second.seqs == list(range(151, 171)) and len(first.seqs) == 150
    assert second.pins.isdisjoint(first.pins) and None not in second.pins
    second.stop()


def test_unpin_moves_the_pin(js, stream, subj):
    cons = pinned(stream, ttl=60.0)
    publish(js, subj, 1)
    with cons.messages(group="A", max_messages=1) as first, cons.messages(group="A", max_messages=1) as second:
        msg = first.next(timeout=5)
        old_pin = msg.headers["Nats-Pin-Id"]
        msg.ack_sync()
        assert pin_of(cons) == old_pin
        publish(js, subj, 1)
        with pytest.raises(jss.TimeoutError):
            second.next(timeout=1.0)  # its pull waits: the pin is the first's

        cons.unpin("A")
        msg = second.next(timeout=5)  # the waiting pull is pinned now
        new_pin = msg.headers["Nats-Pin-Id"]
        assert new_pin != old_pin and pin_of(cons) == new_pin
        msg.ack_sync()

        # The first context's next pull carries the stale id: 423, the id is
        # dropped and it pulls again without one, then waits its turn.
        publish(js, subj, 1)
        with pytest.raises(jss.TimeoutError):
            first.next(timeout=1.0)
        assert any(k.startswith("423") for k in first.stats.statuses), first.stats.statuses
        assert second.next(timeout=5).metadata.sequence.stream == 3


def test_unpin_refuses_unknown_groups_before_sending(nc, js, stream):
    cons = pinned(stream, ttl=60.0)
    sub = nc.subscribe(f"$JS.API.CONSUMER.UNPIN.{stream.name}.>")
    nc.flush()
    for bad in ("B", "", "a.b", None):
        with pytest.raises(jss.InvalidOptionError):
            cons.unpin(bad)
    with pytest.raises(jss.InvalidOptionError):
        js.unpin_consumer(stream.name, "pin", "no.dots")
    with pytest.raises(jss.TimeoutError):
        sub.next_msg(timeout=0.3)
    with pytest.raises(jss.ConsumerNotFoundError):
        js.unpin_consumer(stream.name, "nope", "A")
    cons.unpin("A")  # nothing pinned yet: still fine


def test_pinned_fetches_of_one_handle_keep_the_pin(js, stream, subj):
    cons = pinned(stream, ttl=1.0)
    publish(js, subj, 30)
    got = list(cons.fetch(10, group="A", expires=5))
    pins = {m.headers["Nats-Pin-Id"] for m in got}
    assert len(got) == 10 and len(pins) == 1
    for m in got:
        m.ack()

    other = js.consumer(stream.name, "pin")  # another handle: not pinned
    assert list(other.fetch(10, group="A", expires=0.5)) == []
    again = list(cons.fetch(10, group="A", expires=3))
    assert len(again) == 10 and {m.headers["Nats-Pin-Id"] for m in again} == pins
    for m in again:
        m.ack()

    wait_until(lambda: pin_of(cons) is None, timeout=10)  # the 1 s pin lapsed
    stale = cons.fetch(10, group="A", expires=1)
    with pytest.raises(jss.PinIdMismatchError) as ei:
        list(stale)
    assert ei.value.status == 423
    fresh = list(cons.fetch(10, group="A", expires=3))  # without the id: pinned anew
    assert len(fresh) == 10 and {m.headers["Nats-Pin-Id"] for m in fresh}.isdisjoint(pins)


def test_overflow_worker_gets_messages_only_while_pending_reaches_min_pending(js, stream, subj):
    cons = stream.create_consumer(
        durable_name="ovf", ack_policy="explicit", priority_policy="overflow", priority_groups=["A"]
    )
    publish(js, subj, 100)
    assert list(cons.fetch(10, group="A", min_pending=110, expires=0.5)) == []  # 100 pending: below
    publish(js, subj, 100)
    got = list(cons.fetch(10, group="A", min_pending=110, expires=5))
    assert len(got) == 10
    for m in got:
        m.ack_sync()

    # 190 pending: the overflow worker is served while num_pending >= 150
    # (the server counts the message being delivered), then waits.
    with cons.messages(group="A", min_pending=150, max_messages=100) as overflow:
        seqs = [overflow.next(timeout=5).metadata.sequence.stream for _ in range(41)]
        assert seqs == list(range(11, 52))
        with pytest.raises(jss.TimeoutError):
            overflow.next(timeout=1.0)
        assert cons.info().num_pending == 149
        publish(js, subj, 1)  # back at 150: one more for the overflow worker
        assert overflow.next(timeout=5).metadata.sequence.stream == 52
    with cons.messages(group="A") as main:  # the regular worker takes the rest
        assert main.next(timeout=5).metadata.sequence.stream == 53


def test_overflow_min_ack_pending(js, stream, subj):
    cons = stream.create_consumer(
        durable_name="ovf", ack_policy="explicit", priority_policy="overflow", priority_groups=["A"]
    )
    publish(js, subj, 30)
    assert list(cons.fetch(10, group="A", min_ack_pending=10, expires=0.5)) == []  # nothing unacked
    held = list(cons.fetch(10, group="A", expires=5))  # 10 unacked now
    assert len(held) == 10
    assert len(list(cons.fetch(10, group="A", min_ack_pending=10, expires=5))) == 10


def test_prioritized_lower_number_is_served_first(js, stream, subj):
    cons = stream.create_consumer(
        durable_name="prio", ack_policy="explicit", priority_policy="prioritized", priority_groups=["A"]
    )
    low = Worker(cons.messages(group="A", priority=5, max_messages=50))
    high = Worker(cons.messages(group="A", priority=0, max_messages=50))
    wait_until(lambda: low.ctx.stats.pulls >= 1 and high.ctx.stats.pulls >= 1)
    wait_until(lambda: cons.info().num_waiting == 2)
    publish(js, subj, 20)
    wait_until(lambda: len(high.seqs) == 20)
    assert low.seqs == []
    high.stop()
    publish(js, subj, 5)
    wait_until(lambda: len(low.seqs) == 5)
    low.stop()


def test_max_messages_with_max_bytes_carries_both_and_never_stalls(nc, js, stream, subj):
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
    spy = PullSpy(nc, stream.name, "c")
    publish(js, subj, 10, payload=b"x" * 100)
    # Each pull may hold 2 messages but only ~1024 bytes: ends with 409 Batch Completed.
    with cons.messages(max_messages=2, max_bytes=1024) as ctx:
        seqs = []
        for msg in ctx:
            msg.ack()
            seqs.append(msg.metadata.sequence.stream)
            if len(seqs) == 10:
                break
        assert ctx.options.limit_bytes and ctx.options.max_bytes == 1024
    assert seqs == list(range(1, 11))
    bodies = spy.collect()
    assert bodies and all(b["max_bytes"] == 1024 and 1 <= b["batch"] <= 2 for b in bodies), bodies


def test_max_bytes_cap_smaller_than_the_batch(js, stream, subj):
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
    publish(js, subj, 30, payload=b"y" * 400)  # ~2 messages fit in one pull's 1000 bytes
    got = []
    with cons.messages(max_messages=10, max_bytes=1000, expires=2) as ctx:
        while len(got) < 30:
            msg = ctx.next(timeout=5)
            msg.ack()
            got.append(msg.metadata.sequence.stream)
        assert ctx.stats.buffered_high_water <= 10
    assert got == list(range(1, 31))


# -- every new option is refused before anything is sent ------------------------

PIN_CFG = dict(priority_policy="pinned_client", priority_groups=["A"])
OVF_CFG = dict(priority_policy="overflow", priority_groups=["A"])
PRI_CFG = dict(priority_policy="prioritized", priority_groups=["A"])

BAD_PULLS = [
    ({}, {"group": "A"}),  # the consumer has no groups
    (PIN_CFG, {}),  # group missing (the server would answer 400)
    (PIN_CFG, {"group": "B"}),
    (PIN_CFG, {"group": ""}),
    (PIN_CFG, {"group": 7}),
    (PIN_CFG, {"group": "x" * 17}),
    (OVF_CFG, {"min_pending": 5}),  # without group
    (OVF_CFG, {"group": "A", "min_pending": 0}),
    (OVF_CFG, {"group": "A", "min_pending": -3}),
    (OVF_CFG, {"group": "A", "min_ack_pending": 1.5}),
    (PIN_CFG, {"group": "A", "min_pending": 5}),  # not overflow
    (PRI_CFG, {"group": "A", "priority": 10}),
    (PRI_CFG, {"group": "A", "priority": -1}),
    (PRI_CFG, {"group": "A", "priority": "1"}),
    (PRI_CFG, {"priority": 1}),  # without group
    (OVF_CFG, {"group": "A", "priority": 1}),  # not prioritized
    (PRI_CFG, {"group": "A", "prio": 1}),  # misspelt
]
BAD_CONSUME = [
    {"stop_after": 0},
    {"stop_after": -1},
    {"stop_after": 2.5},
    {"stop_after": True},
    {"max_messages": 10, "max_bytes": 0},
    {"max_messages": 0, "max_bytes": 100},
    {"max_messages": 10, "max_bytes": 100, "threshold_bytes": 10},
]


@pytest.mark.parametrize("cfg, kwargs", BAD_PULLS)
def test_bad_priority_options_send_nothing(nc, stream, cfg, kwargs):
    cons = stream.create_consumer(durable_name="v", ack_policy="explicit", **cfg)
    spy = PullSpy(nc, stream.name, "v")
    calls = [
        lambda: cons.fetch(1, expires=1, **kwargs),
        lambda: cons.fetch_no_wait(1, **kwargs),
        lambda: cons.next(timeout=1, **kwargs),
        lambda: cons.messages(**kwargs),
        lambda: cons.consume(lambda m: None, **kwargs),
    ]
    for call in calls:
        with pytest.raises(jss.InvalidOptionError):
            call()
    assert spy.count == 0
    assert cons.info().num_waiting == 0


@pytest.mark.parametrize("kwargs", BAD_CONSUME)
def test_bad_consume_options_send_nothing(nc, stream, kwargs):
    cons = stream.create_consumer(durable_name="v", ack_policy="explicit")
    spy = PullSpy(nc, stream.name, "v")
    with pytest.raises(jss.InvalidOptionError):
        cons.messages(**kwargs)
    with pytest.raises(jss.InvalidOptionError):
        cons.consume(lambda m: None, **kwargs)
    with pytest.raises(jss.InvalidOptionError):
        cons.fetch(**kwargs)  # fetch checks the limits as messages() does
    assert spy.count == 0 and cons.info().num_waiting == 0


@pytest.mark.parametrize(
    "fields",
    [
        {"priority_policy": "pinned", "priority_groups": ["A"]},
        {"priority_policy": "overflow"},
        {"priority_policy": "overflow", "priority_groups": ["a.b"]},
        {"priority_groups": ["A"]},
        {"priority_timeout": 5.0},
        {"priority_policy": "overflow", "priority_groups": ["A"], "deliver_subject": "push.here"},
    ],
)
def test_bad_priority_config_sends_nothing(nc, stream, fields):
    sub = nc.subscribe(f"$JS.API.CONSUMER.CREATE.{stream.name}.>")
    nc.flush()
    with pytest.raises(jss.InvalidOptionError):
        stream.create_consumer(durable_name="bad", **fields)
    with pytest.raises(jss.TimeoutError):
        sub.next_msg(timeout=0.2)


@pytest.mark.parametrize("kwargs", [{"max_messages": 5, "max_bytes": 100}, {"max_bytes": 100}])
def test_a_message_larger_than_max_bytes_is_reported_not_spun_on(js, stream, subj, kwargs):
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
    publish(js, subj, 1, payload=b"x" * 500)
    errors: List[BaseException] = []
    with cons.messages(error_handler=errors.append, expires=2, **kwargs) as ctx:
        with pytest.raises(jss.TimeoutError):
            ctx.next(timeout=1.5)
        assert ctx.stats.pulls <= 3  # one, then a re-pull after each back-off (1 s, 2 s …)
    assert errors and isinstance(errors[0], jss.PullStatusError) and "larger than max_bytes" in str(errors[0])
