"""publish_async: a bounded window of pipelined publishes."""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import wait_until


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
    started, busy_over = threading.Event(), threading.Event()

    def busy():
        started.set()
        time.sleep(3)  # the loop thread does nothing else meanwhile
        busy_over.set()

    conn.loop_thread.call_soon(busy)
    assert started.wait(5)
    futures = [js.publish_async(subj, b"%d" % i) for i in range(3000)]
    assert not busy_over.is_set()  # the calls did not wait for the loop
    assert js.publish_async_complete(timeout=30)
    assert [f.result(0).seq for f in futures] == list(range(2, 3002))
