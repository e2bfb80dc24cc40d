"""consume(handler): callback-driven consumption on a worker thread (nats.go TestPullConsumerConsume)."""

from __future__ import annotations

import collections
import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import Publishing, PullSpy, end_with_the_loop_busy, left_for_ack_wait, publish, sized_payload, wait_until


class Collector:
    def __init__(self, delay: float = 0.0):
        self.msgs = []
        self.errors = []
        self.threads = set()
        self.delay = delay

    def handler(self, msg):
        self.threads.add(threading.current_thread().name)
        if self.delay:
            time.sleep(self.delay)  # the handler's work
        self.msgs.append(msg)
        msg.ack()

    def on_error(self, exc):
        self.errors.append(exc)

    def data(self):
        return [m.data for m in self.msgs]


def test_no_options_on_a_worker_thread(js, subj, cons):
    publish(js, subj, 5)
    c = Collector()
    cc = cons.consume(c.handler)
    wait_until(lambda: len(c.msgs) == 5)
    assert c.data() == [b"0", b"1", b"2", b"3", b"4"]
    assert threading.current_thread().name not in c.threads
    assert not any("loop" in name for name in c.threads)
    cc.stop()
    assert cc.wait(5)


def test_two_consumers_on_one_consumer_split_messages(js, subj, cons):
    a, b = Collector(0.01), Collector(0.01)
    ca = cons.consume(a.handler, max_messages=2)
    cb = cons.consume(b.handler, max_messages=2)
    publish(js, subj, 20)
    wait_until(lambda: len(a.msgs) + len(b.msgs) == 20, timeout=10)
    assert a.msgs and b.msgs
    assert sorted(a.data() + b.data(), key=int) == [str(i).encode() for i in range(20)]
    ca.stop()
    cb.stop()


def test_stop_then_subscribe_again_continues(js, subj, cons):
    publish(js, subj, 5)
    c = Collector()
    cc = cons.consume(c.handler)
    wait_until(lambda: len(c.msgs) == 5)
    cc.stop()
    assert cc.wait(5)
    publish(js, subj, 5, start=5)
    c2 = Collector()
    cc = cons.consume(c2.handler)
    wait_until(lambda: len(c2.msgs) == 5)
    assert c2.data() == [b"5", b"6", b"7", b"8", b"9"]
    cc.stop()


@pytest.mark.parametrize("max_messages", [4, 1])
def test_custom_batch_sizes(js, subj, cons, max_messages):
    publish(js, subj, 10)
    c = Collector()
    cc = cons.consume(c.handler, max_messages=max_messages)
    wait_until(lambda: len(c.msgs) == 10)
    assert c.data() == [str(i).encode() for i in range(10)]
    cc.stop()


def test_remove_consumer_during_consume(js, stream, subj, cons):
    publish(js, subj, 3)
    c = Collector()
    cc = cons.consume(c.handler, error_handler=c.on_error)
    wait_until(lambda: len(c.msgs) == 3)
    stream.delete_consumer("c")
    wait_until(lambda: any(isinstance(e, jss.ConsumerDeletedError) for e in c.errors), timeout=5)
    assert cc.wait(5)
    publish(js, subj, 2, start=3)
    time.sleep(0.2)  # nothing more may arrive
    assert len(c.msgs) == 3


def test_custom_max_bytes(nc, js, stream):
    subj = f"{stream.name.lower()}.x"
    publish(js, subj, 5, sized_payload(stream.name, "c", subj, 60))
    cons = stream.create_consumer(durable_name="c")
    spy = PullSpy(nc, stream.name, "c")
    c = Collector()
    cc = cons.consume(c.handler, max_bytes=150)
    wait_until(lambda: len(c.msgs) == 5)
    cc.stop()
    assert spy.count >= 3


def test_custom_expiry(js, subj, cons):
    c = Collector()
    cc = cons.consume(c.handler, expires=2.0)
    publish(js, subj, 3)
    wait_until(lambda: len(c.msgs) == 3)
    assert cc.options.expires == 2.0 and cc.options.idle_heartbeat == 1.0
    cc.stop()


