"""PubAckFuture keeps the concurrent.futures.Future contract while making its
condition variable only on demand."""

import concurrent.futures
import threading
import time

import pytest

from jetstream_sync._core.publisher import PubAckFuture


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

    def resolve_once_waited_on():  # a result set before the wait began would need no kick
        deadline = time.monotonic() + 5
        while not pub.kicks and time.monotonic() < deadline:
            time.sleep(0.001)
        f.set_result("late")

    threading.Thread(target=resolve_once_waited_on, daemon=True).start()
    assert f.result(timeout=10) == "late"
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


class Paused(PubAckFuture):
    """Stops its resolver right before it stores FINISHED (at most 1 s)."""

    gate = None

    @property
    def _state(self):
        return self.__dict__["_st"]

    @_state.setter
    def _state(self, value):
        if value == "FINISHED" and self.gate is not None:
            gate, self.gate = self.gate, None
            self.pausing.set()
            gate.wait(1.0)
        self.__dict__["_st"] = value


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["wait", "as_completed"])
def test_wait_and_as_completed_see_a_state_that_does_not_change_under_them(how, monkeypatch):
    """wait() and as_completed() read the states while holding each future's
    Condition and count on them not changing meanwhile. A resolver storing
    FINISHED without the lock at that moment made wait() hang (it counted the
    future as pending, then was told of it once more) and as_completed()
    yield a future twice."""
    import concurrent.futures._base as base

    racer, other = Paused(Publisher()), PubAckFuture(Publisher())
    racer.pausing, gate = threading.Event(), threading.Event()
    racer.gate = gate
    resolver = threading.Thread(target=racer.set_result, args=("ack",), daemon=True)
    resolver.start()
    assert racer.pausing.wait(5)  # the resolver is about to store FINISHED

    def let_it_store():  # while the Conditions are held: the resolver may store now
        gate.set()
        deadline = time.monotonic() + 0.2
        while racer.__dict__.get("_st") != "FINISHED" and time.monotonic() < deadline:
            time.sleep(0.001)

    out = []
    if how == "wait":  # between its scan of the states and its count of the pending ones
        install = base._create_and_install_waiters

        def scanned(fs, return_when):
            let_it_store()
            return install(fs, return_when)

        monkeypatch.setattr(base, "_create_and_install_waiters", scanned)
        waiting = threading.Thread(target=lambda: out.append(concurrent.futures.wait([racer])), daemon=True)
        waiting.start()
        waiting.join(5)
        assert out and out[0].done == {racer}, "wait() did not return"
    else:  # once it holds the Conditions, before it scans the states

        class Acquired(base._AcquireFutures):
            def __enter__(self):
                super().__enter__()
                let_it_store()

            def __exit__(self, *exc):
                super().__exit__(*exc)
                resolver.join(5)  # the resolver finishes before as_completed goes on

        monkeypatch.setattr(base, "_AcquireFutures", Acquired)
        threading.Timer(0.2, other.set_result, args=("later",)).start()
        seen = list(concurrent.futures.as_completed([racer, other], timeout=5))
        assert sorted(map(id, seen)) == sorted([id(racer), id(other)])  # each once


class ResolvedAsItParks(PubAckFuture):
    """Resolved by another thread at the very moment its caller hands it the
    lock to park on: the resolver finds no lock to release."""

    def __init__(self, outcome):
        super().__init__(Publisher())
        self._outcome = outcome
        self._lock_given = None

    @property
    def _wake(self):
        return self._lock_given

    @_wake.setter
    def _wake(self, lock):
        resolve = self.set_exception if isinstance(self._outcome, BaseException) else self.set_result
        t = threading.Thread(target=resolve, args=(self._outcome,))
        t.start()
        t.join()
        self._lock_given = lock


@pytest.mark.parametrize("outcome", ["ack", ValueError("refused")])
def test_a_blocking_caller_resolved_as_it_parks_does_not_wait_for_its_timeout(outcome):
    f = ResolvedAsItParks(outcome)
    start = time.monotonic()
    if isinstance(outcome, BaseException):
        with pytest.raises(ValueError):
            f._wait_as_owner(3.0)
    else:
        assert f._wait_as_owner(3.0) == outcome
    assert time.monotonic() - start < 1.5, "it missed the result and waited for its timeout"


def test_a_blocking_caller_parked_is_woken_by_the_result():
    f = PubAckFuture(Publisher())
    t = threading.Timer(0.1, f.set_result, args=("ack",))
    t.start()
    start = time.monotonic()
    assert f._wait_as_owner(5.0) == "ack"
    assert time.monotonic() - start < 2.5
    t.join()


def test_a_blocking_callers_wait_ends_at_its_timeout():
    f = PubAckFuture(Publisher())
    start = time.monotonic()
    with pytest.raises(concurrent.futures.TimeoutError):
        f._wait_as_owner(0.2)
    assert 0.15 < time.monotonic() - start < 5.0
    f.set_result("late")  # resolving after the caller gave up harms nothing
    assert f.result(timeout=0) == "late"


@pytest.mark.parametrize("value", [7, ("S", 7)], ids=["int", "tuple"])
def test_a_result_set_with_set_result_comes_back_as_set(value):
    """The publisher keeps plain acks in a compact form (an int or a tuple)
    that result() turns into a PubAck; a value set with set_result is never
    taken for one, watched or not."""
    unwatched, watched = PubAckFuture(Publisher()), PubAckFuture(Publisher())
    seen = []
    watched.add_done_callback(lambda f: seen.append(f.result()))
    for f in (unwatched, watched):
        f.set_result(value)
        assert f.result(timeout=0) == value and f.result() is value
    assert seen == [value]
