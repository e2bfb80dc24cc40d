"""publish_async: a bounded window of pipelined publishes, on one reply
subscription per connection; every future resolves, also when close()
races the publishers; each caller waits its own timeout on a full window;
bad input fails only its own publish."""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time
import urllib.request

import pytest

import jetstream_sync as jss

from ..helpers import Bounded, stream_messages, wait_until


@pytest.mark.timeout(120)
def test_100k_publishes_all_acked_in_order(js, stream):
    subj = f"{stream.name.lower()}.bulk"
    payload = b"x" * 128
    futures = [js.publish_async(subj, payload) for _ in range(100_000)]
    assert js.publish_async_complete(timeout=60)
    seqs = [f.result(timeout=0).seq for f in futures]
    assert seqs == list(range(1, 100_001))
    assert stream.info().state.messages == 100_000
    assert js.publish_async_pending == 0


def test_window_bounds_in_flight(js, stream):
    js.set_publish_async_max_pending(10)
    subj = f"{stream.name.lower()}.w"
    seen = []
    lock = threading.Lock()

    def watch(_f):
        with lock:
            seen.append(js.publish_async_pending)

    futures = [js.publish_async(subj, b"1") for _ in range(200)]
    for f in futures:
        f.add_done_callback(watch)
    assert js.publish_async_complete(timeout=30)
    assert max(seen) <= 10
    # One window per Client, resizable; a bad size is refused.
    js.set_publish_async_max_pending(5)
    seen.clear()
    for f in [js.publish_async(subj, b"2") for _ in range(100)]:
        f.add_done_callback(watch)
    assert js.publish_async_complete(timeout=30)
    assert max(seen) <= 5
    with pytest.raises(jss.InvalidOptionError):
        js.set_publish_async_max_pending(0)


def test_errors_resolve_the_future(js, stream):
    subj = f"{stream.name.lower()}.e"
    ok = js.publish_async(subj, b"1", msg_id="a")
    dup = js.publish_async(subj, b"1", msg_id="a")
    assert ok.result(10).seq == 1 and dup.result(10).duplicate
    bad = js.publish_async(subj, b"2", expected_last_seq=99)
    with pytest.raises(jss.APIError):
        bad.result(10)
    nobody = js.publish_async("no.stream", b"3", timeout=3)
    with pytest.raises(jss.NoRespondersError):
        nobody.result(10)


def test_close_fails_outstanding_futures(server):
    nc = jss.connect(server.url)
    js = nc.jetstream()
    nc.subscribe("blackhole.>")  # receives but never acks
    nc.flush()
    fut = js.publish_async("blackhole.x", b"1", timeout=30)
    nc.close()
    with pytest.raises(jss.ConnectionClosedError):
        fut.result(5)


def test_timeout_resolves_the_future(js, nc):
    nc.subscribe("blackhole2.>")
    nc.flush()
    fut = js.publish_async("blackhole2.x", b"1", timeout=0.3)
    with pytest.raises(jss.TimeoutError):
        fut.result(5)


def test_flush_sends_queued_publishes_and_close_waits_for_their_acks(server, stream):
    nc = jss.connect(server.url)
    js = nc.jetstream()
    subj = f"{stream.name.lower()}.c"
    first = [js.publish_async(subj, b"1") for _ in range(10)]
    nc.flush()  # no result() was asked for: flush alone must send them
    wait_until(lambda: stream.info().state.messages == 10)
    second = [js.publish_async(subj, b"2") for _ in range(10)]
    nc.close()  # sends them and lets their acks arrive before closing
    assert all(f.exception(timeout=0) is None for f in first + second)
    assert stream.info().state.messages == 20


def test_the_shortcut_for_known_subjects_keeps_every_check(server, stream):
    """A subject published to before skips its own checks, not the others:
    payload size, str payloads, options, and a closed client."""
    nc = jss.connect(server.url)
    js = nc.jetstream()
    subj = f"{stream.name.lower()}.known"
    assert js.publish_async(subj, b"1").result(10).seq == 1  # the subject is known from here on
    with pytest.raises(jss.InvalidOptionError):
        js.publish_async(subj, b"x" * (nc.max_payload + 1))
    with pytest.raises(jss.InvalidOptionError):
        js.publish_async(subj, b"x", timeout=-1)
    assert js.publish_async(subj, "two").result(10).seq == 2
    assert js.publish_async(subj, b"3", headers={"K": "v"}).result(10).seq == 3
    nc.close()
    with pytest.raises(jss.ConnectionClosedError):
        js.publish_async(subj, b"4")


