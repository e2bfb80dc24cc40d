"""messages(): the continuous iterator (nats.go TestPullConsumerMessages and the issue's acceptance)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import (
    BlockedNext,
    Publishing,
    PullSpy,
    end_with_the_loop_busy,
    left_for_ack_wait,
    publish,
    sized_payload,
    wait_until,
)


def take(ctx, n, timeout=5.0):
    return [ctx.next(timeout=timeout) for _ in range(n)]


def test_no_options(js, subj, cons):
    publish(js, subj, 5)
    ctx = cons.messages()
    assert [m.data for m in take(ctx, 5)] == [b"0", b"1", b"2", b"3", b"4"]
    ctx.stop()
    ctx.stop()  # harmless
    with pytest.raises(jss.ConsumerStoppedError):
        ctx.next(timeout=1)
    assert list(ctx) == []


def test_custom_batch_size_yields_all_in_order(js, subj, cons):
    publish(js, subj, 5)
    with cons.messages(max_messages=3) as ctx:
        assert [m.data for m in take(ctx, 5)] == [b"0", b"1", b"2", b"3", b"4"]


def test_max_messages_one_sends_exactly_one_pull_per_message(nc, js, stream, subj, cons):
    publish(js, subj, 5)
    spy = PullSpy(nc, stream.name, "c")
    with cons.messages(max_messages=1) as ctx:
        take(ctx, 5)
        assert spy.count == 5
    assert all(b["batch"] == 1 for b in spy.bodies)


def test_max_bytes_fitting_one_message(nc, js, stream):
    subj = f"{stream.name.lower()}.x"
    publish(js, subj, 5, sized_payload(stream.name, "c", subj, 60))
    cons = stream.create_consumer(durable_name="c")
    spy = PullSpy(nc, stream.name, "c")
    with cons.messages(max_bytes=60) as ctx:
        msgs = take(ctx, 5)
    assert [m.size for m in msgs] == [60] * 5
    assert spy.count >= 5
    assert all(b["max_bytes"] <= 60 and b["batch"] == 1_000_000 for b in spy.bodies)


def test_custom_max_bytes(nc, js, stream):
    subj = f"{stream.name.lower()}.x"
    publish(js, subj, 5, sized_payload(stream.name, "c", subj, 60))
    cons = stream.create_consumer(durable_name="c")
    spy = PullSpy(nc, stream.name, "c")
    with cons.messages(max_bytes=150) as ctx:
        assert len(take(ctx, 5)) == 5
    assert spy.count >= 3


def test_remove_consumer_while_iterating(js, stream, subj, cons):
    publish(js, subj, 2)
    ctx = cons.messages()
    take(ctx, 2)
    stream.delete_consumer("c")
    with pytest.raises(jss.ConsumerDeletedError):
        ctx.next(timeout=5)
    with pytest.raises(jss.ConsumerDeletedError):  # every later call, too
        ctx.next(timeout=1)
    assert ctx.wait_closed(5)


def test_for_loop_ends_with_consumer_deleted(js, stream, subj, cons):
    publish(js, subj, 3)
    seen = []
    with pytest.raises(jss.ConsumerDeletedError):
        for msg in cons.messages():
            seen.append(msg.data)
            msg.ack()
            if len(seen) == 3:
                stream.delete_consumer("c")
    assert seen == [b"0", b"1", b"2"]


def test_stop_then_create_again_continues(js, subj, cons):
    publish(js, subj, 5)
    with cons.messages() as ctx:
        for m in take(ctx, 5):
            m.ack()
    publish(js, subj, 5, start=5)
    with cons.messages() as ctx:
        assert [m.data for m in take(ctx, 5)] == [b"5", b"6", b"7", b"8", b"9"]


def test_blocked_next_is_woken_by_stop_and_drain(cons):
    for end in ("stop", "drain"):
        ctx = cons.messages()
        waiter = BlockedNext(ctx)
        time.sleep(0.1)  # let it block
        start = time.monotonic()
        getattr(ctx, end)()
        waiter.join(5)
        assert waiter.ended - start < 1.0
        assert isinstance(waiter.error, jss.ConsumerStoppedError)


def test_stop_mid_iteration_hands_out_nothing_more(js, subj, cons):
    publish(js, subj, 5)
    ctx = cons.messages()
    threading.Timer(0.1, ctx.stop).start()
    handled = []
    for msg in ctx:
        handled.append(msg)
        time.sleep(0.08)  # the work of handling one message
    assert len(handled) == 2


def test_drain_hands_out_everything_received(js, subj, cons):
    publish(js, subj, 5)
    ctx = cons.messages()
    ctx.next(timeout=5).ack()
    threading.Timer(0.1, ctx.drain).start()
    handled = 1
    for msg in ctx:
        handled += 1
        msg.ack()
        time.sleep(0.05)
    assert handled == 5


def test_clean_drain_leaves_nothing_pending_or_waiting(js, subj, cons):
    publish(js, subj, 50)
    ctx = cons.messages(max_messages=20)
    handled = []
    for msg in ctx:
        handled.append(msg)
        msg.ack()
        if len(handled) == 10:
            ctx.drain()
    assert ctx.wait_closed(5)
    assert len(handled) >= 10
    info = wait_until(lambda: (lambda i: i if i.num_ack_pending == 0 and i.num_waiting == 0 else None)(cons.info()))
    assert info.ack_floor.stream_seq == len(handled)


@pytest.mark.timeout(60)
def test_lossless_stop(js, stream):
    subj = f"{stream.name.lower()}.x"
    publish(js, subj, 10_000, b"m")
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit", ack_wait=30.0)
    seen = []
    with cons.messages(max_messages=500) as ctx:
        for msg in ctx:
            seen.append(msg.metadata.sequence.stream)
            msg.ack()
            if len(seen) == 3000:
                break
    assert ctx.wait_closed(5)
    wait_until(lambda: cons.info().ack_floor.stream_seq == 3000, timeout=10)
    start = time.monotonic()
    with cons.messages(max_messages=500) as ctx:
        for msg in ctx:
            seen.append(msg.metadata.sequence.stream)
            msg.ack()
            if len(seen) == 10_000:
                break
            assert time.monotonic() - start < 10
    assert time.monotonic() - start < 10  # long before AckWait: the buffer was NAK'd
    assert sorted(seen) == list(range(1, 10_001))  # every sequence, none twice


LOAD = 20_000  # many more than max_messages: every pull is filled at once
MID_PULL = 2_345  # not at a refill boundary: a pull is being delivered


def _loaded_consumer(js, stream):
    publish(js, f"{stream.name.lower()}.x", LOAD, b"m")
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
    assert cons.info().config.ack_wait == 30  # the default: anything left for it shows long before
    return cons


@pytest.mark.timeout(60)
def test_drain_under_load_leaves_nothing_pending_for_ack_wait(js, stream):
    cons = _loaded_consumer(js, stream)
    handed = []
    ctx = cons.messages(max_messages=500)
    for msg in ctx:
        handed.append(msg.metadata.sequence.stream)
        msg.ack()
        if len(handed) == MID_PULL:
            ctx.drain()
    assert ctx.wait_closed(10)
    assert len(handed) >= MID_PULL
    assert ctx.stats.nakd_on_stop == 0  # a drain hands everything over, gives nothing back
    assert left_for_ack_wait(cons, handed, LOAD) == 0


@pytest.mark.timeout(60)
def test_stop_under_load_leaves_nothing_pending_for_ack_wait(js, stream):
    cons = _loaded_consumer(js, stream)
    handed = []
    with cons.messages(max_messages=500) as ctx:
        for msg in ctx:
            handed.append(msg.metadata.sequence.stream)
            msg.ack()
            if len(handed) == MID_PULL:
                break  # leaving the with block stops: what was buffered is NAK'd
    assert ctx.wait_closed(10)
    assert len(handed) == MID_PULL
    assert left_for_ack_wait(cons, handed, LOAD) == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("end", ["drain", "stop"])
def test_ending_with_a_busy_loop_and_a_pull_still_delivering_leaves_nothing_for_ack_wait(server, nc, js, stream, end):
    """drain() or stop() while the open pull keeps delivering and the loop is
    busy right after the shutdown's first step: what the server sent before it
    took in the UNSUB reaches the context (handed over, or NAK'd). nats-py
    wrote the PING of its Subscription.drain() ahead of the UNSUB: the PONG
    came back while the server went on delivering, the subscription went on
    it, and what came after waited out AckWait."""
    subj = f"{stream.name.lower()}.x"
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
    handed = []
    # Large messages: what comes after the PONG takes many socket reads.
    with Publishing(server.url, subj, b"x" * 4096):
        ctx = cons.messages(max_messages=2000)  # a pull with room for long: still delivering at the end
        for _ in range(5):
            msg = ctx.next(10)
            handed.append(msg.metadata.sequence.stream)
            msg.ack()
        nc.flush()  # the acks are out: nothing queued delays the busy spell
        end_with_the_loop_busy(nc, ctx, end)
        for msg in ctx:
            handed.append(msg.metadata.sequence.stream)
            msg.ack()
        assert ctx.wait_closed(10)
    assert left_for_ack_wait(cons, handed, stream.info().state.last_seq) == 0


def test_stop_naks_the_buffer_for_immediate_redelivery(js, subj, cons):
    publish(js, subj, 100)
    ctx = cons.messages(max_messages=50)
    first = ctx.next(timeout=5)
    first.ack()
    wait_until(lambda: cons.info().num_ack_pending == 49)  # the rest of the batch sits in our buffer
    ctx.stop()
    assert ctx.wait_closed(5)
    assert ctx.stats.nakd_on_stop == 49
    start = time.monotonic()
    with cons.messages(max_messages=50) as again:
        seqs = [m.metadata.sequence.stream for m in take(again, 49)]
    assert sorted(seqs) == list(range(2, 51))
    assert time.monotonic() - start < 5  # AckWait is 30 s: these were NAK'd


def test_connection_close_ends_a_blocked_next(server, stream):
    other = jss.connect(server.url)
    cons = other.jetstream().consumer(stream.name, stream.create_consumer(durable_name="c").name)
    waiter = BlockedNext(cons.messages())
    time.sleep(0.1)  # let it block
    other.close()
    assert isinstance(waiter.join(10).error, jss.ConnectionClosedError)


def test_pulls_on_a_missing_consumer_end_with_consumer_deleted(stream, cons):
    stream.delete_consumer("c")
    reports = []
    ctx = cons.messages(idle_heartbeat=0.5, expires=1.0, error_handler=lambda e: reports.append((time.monotonic(), e)))
    start = time.monotonic()
    with pytest.raises(jss.ConsumerDeletedError):
        ctx.next(timeout=10)
    assert time.monotonic() - start < 5  # the 503 led to a look at the consumer
    assert jss.NoRespondersError in [type(e) for _, e in reports]
    assert ctx.wait_closed(5)


def test_threads_share_one_context(js, subj, cons):
    publish(js, subj, 2000, b"p")
    ctx = cons.messages(max_messages=100)
    got = [[] for _ in range(8)]

    def worker(i):
        while True:
            try:
                msg = ctx.next(timeout=2)
            except (jss.TimeoutError, jss.ConsumerStoppedError):
                return
            got[i].append(msg.metadata.sequence.stream)
            msg.ack()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    seqs = [s for g in got for s in g]
    assert sorted(seqs) == list(range(1, 2001))  # each message to exactly one thread
    assert sum(1 for g in got if g) >= 2
    ctx.stop()


@pytest.mark.parametrize("round_", range(4))  # the race it guards against shows in about 1 run of 5
def test_sixteen_iterating_threads_never_stall_and_share_exactly_once(js, subj, cons, round_):
    """Lock-free takes from 16 threads: the pending count the engine derives
    from them must never lag (a lagging count stops the pulls: a stall)."""
    n = 30_000
    publish(js, subj, n, b"p")
    seen = [[] for _ in range(16)]
    total = itertools.count(1)
    all_in = threading.Event()
    with cons.messages() as ctx:

        def worker(i):
            for msg in ctx:
                seen[i].append(msg.metadata.sequence.stream)
                msg.ack()
                if next(total) == n:
                    all_in.set()

        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(16)]
        for t in threads:
            t.start()
        finished = all_in.wait(60)
        ctx.stop()
        for t in threads:
            t.join(10)
    seqs = sorted(s for g in seen for s in g)
    assert finished, f"stalled after {len(seqs)} of {n} messages"
    assert seqs == list(range(1, n + 1))  # each message to exactly one thread
    assert not any(t.is_alive() for t in threads)


def test_stop_wakes_every_blocked_thread(cons):
    ctx = cons.messages()
    waiters = [BlockedNext(ctx) for _ in range(6)]
    time.sleep(0.2)  # let them block
    start = time.monotonic()
    ctx.stop()
    for w in waiters:
        w.join(5)
        assert isinstance(w.error, jss.ConsumerStoppedError)
        assert w.ended - start < 1.0


def test_invalid_options_send_nothing(nc, stream, cons):
    spy = PullSpy(nc, stream.name, "c")
    bad = [
        {"max_messages": -1},
        {"max_messages": 0},
        {"max_messages": 10, "max_bytes": 10, "threshold_bytes": 5},  # both: max_bytes only caps each pull
        {"max_bytes": 0},
        {"expires": 0.5},
        {"expires": -1},
        {"idle_heartbeat": 20},
        {"idle_heartbeat": 0.1},
        {"idle_heartbeat": 31, "expires": 100},
        {"threshold_messages": 600},
        {"threshold_bytes": 5},
        {"max_msgs": 5},  # a misspelt option
    ]
    for kwargs in bad:
        with pytest.raises(jss.InvalidOptionError):
            cons.messages(**kwargs)
        with pytest.raises(jss.InvalidOptionError):
            cons.consume(lambda m: None, **kwargs)
    assert spy.count == 0


def test_statuses_never_reach_the_user(js, subj, cons):
    publish(js, subj, 3)
    with cons.messages(expires=1.0, idle_heartbeat=0.5) as ctx:
        msgs = take(ctx, 3)
        with pytest.raises(jss.TimeoutError):
            ctx.next(timeout=2.5)  # heartbeats and a 408 arrive meanwhile
        assert ctx.stats.heartbeats >= 1 and ctx.stats.statuses.get("408 Request Timeout", 0) >= 1
    assert all(m.data and m.reply for m in msgs)


def test_works_without_the_fast_paths(monkeypatch, server, stream):
    """If nats-py's internals change, the public nats-py API is used instead."""
    monkeypatch.setattr("jetstream_sync._connection.supported", lambda nc: False)
    plain = jss.connect(server.url)
    try:
        assert not plain._conn.fast
        js = plain.jetstream()
        subj = f"{stream.name.lower()}.x"
        publish(js, subj, 20)
        cons = js.create_consumer(stream.name, durable_name="slow")
        with cons.messages(max_messages=7) as ctx:
            for msg in take(ctx, 15):
                msg.ack()
        # The rest were buffered and NAK'd by stop(): they come back at once.
        assert sorted(int(m.data) for m in cons.fetch(5, expires=2)) == list(range(15, 20))
        plain.flush()
        wait_until(lambda: cons.info().ack_floor.stream_seq == 15)
    finally:
        plain.close()


def test_stop_after_drain_naks_what_the_drain_received_and_nobody_took(js, stream, subj, cons):
    # The worker's deadline path: drain(), handlers stuck, then stop(). Messages that came
    # in chunks after the one being read must go back at once, not after AckWait (30 s).
    ctx = cons.messages()
    js.publish(subj, b"first")
    first = ctx.next(5)
    publish(js, subj, 49)  # later socket reads: further chunks in the hand-off queue
    wait_until(lambda: cons.info().num_ack_pending == 50)
    ctx.drain()
    ctx.stop()
    first.ack()
    with cons.messages() as again:
        got = [again.next(5) for _ in range(49)]
    assert sorted(int(m.data) for m in got) == list(range(49))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["stop", "drain then stop", "drain, ended, then stop"])
