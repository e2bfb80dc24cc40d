"""PubAckFuture keeps the concurrent.futures.Future contract while making its
condition variable only on demand."""

import concurrent.futures
import threading
import time

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


def test_a_publish_cannot_be_cancelled():
    """The publish is on its way when the future exists: cancel() says so
    (False, as for a running call) and the result still comes."""
    f = PubAckFuture(Publisher())
    assert f.running() and not f.cancel() and not f.cancelled()
    f.set_result("ack")
    assert f.result(timeout=0) == "ack" and not f.running()
    with pytest.raises(concurrent.futures.InvalidStateError):
        f.set_result("twice")


class Racing(PubAckFuture):
    """Runs ``arrive`` at the worst moment for a resolver without a lock: it
    has found no Condition and is about to store FINISHED."""

    arrive = None

    @property
    def _state(self):
        return self.__dict__["_st"]

    @_state.setter
    def _state(self, value):
        if value == "FINISHED" and self.arrive is not None:
            arrive, self.arrive = self.arrive, None
            arrive(self)
        self.__dict__["_st"] = value


def blocked_in(f, call):
    """Start ``call(f)`` in a thread; return once it waits: on f's Condition
    (result()) or registered among f's waiters (wait())."""
    out = []
    t = threading.Thread(target=lambda: out.append(call(f)), daemon=True)
    t.start()
    deadline = time.monotonic() + 5
    while not (f._cond is not None and (f._cond._waiters or f._waiter_list)):  # Condition's list of blocked threads
        assert time.monotonic() < deadline, "the waiter never blocked"
        time.sleep(0.001)
    return t, out


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["result", "wait", "callback"])
def test_a_waiter_that_comes_in_while_it_resolves_is_not_missed(how):
    """Resolving takes no lock when nobody waits. A waiter (result(), wait(),
    a callback) that arrives between its check and its store of the state
    must still be woken or called (a missed one would hang or never run)."""
    f = Racing(Publisher())
    waiting = []
    seen = []

    def arrive(fut):
        if how == "callback":
            fut.add_done_callback(seen.append)
        elif how == "result":
            waiting.append(blocked_in(fut, lambda x: x.result(timeout=10)))
        else:
            waiting.append(blocked_in(fut, lambda x: concurrent.futures.wait([x], timeout=10)[0]))

    f.arrive = arrive
    f.set_result("ack")
    if how == "callback":
        assert seen == [f]
    else:
        t, out = waiting[0]
        t.join(5)
        assert not t.is_alive() and out == ["ack" if how == "result" else {f}]
