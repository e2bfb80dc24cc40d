"""PubAckFuture keeps the concurrent.futures.Future contract while making its
condition variable only on demand."""

import concurrent.futures
import threading

import pytest

import jetstream_sync as jss

from jetstream_sync._publisher import PubAckFuture


class Publisher:
    def __init__(self):
        self.kicks = 0

    def kick_quietly(self):
        self.kicks += 1

    def check_not_loop_thread(self):
        pass  # these tests wait on ordinary threads


def test_result_set_before_anyone_waits():
    f = PubAckFuture(Publisher())
    f.set_result("ack")
    assert f._cond is None  # no Condition was ever made
    assert f.done() and f.result(timeout=0) == "ack" and f.exception() is None


def test_exception_set_before_anyone_waits():
    f = PubAckFuture(Publisher())
    f.set_exception(ValueError("x"))
    with pytest.raises(ValueError):
        f.result()
    assert isinstance(f.exception(), ValueError)


def test_waiting_thread_is_woken_and_kicks_the_publisher():
    pub = Publisher()
    f = PubAckFuture(pub)
    t = threading.Timer(0.05, f.set_result, args=("late",))
    t.start()
    assert f.result(timeout=5) == "late"
    assert pub.kicks == 1
    with pytest.raises(concurrent.futures.TimeoutError):
        PubAckFuture(pub).result(timeout=0.01)


def test_wait_as_completed_and_callbacks():
    futures = [PubAckFuture(Publisher()) for _ in range(5)]
    seen = []
    futures[0].add_done_callback(lambda f: seen.append(f.result()))
    for i, f in enumerate(futures):
        threading.Timer(0.01 * i, f.set_result, args=(i,)).start()
    done, not_done = concurrent.futures.wait(futures, timeout=5)
    assert len(done) == 5 and not not_done
    assert sorted(f.result() for f in concurrent.futures.as_completed(futures, timeout=5)) == list(range(5))
    assert seen == [0]
    late = PubAckFuture(Publisher())
    late.set_result("x")
    late.add_done_callback(lambda f: seen.append(f.result()))  # runs at once
    assert seen == [0, "x"]


def test_cancelled_future_rejects_results():
    f = PubAckFuture(Publisher())
    assert f.cancel() and f.cancelled()
    with pytest.raises(concurrent.futures.InvalidStateError):
        f.set_result("too late")
    with pytest.raises(concurrent.futures.CancelledError):
        f.result()


def test_ack_reply_is_parsed_when_first_read():
    f = PubAckFuture(Publisher())
    f.set_ack_reply(b'{"stream":"S","seq":7}')
    assert f.done() and f._raw is not None  # not parsed until someone looks
    assert f.exception() is None
    ack = f.result(timeout=0)
    assert (ack.stream, ack.seq, ack.duplicate) == ("S", 7, False)
    assert f.result() is ack


def test_ack_reply_that_is_an_error_fails_at_once():
    f = PubAckFuture(Publisher())
    f.set_ack_reply(b'{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 1"}}')
    assert f._raw is None and isinstance(f._exception, jss.APIError)
    with pytest.raises(jss.APIError, match="wrong last sequence"):
        f.result()
    other = PubAckFuture(Publisher())
    other.set_ack_reply(b'{"stream":"S","error":{"code":503,"description":"x"}}')  # "error" anywhere: decided now
    done, _ = concurrent.futures.wait([f, other], return_when=concurrent.futures.FIRST_EXCEPTION, timeout=1)
    assert isinstance(other.exception(), jss.APIError)


def test_malformed_ack_reply_fails_the_future():
    f = PubAckFuture(Publisher())
    f.set_ack_reply(b'{"stream":"S","seq":')
    assert isinstance(f.exception(), jss.JetStreamError)
    with pytest.raises(jss.JetStreamError, match="invalid publish acknowledgement"):
        f.result()


def test_waiter_and_callbacks_get_the_parsed_ack():
    f = PubAckFuture(Publisher())
    seen = []
    f.add_done_callback(lambda fut: seen.append(fut.result().seq))
    threading.Timer(0.05, f.set_ack_reply, args=(b'{"stream":"S","seq":9}',)).start()
    assert f.result(timeout=5).seq == 9 and seen == [9]
    readers = [PubAckFuture(Publisher()) for _ in range(2)]
    for r in readers:
        r.set_ack_reply(b'{"stream":"S","seq":1}')
    results = []
    threads = [threading.Thread(target=lambda r=r: results.append(r.result().seq)) for r in readers for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert results == [1] * 8
