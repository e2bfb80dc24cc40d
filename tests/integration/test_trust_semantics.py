"""Regression tests: what users can check about buffering, ordering of acks,
fork safety, bounded queues and error delivery.

Each test is named after the defect it pins down. Every wait is bounded (a
poll with a deadline, a join with a timeout). Only the public API is used,
plus the test server's own controls (pause/resume, its monitoring port).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request

import pytest

import jetstream_sync as jss

from ..helpers import Bounded, publish, wait_blocked, wait_until

# -- helpers ------------------------------------------------------------------


def first(fetch_result):
    """The first message of a fetch (the rest, if any, is NAK'd by close())."""
    with fetch_result as r:
        for m in r:
            return m
    raise AssertionError("the fetch returned no message")


# -- 8. heartbeat alarms and the buffer bound ----------------------------------------


@pytest.mark.timeout(90)
def test_heartbeat_alarms_never_exceed_the_buffer_bound(private_server):
    """messages(max_messages=100): however many heartbeat alarms re-pull while
    the server is frozen, no more than 100 messages are ever buffered."""
    client = jss.connect(private_server.url, name="hb-bound")
    feeder = jss.connect(private_server.url, name="hb-feeder")
    try:
        js = client.jetstream()
        stream = js.create_stream(name="HB", subjects=["hb.>"])
        cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
        ctx = cons.messages(max_messages=100, expires=4, idle_heartbeat=1)
        taker = Bounded(lambda: ctx.next(timeout=60), "takes-one")  # takes one message, then no more
        wait_until(lambda: ctx.stats.heartbeats >= 1, timeout=5)  # its pull is open on the server

        private_server.pause()
        try:
            wait_until(lambda: ctx.stats.missed_heartbeats >= 3, timeout=20)
        finally:
            private_server.resume()

        publish(feeder.jetstream(), "hb.x", 2000)
        taker.join(15)
        assert taker.finished and taker.error is None, f"the waiting thread got no message: {taker.error!r}"

        # The pulls the alarms sent are served now; watch the buffer while they are.
        watch_until = time.monotonic() + 5
        while time.monotonic() < watch_until and ctx.stats.buffered_high_water <= 100:
            time.sleep(0.05)
        stats = ctx.stats
        ctx.stop()
        assert stats.buffered_high_water <= 100, (
            f"{stats.buffered_high_water} messages buffered with max_messages=100 "
            f"after {stats.missed_heartbeats} heartbeat alarms ({stats.pulls} pulls)"
        )
    finally:
        feeder.close()
        client.close()


# -- 9. queued acks reach the server before the next pull / API request --------------


@pytest.mark.timeout(60)
def test_nak_then_fetch_gets_the_redelivery(js, stream, subj):
    """fetch 1, nak it, fetch 1: the second fetch is the NAK'd message (the
    NAK is on the server before the pull), every time."""
    publish(js, subj, 2)
    mismatches = []
    for i in range(20):
        cons = stream.create_consumer(durable_name=f"nak{i}", ack_policy="explicit")
        m = first(cons.fetch(1, expires=2))
        m.nak()
        again = first(cons.fetch(1, expires=2))
        if again.metadata.sequence.stream != m.metadata.sequence.stream:
            mismatches.append((i, m.metadata.sequence.stream, again.metadata.sequence.stream))
        cons.delete()
    assert not mismatches, (
        f"{len(mismatches)}/20 times the fetch after a NAK did not return the NAK'd message "
        f"(iteration, nak'd seq, fetched seq): {mismatches[:5]}"
    )


@pytest.mark.timeout(60)
def test_ack_then_info_counts_it_acked(js, subj, cons):
    """msg.ack() then cons.info(): the ack is counted, every time."""
    publish(js, subj, 50)
    still_pending = []
    for i in range(50):
        m = first(cons.fetch(1, expires=2))
        m.ack()
        n = cons.info().num_ack_pending
        if n != 0:
            still_pending.append((i, n))
    assert not still_pending, (
        f"{len(still_pending)}/50 times cons.info() right after msg.ack() still counted it pending "
        f"(iteration, num_ack_pending): {still_pending[:5]}"
    )


# -- 10. fork --------------------------------------------------------------------------


def _child_try(label, fn):
    try:
        fn()
    except jss.ForkedProcessError:
        return f"{label}: ForkedProcessError"
    except BaseException as exc:
        return f"{label}: raised {type(exc).__name__}"
    return f"{label}: no error"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.timeout(60)
def test_inherited_objects_raise_in_forked_child(nc, js, subj, cons):
    publish(js, subj, 10)
    held = first(cons.fetch(1, expires=2))  # fetched, not acked
    ctx = cons.messages(max_messages=5)
    ctx.next(timeout=5)
    wait_until(lambda: ctx.stats.buffered_high_water >= 2)  # at least one message buffered
    wait_until(lambda: cons.info().num_ack_pending == 6)  # 1 fetched + 5 pulled by ctx
    before = cons.info().num_ack_pending

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: no pytest machinery, report through the pipe and leave
        try:
            signal.alarm(20)  # a hang in the child must not outlive the test
            lines = [
                _child_try("msg.ack()", held.ack),
                _child_try("ctx.next(timeout=1)", lambda: ctx.next(timeout=1)),
                _child_try("js.publish()", lambda: js.publish(subj, b"from child")),
                _child_try("nc.publish()", lambda: nc.publish(subj, b"from child")),
                _child_try("cons.info()", cons.info),
            ]
            os.write(w, "\n".join(lines).encode())
        finally:
            os._exit(0)
    os.close(w)
    deadline = time.monotonic() + 30
    while True:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child hung")
        time.sleep(0.02)
    with os.fdopen(r, "rb") as pipe:
        report = pipe.read().decode().splitlines()

    wrong = [line for line in report if not line.endswith(": ForkedProcessError")]
    assert len(report) == 5 and not wrong, "in the forked child:\n" + "\n".join(report)
    # Nothing the child did reached the server: the held message is still pending …
    assert cons.info().num_ack_pending == before, "the child's ack reached the server"
    # … and the parent can still ack it.
    held.ack()
    nc.flush()
    wait_until(lambda: cons.info().num_ack_pending == before - 1)
    ctx.stop()


# -- 14. core subscriptions and slow readers --------------------------------------------


@pytest.mark.timeout(60)
def test_core_subscription_slow_reader_is_bounded(server):
    """A core subscription nobody reads keeps at most pending_msgs_limit
    messages, drops the rest (counted in sub.dropped) and reports a slow consumer."""
    reported = []
    client = jss.connect(server.url, name="slow-reader", error_cb=reported.append)
    sender = jss.connect(server.url, name="fast-sender")
    try:
        sub = client.subscribe("slow", pending_msgs_limit=1000)
        client.flush()
        for i in range(5000):
            sender.publish("slow", b"%d" % i)
        sender.flush()
        client.flush()
        wait_until(lambda: sub.pending() + sub.dropped == 5000, timeout=10)  # all kept or dropped
        assert sub.pending() <= 1000, f"{sub.pending()} messages queued with pending_msgs_limit=1000"
        assert sub.dropped == 5000 - sub.pending()

        def slow_reports():
            return [e for e in reported if "slow" in f"{type(e).__name__} {e}".lower()]

        try:
            wait_until(slow_reports, timeout=5)
        except AssertionError:  # not through error_cb: then reading the subscription must say so
            with pytest.raises(jss.JetStreamError, match="(?i)slow"):
                sub.next_msg(timeout=1)
    finally:
        sender.close()
        client.close()


# -- 15. one publish_async machinery per connection ----------------------------------------


def _subscriptions_of(server, name):
    url = f"http://127.0.0.1:{server.monitor_port}/connz?subs=1"
    with urllib.request.urlopen(url, timeout=5) as resp:
        conns = [c for c in json.loads(resp.read())["connections"] if c.get("name") == name]
    assert len(conns) == 1, f"connection {name!r} not found on the server"
    conn = conns[0]
    return max(conn.get("subscriptions", 0), len(conn.get("subscriptions_list") or []))


@pytest.mark.timeout(60)
def test_one_async_publisher_per_client(server, stream, subj):
    """50 JetStream contexts on one connection, each using publish_async once,
    share one reply subscription instead of making one each."""
    name = "one-async-publisher"
    client = jss.connect(server.url, name=name)
    try:
        contexts = [client.jetstream() for _ in range(50)]
        futures = [ctx.publish_async(subj, b"%d" % i) for i, ctx in enumerate(contexts)]
        for f in futures:
            assert isinstance(f.result(timeout=10), jss.PubAck)
        client.flush()
        subs = _subscriptions_of(server, name)
        assert subs <= 3, f"{subs} subscriptions on the connection after 50 contexts published once each"
    finally:
        client.close()


# -- 16. the publish_async window: each caller waits its own timeout -------------------------


@pytest.mark.timeout(60)
def test_publish_async_window_waits_are_per_caller(private_server):
    client = jss.connect(private_server.url, name="window")
    try:
        js = client.jetstream()
        js.create_stream(name="W", subjects=["w.>"])
        js.set_publish_async_max_pending(10)
        private_server.pause()  # no acks come back
        try:
            window = [js.publish_async("w.x", b"%d" % i, timeout=30) for i in range(10)]  # the window is full
            callers = [
                Bounded(lambda: js.publish_async("w.x", b"blocked", timeout=1), f"caller-{i}") for i in range(16)
            ]
            deadline = time.monotonic() + 6
            for c in callers:
                c.join(max(0.0, deadline - time.monotonic()))
            outcomes = [
                "still blocked after 6s" if not c.finished
                else f"{type(c.error).__name__ if c.error else 'returned'} after {c.elapsed:.1f}s"
                for c in callers
            ]
        finally:
            private_server.resume()
        ok = [c.finished and isinstance(c.error, jss.TimeoutError) and c.elapsed < 3 for c in callers]
        assert all(ok), "publish_async(timeout=1) on a full window, 16 callers: " + ", ".join(outcomes)
        assert js.publish_async_complete(timeout=10)
        assert js.publish_async_pending == 0
        assert all(isinstance(f.result(timeout=0), jss.PubAck) for f in window)
    finally:
        client.close()


# -- 24. a terminal error is seen by every thread sharing a context ---------------------------


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


# -- 25. stop(): closed and NAKs on the server when it returns -----------------------------


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
    assert stop_took and stop_took[0] < 0.5, f"stop() inside the handler took {stop_took}"