@pytest.mark.timeout(60)
def test_a_busy_loop_thread_slows_publish_async_only_for_a_bounded_time(js, stream):
    """Publishers step aside while the loop thread has not sent what they
    queued (it may be waiting for the GIL), but only briefly: with the loop
    busy elsewhere for a long while, 3,000 calls still return meanwhile, and
    every publish is acknowledged once it is free."""
    subj = f"{stream.name.lower()}.busy"
    conn = js._api.connection  # the loop thread is kept busy from inside
    js.publish(subj, b"warm")  # the reply subscription exists; the subject is known
    started, release, busy_over = threading.Event(), threading.Event(), threading.Event()

    def busy():
        started.set()
        release.wait(20)  # the loop thread does nothing else meanwhile, until the calls returned
        busy_over.set()

    conn.loop_thread.call_soon(busy)
    assert started.wait(5)
    futures = [js.publish_async(subj, b"%d" % i) for i in range(3000)]
    assert not busy_over.is_set()  # the calls did not wait for the loop
    release.set()
    assert js.publish_async_complete(timeout=30)
    assert [f.result(0).seq for f in futures] == list(range(2, 3002))


@pytest.mark.timeout(60)
def test_bad_header_fails_only_its_own_publish(nc, js, stream, subj):
    first = [js.publish_async(subj, b"a%d" % i) for i in range(50)]
    with pytest.raises(jss.InvalidOptionError):
        js.publish_async(subj, b"bad", headers={"bad key": "v"})
    with pytest.raises(jss.InvalidOptionError):
        js.publish_async(subj, b"bad", headers={"K": 5})
    second = [js.publish_async(subj, b"b%d" % i) for i in range(50)]

    acks = [f.result(timeout=15) for f in first + second]
    assert all(isinstance(a, jss.PubAck) for a in acks)
    assert len({a.seq for a in acks}) == 100
    assert js.publish_async_complete(timeout=10)
    assert stream.info().state.messages == 100
    assert nc.is_connected and not nc.is_closed


@pytest.mark.timeout(30)
def test_publish_async_complete_validates_its_timeout_first(nc):
    js = nc.jetstream()
    for bad in (float("nan"), -1, "1"):
        with pytest.raises(jss.InvalidOptionError):
            js.publish_async_complete(timeout=bad)


@pytest.mark.timeout(60)
def test_close_racing_publish_async_resolves_every_future(server, stream, subj):
    """Futures of publish_async calls made while close() runs all resolve: to a
    PubAck (and then the message is in the stream) or to ConnectionClosedError."""
    racing = jss.connect(server.url, name="close-racing-publish-async")
    rjs = racing.jetstream()
    futures = []
    futures_lock = threading.Lock()
    call_errors = []  # what publish_async raised, other than ConnectionClosedError
    go = threading.Event()
    finish = threading.Event()

    def publisher():
        go.wait(5)
        while not finish.is_set():
            try:
                f = rjs.publish_async(subj, b"x")
            except jss.ConnectionClosedError:
                return
            except BaseException as exc:
                call_errors.append(exc)
                return
            with futures_lock:
                futures.append(f)

    threads = [threading.Thread(target=publisher, daemon=True) for _ in range(6)]
    for t in threads:
        t.start()
    go.set()
    wait_until(lambda: len(futures) >= 3000, timeout=15)

    closing = Bounded(racing.close, "close").join(15)
    assert closing.finished, "close() did not return within 15s while publish_async ran"
    assert closing.error is None, f"close() raised {closing.error!r}"
    finish.set()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads), "a publish_async call is still blocked 10s after close()"
    assert not call_errors, f"publish_async raised something other than ConnectionClosedError: {call_errors[:3]!r}"

    # A publish_async after close() fails with ConnectionClosedError, now or through its future.
    try:
        late = rjs.publish_async(subj, b"late")
    except jss.ConnectionClosedError:
        pass
    else:
        with pytest.raises(jss.ConnectionClosedError):
            late.result(timeout=5)

    done, not_done = concurrent.futures.wait(futures, timeout=10)
    raised_while_pending = []
    for f in list(not_done)[:20]:
        try:
            f.result(timeout=0.1)
        except BaseException as exc:
            if not f.done() and not isinstance(exc, concurrent.futures.TimeoutError):
                raised_while_pending.append(exc)
    acks = 0
    wrong = []
    for f in done:
        exc = f.exception(timeout=0)
        if exc is None:
            assert isinstance(f.result(timeout=0), jss.PubAck)
            acks += 1
        elif not isinstance(exc, jss.ConnectionClosedError):
            wrong.append(exc)
    stored = stream_messages(stream)
    problems = []
    if not_done:
        problems.append(f"{len(not_done)} of {len(futures)} futures still not done 10s after close()")
    if raised_while_pending:
        problems.append(f"f.result() raised while the future was not done: {raised_while_pending[:3]!r}")
    if wrong:
        problems.append(f"futures failed with something other than ConnectionClosedError: {wrong[:3]!r}")
    if stored != acks:  # every PubAck stands for a stored message, and nothing was stored without one
        problems.append(f"the stream holds {stored} messages but {acks} futures resolved to a PubAck")
    assert not problems, "\n".join(problems)


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