def test_invalid_handler(cons):
    with pytest.raises(jss.InvalidOptionError):
        cons.consume(None)
    with pytest.raises(jss.InvalidOptionError):
        cons.consume(lambda m: None, error_handler=3)


def test_generator_handlers_are_refused_before_anything_is_consumed(js, subj, cons):
    """Called, a generator function runs none of its body: its messages would
    sit unhandled (or, with subscribe's auto-ack, be settled unhandled)."""
    publish(js, subj, 3)
    ran = []

    def gen(msg):
        ran.append(msg)
        yield

    async def agen(msg):
        ran.append(msg)
        yield

    class Yields:
        def __call__(self, msg):
            yield

    for bad in (gen, agen, Yields()):
        with pytest.raises(jss.InvalidOptionError, match="generator function"):
            cons.consume(bad)
        with pytest.raises(jss.InvalidOptionError, match="generator function"):
            js.subscribe(subj, cb=bad)
    info = cons.info()
    assert (info.num_pending, info.delivered.stream_seq, ran) == (3, 0, [])


def test_consume_on_a_missing_consumer_reports_no_responders_then_ends(stream, cons):
    stream.delete_consumer("c")
    reports = []
    cc = cons.consume(lambda m: None, idle_heartbeat=0.5, expires=1.0, error_handler=reports.append)
    assert cc.wait(5)  # consumer gone: terminal, not retried forever
    assert isinstance(reports[0], jss.NoRespondersError)
    assert isinstance(reports[-1], jss.ConsumerDeletedError)


def test_stop_mid_consume_handles_no_more(js, subj, cons):
    publish(js, subj, 5)
    c = Collector()
    holder = {}
    started = threading.Event()

    def handler(msg):
        started.wait(5)
        c.handler(msg)
        if len(c.msgs) == 2:
            holder["cc"].stop()  # from the handler: returns at once

    holder["cc"] = cons.consume(handler)
    started.set()
    assert holder["cc"].wait(5)
    assert len(c.msgs) == 2


def test_drain_handles_everything_received(js, subj, cons):
    publish(js, subj, 5)
    c = Collector(delay=0.05)
    cc = cons.consume(c.handler)
    threading.Timer(0.1, cc.drain).start()
    assert cc.wait(5)
    assert len(c.msgs) == 5
    assert cc.closed


def test_wait_after_drain_returns_once_the_handlers_acks_are_processed(server, js, subj, stream):
    stream.create_consumer(durable_name="dw", ack_policy="explicit", max_ack_pending=20)
    publish(js, subj, 600)
    handled = []

    def slow(msg):
        time.sleep(0.002)  # the handler's work
        handled.append(msg.metadata.sequence.stream)
        msg.ack()

    with jss.connect(server.url) as other:
        ojs = other.jetstream()
        # The server takes acks in on its own time, so a lagging view shows
        # only now and then: many rounds.
        for _ in range(15):
            before = len(handled)
            cc = js.consumer(stream.name, "dw").consume(slow)
            wait_until(lambda: len(handled) >= before + 10)
            cc.drain()
            assert cc.wait(10)
            # Seen from another client at once: every handled message's ack is in.
            assert ojs.consumer_info(stream.name, "dw").ack_floor.stream_seq >= max(handled)


LOAD = 20_000  # many more than max_messages: every pull is filled at once
MID_PULL = 2_345  # not at a refill boundary: a pull is being delivered


@pytest.mark.timeout(60)
@pytest.mark.parametrize("end", ["drain", "stop"])
def test_drain_or_stop_under_load_leaves_nothing_pending_for_ack_wait(js, stream, end):
    publish(js, f"{stream.name.lower()}.x", LOAD, b"m")
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
    assert cons.info().config.ack_wait == 30  # the default: anything left for it shows long before
    handed = []
    reached = threading.Event()

    def handler(msg):
        handed.append(msg.metadata.sequence.stream)
        msg.ack()
        if len(handed) == MID_PULL:
            reached.set()

    cc = cons.consume(handler, max_messages=500)
    assert reached.wait(30)
    getattr(cc, end)()  # while the handler keeps going
    assert cc.wait(10)
    assert len(handed) >= MID_PULL
    if end == "drain":
        assert cc.stats.nakd_on_stop == 0  # a drain hands everything over, gives nothing back
    assert left_for_ack_wait(cons, handed, LOAD) == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("end", ["drain", "stop"])
