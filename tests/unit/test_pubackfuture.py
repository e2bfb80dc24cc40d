"""PubAckFuture keeps the concurrent.futures.Future contract while making its
condition variable only on demand."""

import concurrent.futures
import threading

import pytest

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
