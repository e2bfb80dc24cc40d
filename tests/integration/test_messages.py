"""messages(): the continuous iterator (nats.go TestPullConsumerMessages and the issue's acceptance)."""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import (
    BlockedNext,
    Bounded,
    Publishing,
    PullSpy,
    end_with_the_loop_busy,
    left_for_ack_wait,
    publish,
    sized_payload,
    wait_blocked,
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
        wait_blocked(waiter.thread)
        start = time.monotonic()
        getattr(ctx, end)()
        waiter.join(5)
        assert waiter.ended is not None, f"next() still blocked 5 s after {end}()"
        assert waiter.ended - start < 2.5  # at once, not after a 5 s shutdown flush or stop wait
        assert isinstance(waiter.error, jss.ConsumerStoppedError)


def test_stop_mid_iteration_hands_out_nothing_more(js, subj, cons):
    publish(js, subj, 5)
    ctx = cons.messages()
    ctx.prefetch()
    wait_until(lambda: ctx.stats.buffered_high_water >= 5, timeout=5)  # all five arrived, none handed out yet
    handled = []
    for msg in ctx:
        handled.append(msg)
        if len(handled) == 2:  # another thread stops it while this one handles the second
            stopper = threading.Thread(target=ctx.stop)
            stopper.start()
            stopper.join(5)
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
    wait_blocked(waiter.thread)
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
    for w in waiters:
        wait_blocked(w.thread)
    start = time.monotonic()
    ctx.stop()
    for w in waiters:
        w.join(5)
        assert isinstance(w.error, jss.ConsumerStoppedError)
        assert w.ended - start < 2.5  # at once, not after a 5 s shutdown flush or stop wait


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
    monkeypatch.setattr("jetstream_sync._core.connection.supported", lambda nc: False)
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


@pytest.mark.timeout(60)
def test_stop_after_the_drain_ended_returns_with_every_chunks_naks_written(js, stream, subj):
    """Messages that arrived one socket read each sit in the hand-off queue as
    chunks of their own; the drain hands them over and ends; stop() returns
    once all of them are NAK'd, not only those a caller had already taken
    into the buffer."""
    cons = stream.create_consumer(durable_name="chunks", ack_policy="explicit")
    ctx = cons.messages(max_messages=100)
    ctx.prefetch()
    wait_until(lambda: cons.info().num_waiting == 1)  # the pull is open: each publish comes on its own
    for i in range(10):
        js.publish(subj, str(i).encode())
    wait_until(lambda: cons.info().num_ack_pending == 10)
    ctx.next(5).ack()  # takes the first chunk into the buffer; the later ones stay queued
    ctx.drain()
    wait_until(lambda: not ctx.subscribed)
    ctx.stop()
    assert ctx.stats.nakd_on_stop == 9
    with cons.messages() as again:
        got = sorted(int(again.next(5).data) for _ in range(9))  # at once, not after AckWait (30 s)
    assert got == list(range(1, 10))


@pytest.mark.timeout(60)
def test_slow_iterating_thread_gets_no_duplicates(js, stream, subj):
    """A slow caller of the iterator gets every message once: the buffer is
    kept alive while the caller works."""
    cons = stream.create_consumer(durable_name="slowit", ack_wait=1.0)
    total = 40  # 40 x 60 ms = 2.4 s
    publish(js, subj, total)
    seen = collections.Counter()
    with cons.messages() as ctx:
        while len(seen) < total:
            msg = ctx.next(timeout=10)
            seen[msg.metadata.sequence.stream] += 1
            time.sleep(0.06)
            msg.ack()
        assert ctx.stats.kept_alive > 0
    assert max(seen.values()) == 1
    assert cons.info().num_redelivered == 0


@pytest.mark.timeout(60)
def test_terminal_error_reaches_every_thread_sharing_a_context(server, cons):
    ctx = cons.messages()
    waiters = []
    for i in range(4):
        waiters.append(Bounded(lambda: ctx.next(timeout=None), f"waiter-{i}"))
        wait_blocked(waiters[-1].thread)
    other = jss.connect(server.url, name="deleter")
    try:
        other.jetstream().delete_consumer(cons.stream_name, cons.name)
    finally:
        other.close()
    deadline = time.monotonic() + 10
    for w in waiters:
        w.join(max(0.0, deadline - time.monotonic()))
    outcomes = [
        "still blocked" if not w.finished else repr(w.error if w.error is not None else w.result) for w in waiters
    ]
    try:
        assert all(isinstance(w.error, jss.ConsumerDeletedError) for w in waiters), (
            "after the consumer was deleted the 4 waiting threads got: " + ", ".join(outcomes)
        )
        later = Bounded(lambda: ctx.next(timeout=1), "later").join(5)
        assert isinstance(later.error, jss.ConsumerDeletedError), f"a later ctx.next() got {later.error!r}"
    finally:
        ctx.stop()


@pytest.mark.timeout(60)
def test_stop_returns_after_context_closed_and_naks_written(server, nc, js, stream, subj, cons):
    """When stop() returns the context is closed and the buffered messages are
    already available again to another client (NAK'd, not left to AckWait).

    The server keeps a NAK'd message in num_ack_pending until it is redelivered,
    so "available again" is checked by fetching: a second client's
    fetch_no_wait right after stop() gets the 49 buffered messages. Three
    rounds (one consumer each), so that a lucky thread switch cannot hide it."""
    publish(js, subj, 50)
    other = jss.connect(server.url, name="after-stop")
    problems = []
    try:
        for rnd in range(3):
            rcons = stream.create_consumer(durable_name=f"stop{rnd}", ack_policy="explicit")
            ocons = other.jetstream().consumer(stream.name, rcons.name)
            ctx = rcons.messages(max_messages=50)
            taken = ctx.next(timeout=5)
            wait_until(lambda: rcons.info().num_ack_pending == 50)  # the server sent all 50 …
            nc.flush()  # … and they were read off the socket before the PONG: 49 are buffered
            ctx.stop()
            closed_at_return = ctx.closed
            with ocons.fetch_no_wait(100) as again:
                redelivered = list(again)
            seqs = sorted(m.metadata.sequence.stream for m in redelivered)
            expected = sorted(set(range(1, 51)) - {taken.metadata.sequence.stream})
            if not closed_at_return:
                problems.append(f"round {rnd}: ctx.closed was False right after stop() returned")
            if seqs != expected:
                problems.append(
                    f"round {rnd}: right after stop() another client could fetch {len(seqs)} of the 49 buffered messages"
                )
            elif not all(m.metadata.num_delivered == 2 for m in redelivered):
                problems.append(f"round {rnd}: the messages another client fetched were not the NAK'd ones")
    finally:
        other.close()
    assert not problems, "\n".join(problems)

    # stop() from inside a consume() handler returns at once.
    stop_took = []
    started = threading.Event()
    contexts = []

    def handler(m):
        started.wait(5)
        t = time.monotonic()
        contexts[0].stop()
        stop_took.append(time.monotonic() - t)

    contexts.append(cons.consume(handler))
    started.set()
    assert contexts[0].wait(10), "consume() did not close after stop() from its handler"
    # at once, not after the wait for the close (5 s) a stop() from another thread makes
    assert stop_took and stop_took[0] < 2.5, f"stop() inside the handler took {stop_took}"


class _ErrorRecords(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        if record.exc_info or "Exception in callback" in record.getMessage():
            self.records.append(record)


def _start_loop(cons, errors_seen, which, starts):
    """Start messages()/fetch() contexts and stop them, until the client is closed."""
    while True:
        try:
            if which == "messages":
                cons.messages(max_messages=10).stop()
            else:
                cons.fetch(1, expires=1).close()
            starts.append(1)
        except jss.ConnectionClosedError:
            return
        except BaseException as exc:
            errors_seen.append(exc)
            return


@pytest.mark.timeout(90)
def test_stop_before_start_raises_nothing(server, js, stream, subj, cons):
    """close() stopping a context whose engine has not started yet (being
    created on another thread at that moment) raises nothing, not even on the
    loop thread (asyncio's "Exception in callback" log, or a failed background
    task). Only reachable through this race, so it is run up to 40 times."""
    publish(js, subj, 50)
    records = _ErrorRecords()
    watched = [logging.getLogger("asyncio"), logging.getLogger("jetstream_sync")]
    for lg in watched:
        lg.addHandler(records)
    try:
        for attempt in range(40):
            client = jss.connect(server.url, name=f"stop-before-start-{attempt}")
            scons = client.jetstream().consumer(stream.name, cons.name)
            errors_seen = []
            starts = []
            workers = [
                Bounded(lambda w=w: _start_loop(scons, errors_seen, w, starts), f"start-{w}")
                for w in ("messages", "fetch") * 3
            ]
            wait_until(lambda: len(starts) >= 20 + attempt, timeout=20)  # close lands at a varying point
            closing = Bounded(client.close, "close").join(15)
            assert closing.finished, "close() did not return within 15s"
            for w in workers:
                w.join(5)
            assert all(w.finished for w in workers), "a context start is still blocked 5s after close()"
            assert not errors_seen, f"starting a context raised {errors_seen[:3]!r}, not ConnectionClosedError"
            if records.records:
                break
    finally:
        for lg in watched:
            lg.removeHandler(records)
    failures = [
        f"{r.name}: {r.getMessage()} {r.exc_info[1]!r}" if r.exc_info else f"{r.name}: {r.getMessage()}"
        for r in records.records
    ]
    assert not failures, "stopping a not-yet-started context raised on the loop thread:\n" + "\n".join(failures[:5])