def test_ending_with_a_busy_loop_and_a_pull_still_delivering_leaves_nothing_for_ack_wait(server, nc, js, stream, end):
    """As for messages(): what the server sent before it took in the UNSUB
    reaches the handler (drain) or is NAK'd (stop), even when the loop is busy
    right after the shutdown's first step while the open pull delivers."""
    subj = f"{stream.name.lower()}.x"
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
    handed = []
    flowing = threading.Event()

    def handler(msg):
        handed.append(msg.metadata.sequence.stream)
        msg.ack()
        if len(handed) == 5:
            flowing.set()

    # Large messages: what comes after the PONG takes many socket reads.
    with Publishing(server.url, subj, b"x" * 4096):
        cc = cons.consume(handler, max_messages=2000)  # a pull with room for long: still delivering at the end
        assert flowing.wait(10)
        end_with_the_loop_busy(nc, cc, end)
        assert cc.wait(10)
    assert left_for_ack_wait(cons, handed, stream.info().state.last_seq) == 0


def test_wait_on_already_closed_consume(js, subj, cons):
    cc = cons.consume(lambda m: None)
    cc.stop()
    assert cc.wait(5)
    assert cc.wait(0)
    cc.stop()
    cc.drain()  # no-ops


def test_handler_exception_goes_to_error_handler_and_message_is_redelivered(js, subj, cons):
    publish(js, subj, 3)
    seen = []
    errors = []

    def handler(msg):
        seen.append((msg.data, msg.metadata.num_delivered))
        if msg.data == b"1" and msg.metadata.num_delivered == 1:
            raise ValueError("boom")
        msg.ack()

    cc = cons.consume(handler, error_handler=errors.append)
    wait_until(lambda: (b"1", 2) in seen, timeout=5)  # NAK'd: redelivered at once, not after AckWait
    assert isinstance(errors[0], ValueError)
    cc.stop()


def test_error_handler_that_stops_does_not_deadlock(js, stream, subj, cons):
    publish(js, subj, 1)
    holder = {}

    def on_error(exc):
        holder["cc"].stop()
        holder["waited"] = holder["cc"].wait(1)  # from the worker itself: returns at once

    holder["cc"] = cons.consume(lambda m: m.ack(), error_handler=on_error)
    wait_until(lambda: cons.info().num_waiting == 1)  # consuming: its pull is open on the server
    stream.delete_consumer("c")
    assert holder["cc"].wait(5)


def test_handler_that_stops_and_drains(js, subj, cons):
    publish(js, subj, 5)
    handled = []
    holder = {}
    started = threading.Event()

    def handler(msg):
        started.wait(5)  # the handler may run before consume() returned the context
        handled.append(msg)
        msg.ack()
        if len(handled) == 2:
            holder["cc"].drain()
            holder["cc"].stop()

    holder["cc"] = cons.consume(handler)
    started.set()
    assert holder["cc"].wait(5)
    assert len(handled) == 2


def test_connection_closed_reaches_error_handler(server, stream):
    stream.create_consumer(durable_name="c")
    other = jss.connect(server.url)
    cons = other.jetstream().consumer(stream.name, "c")
    errors = []
    cc = cons.consume(lambda m: None, error_handler=errors.append)
    wait_until(lambda: cons.info().num_waiting == 1)  # consuming: its pull is open on the server
    other.close()
    assert cc.wait(3)
    assert any(isinstance(e, jss.ConnectionClosedError) for e in errors)