def test_stop_naks_do_not_come_back_into_its_own_pull_and_use_up_max_deliver(js, stream, subj, how):
    """A NAK'd message is redelivered at once; while the stopped context's pull
    was still open it came back into it, was NAK'd again, and with max_deliver=2
    was never delivered again (seen in 6 of 12 rounds before the NAKs waited
    for the unsubscribe). Several rounds: the race needs the pull still open."""
    for round_ in range(6):
        cons = stream.create_consumer(durable_name=f"r{round_}", ack_policy="explicit", max_deliver=2)
        if round_ == 0:
            publish(js, subj, 50)  # every round's new consumer starts from the first
        ctx = cons.messages(max_messages=100)  # a pull with room left: the server can put NAK'd ones into it
        ctx.next(5).ack()
        wait_until(lambda: cons.info().num_ack_pending == 49)  # all of them buffered here
        if how != "stop":
            ctx.drain()
        if how == "drain, ended, then stop":  # stop() must still return with its NAKs written
            wait_until(lambda: not ctx.subscribed)
        ctx.stop()
        assert ctx.stats.nakd_on_stop == 49
        with cons.messages() as again:
            got = {again.next(5).data for _ in range(49)}  # each one comes again, on its second delivery
        assert len(got) == 49
        stream.delete_consumer(f"r{round_}")