def test_close_stops_a_drained_context_that_still_holds_messages(server):
    """drain() finished on the loop while messages wait to be handed out:
    close() must still stop the context (no handler call after it returns)."""
    nc = jss.connect(server.url)
    try:
        js = nc.jetstream()
        stream = js.create_stream(name="CDR", subjects=["cdr.>"])
        publish(js, "cdr.x", 40)
        cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
        first, release, calls = threading.Event(), threading.Event(), []

        def handler(msg):
            calls.append(msg)
            first.set()
            release.wait(10)

        cc = cons.consume(handler, max_messages=40)
        assert first.wait(10)
        cc.drain()
        wait_until(lambda: cc._receiver.closed_event.is_set())  # the engine is done; the buffer is not
        publish(js, "cdr.x", 10)
        ctx = cons.messages(max_messages=5)
        ctx.next(timeout=10)
        ctx.drain()
        wait_until(lambda: ctx.closed)
        nc.close()
        seen = len(calls)
        release.set()
        assert cc.wait(10)
        assert len(calls) == seen  # nothing handed out after close()
        with pytest.raises(jss.ConnectionClosedError):
            ctx.next(timeout=5)
    finally:
        release.set()
        nc.close()
        with jss.connect(server.url) as other:
            other.jetstream().delete_stream("CDR")


@pytest.mark.timeout(60)
def test_slow_handler_with_default_options_gets_no_duplicates(js, stream, subj):
    """With the default max_messages (500), a handler slower than AckWait/500
    a message gets every message once: none of the buffered ones expires on
    the server and comes twice."""
    cons = stream.create_consumer(durable_name="slow", ack_wait=2.0)
    # 400 x 10 ms = 4 s of work, twice the AckWait: the buffer refills (at half
    # of 500) after the first messages have expired on the server.
    total = 400
    publish(js, subj, total)
    seen = collections.Counter()
    done = threading.Event()

    def handler(msg: jss.Msg) -> None:
        seen[msg.metadata.sequence.stream] += 1
        time.sleep(0.01)  # a database write
        msg.ack()
        if len(seen) == total:
            done.set()

    cc = cons.consume(handler)  # default options
    try:
        assert done.wait(30)
    finally:
        cc.stop()
    assert sorted(seen) == list(range(1, total + 1))
    assert max(seen.values()) == 1, {s: n for s, n in seen.items() if n > 1}
    info = cons.info()
    assert info.num_redelivered == 0 and info.num_ack_pending == 0


@pytest.mark.timeout(30)
def test_consume_wait_returns_with_final_stats(js, stream, subj):
    """stop() from a handler: once wait() returns, the NAKs of the buffer are counted."""
    cons = stream.create_consumer(durable_name="c2", ack_policy="explicit", ack_wait=30)
    publish(js, subj, 20)
    box = {}
    started = threading.Event()

    def handler(msg):
        started.wait(5)  # the handler may run before consume() returned the context
        msg.ack()
        box["cc"].stop()

    box["cc"] = cons.consume(handler, max_messages=10)
    started.set()
    assert box["cc"].wait(10)
    stats = box["cc"].stats
    assert stats.delivered == 1 and stats.nakd_on_stop == 9


@pytest.mark.timeout(60)
def test_a_handler_past_the_threshold_gets_a_refill_before_the_buffer_runs_dry(nc, js, stream):
    # ADR-37: pending below the threshold (half of max_messages) pulls more. consume()
    # takes without credit and credits when a handler returns; the refill must follow
    # that credit, not wait until all max_messages were handled.
    subj = f"{stream.name.lower()}.x"
    publish(js, subj, 400)
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
    spy = PullSpy(nc, stream.name, "c")
    handled, paused, release = [], threading.Event(), threading.Event()

    def handler(msg) -> None:
        handled.append(msg)
        msg.ack()
        if len(handled) == 70:  # 70 of the first 100 handled: 30 still in the buffer
            paused.set()
            release.wait(30)

    cc = cons.consume(handler, max_messages=100)
    try:
        assert paused.wait(20)
        # The second pull went out while the handler holds the 70th message.
        wait_until(lambda: spy.count >= 2, timeout=10)
    finally:
        release.set()
    wait_until(lambda: len(handled) == 400, timeout=30)
    cc.stop()
