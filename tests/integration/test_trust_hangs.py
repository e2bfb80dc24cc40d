"""Regression tests: calls that must end (return or raise) instead of hanging.

Each test is named after the defect it pins down. Every wait is bounded: a
call that hangs turns into a failed assertion, never into a stuck test run.
Only the public API is used.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import logging
import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import Bounded, publish, wait_blocked, wait_until

NAN = float("nan")
INF = float("inf")


# -- helpers ------------------------------------------------------------------


def stream_messages(stream):
    return stream.info().state.messages


# -- 1. close() racing publish_async --------------------------------------------


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


# -- 2. fetch started while close() runs ------------------------------------------


def _fetch_loop(cons, errors_seen, fetches):
    """fetch + iterate until the client is closed; NAK so the supply never runs out."""
    while True:
        try:
            result = cons.fetch(10, expires=5)
            fetches.append(1)
            for m in result:
                m.nak()
        except jss.ConnectionClosedError:
            return
        except BaseException as exc:
            errors_seen.append(exc)
            return


@pytest.mark.timeout(120)
def test_fetch_started_while_close_runs_never_blocks(server, js, stream, subj, cons):
    """fetch() calls and their iteration racing close() all end within a couple
    of seconds of close() returning, with ConnectionClosedError at worst.

    The race (a fetch registered after close() stopped the live ones, before
    the client counts as closed) is narrow: 16 threads, up to 30 closes."""
    publish(js, subj, 200)
    for attempt in range(30):
        client = jss.connect(server.url, name=f"fetch-vs-close-{attempt}")
        fcons = client.jetstream().consumer(stream.name, cons.name)
        errors_seen = []
        fetches = []
        workers = [Bounded(lambda: _fetch_loop(fcons, errors_seen, fetches), f"fetch-{i}") for i in range(16)]
        wait_until(lambda: len(fetches) >= 100 + 10 * attempt, timeout=20)  # close lands at a varying point
        closing = Bounded(client.close, "close").join(15)
        assert closing.finished, f"attempt {attempt}: close() did not return within 15s"
        closed_at = time.monotonic()
        for w in workers:
            w.join(max(0.0, closed_at + 3.0 - time.monotonic()))
        stuck = sum(not w.finished for w in workers)
        assert stuck == 0, (
            f"attempt {attempt}: {stuck} of {len(workers)} fetch threads still blocked 3s after close() returned"
        )
        assert not errors_seen, f"attempt {attempt}: fetch raised {errors_seen[:3]!r}, not ConnectionClosedError"


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


# -- 3. core subscription readers released by close()/drain() ----------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["close", "drain"])
def test_close_and_drain_release_core_subscription_readers(server, how):
    client = jss.connect(server.url, name=f"core-readers-{how}")
    iterated = client.subscribe("x")
    waited = client.subscribe("y")
    seen = []

    def iterate():
        for m in iterated:
            seen.append(m.data)
        return "ended"

    iterator = Bounded(iterate, "iterator")
    reader = Bounded(lambda: waited.next_msg(None), "next_msg")
    client.publish("x", b"1")
    wait_until(lambda: seen == [b"1"])
    wait_blocked(iterator.thread)
    wait_blocked(reader.thread)

    ending = Bounded(getattr(client, how), how).join(10)
    assert ending.finished, f"{how}() did not return within 10s"
    released_by = time.monotonic() + 1.0
    iterator.join(max(0.0, released_by - time.monotonic()))
    reader.join(max(0.0, released_by - time.monotonic()))
    assert iterator.finished, f"a thread iterating a subscription is still blocked 1s after {how}()"
    assert iterator.error is None and iterator.result == "ended", f"iteration ended with {iterator.error!r}"
    assert reader.finished, f"a thread in next_msg(None) is still blocked 1s after {how}()"
    assert isinstance(reader.error, jss.ConnectionClosedError), f"next_msg ended with {reader.error!r}"


# -- 4. consumer deleted under load --------------------------------------------------


@pytest.mark.timeout(90)
def test_consumer_deleted_under_load_ends_messages_and_consume(server, js, stream, subj):
    """Under load (a backlog, and a publisher that keeps adding to it) pulls are
    filled at once, so when the consumer is deleted there is usually no pull
    waiting on the server to carry "409 Consumer Deleted". messages() and
    consume() must still end with ConsumerDeletedError."""
    publish(js, subj, 20_000)
    it_cons = stream.create_consumer(durable_name="it", ack_policy="explicit")
    cb_cons = stream.create_consumer(durable_name="cb", ack_policy="explicit")
    other = jss.connect(server.url, name="load-and-delete")
    ojs = other.jetstream()
    stop_publishing = threading.Event()

    def load():
        while not stop_publishing.is_set():
            for _ in range(500):
                ojs.publish_async(subj, b"load")
            ojs.publish_async_complete(timeout=10)

    publisher = Bounded(load, "publisher")
    ctx = it_cons.messages(expires=2, idle_heartbeat=0.5)
    it_count = [0]

    def iterate():
        for m in ctx:
            m.ack()
            it_count[0] += 1
        return "ended without error"

    cb_count = [0]
    cb_errors = []

    def handler(m):
        m.ack()
        cb_count[0] += 1

    iterator = Bounded(iterate, "iterator")
    cc = cb_cons.consume(handler, error_handler=cb_errors.append, expires=2, idle_heartbeat=0.5)
    try:
        wait_until(lambda: it_count[0] >= 2000 and cb_count[0] >= 2000, timeout=30)

        ojs.delete_consumer(stream.name, "it")
        ojs.delete_consumer(stream.name, "cb")
        deadline = time.monotonic() + 15
        iterator.join(max(0.0, deadline - time.monotonic()))
        consume_closed = cc.wait(max(0.0, deadline - time.monotonic()))

        problems = []
        if not iterator.finished:
            problems.append(
                f"messages() iteration still running 15s after its consumer was deleted (stats: {ctx.stats})"
            )
        elif not isinstance(iterator.error, jss.ConsumerDeletedError):
            problems.append(f"messages() iteration ended with {iterator.error or iterator.result!r}")
        if not consume_closed:
            problems.append(f"consume() context still open 15s after its consumer was deleted (stats: {cc.stats})")
        if not any(isinstance(e, jss.ConsumerDeletedError) for e in cb_errors):
            seen = sorted({type(e).__name__ for e in cb_errors})
            problems.append(f"consume() error_handler never saw ConsumerDeletedError, only {seen}")
        assert not problems, "\n".join(problems)
    finally:
        stop_publishing.set()
        ctx.stop()
        cc.stop()
        publisher.join(15)
        other.close()


# -- 5. NaN / infinite durations ----------------------------------------------------


@pytest.mark.timeout(60)
def test_nan_and_infinite_durations_are_rejected_before_sending(nc, js, stream, subj, cons):
    ctx = cons.messages()
    calls = [
        ("cons.next(timeout=nan)", lambda: cons.next(timeout=NAN)),
        ("ctx.next(timeout=nan)", lambda: ctx.next(timeout=NAN)),
        ("js.publish_async(timeout=nan)", lambda: js.publish_async(subj, b"nan", timeout=NAN)),
        ("cons.messages(expires=inf)", lambda: cons.messages(expires=INF)),
        ("cons.fetch(1, expires=inf)", lambda: cons.fetch(1, expires=INF)),
        ("nc.request(timeout=inf)", lambda: nc.request("nobody.listens.here", b"?", timeout=INF)),
        ("js.publish(timeout=nan)", lambda: js.publish(subj, b"nan", timeout=NAN)),
    ]
    failures = []
    for label, call in calls:
        run = Bounded(call, label).join(3)
        if not run.finished:
            failures.append(f"{label}: still running after 3s")
        elif not isinstance(run.error, jss.InvalidOptionError):
            outcome = f"raised {run.error!r}" if run.error is not None else f"returned {run.result!r}"
            failures.append(f"{label}: {outcome}")
            for end in ("stop", "close"):  # do not leave a context running
                if hasattr(run.result, end):
                    getattr(run.result, end)()
    ctx.stop()
    assert not failures, "not rejected with InvalidOptionError:\n" + "\n".join(failures)
    assert stream_messages(stream) == 0, "a publish with a NaN timeout reached the stream"


# -- 6. Ctrl-C in the thread leading a shared wait ------------------------------------


def _interrupt(thread):
    n = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(KeyboardInterrupt))
    assert n == 1


@pytest.mark.timeout(60)
def test_interrupted_leader_wakes_other_threads_sharing_a_context(nc, js, subj, cons):
    """Threads share one messages() context; Ctrl-C (KeyboardInterrupt) in the
    one that leads the wait must not leave the others waiting forever."""
    ctx = cons.messages()
    received = []  # (thread index, data)
    lock = threading.Lock()

    def reader(i):
        while True:
            try:
                m = ctx.next(timeout=None)
            except jss.ConsumerStoppedError:
                return "stopped"
            with lock:
                received.append((i, m.data))
            m.ack()

    # The first thread to wait leads; the others wait behind it.
    threads = [Bounded(lambda: reader(0), "reader-0")]
    wait_blocked(threads[0].thread)
    for i in (1, 2, 3):
        threads.append(Bounded(lambda i=i: reader(i), f"reader-{i}"))
        wait_blocked(threads[i].thread)
    leader = threads[0]
    try:
        _interrupt(leader.thread)
        # A blocked thread only sees the interrupt when something wakes it: nudge.
        for n in range(20):
            js.publish(subj, b"nudge-%d" % n)
            leader.join(0.5)
            if leader.finished:
                break
        assert leader.finished, "the interrupted thread never ended"
        assert isinstance(leader.error, KeyboardInterrupt), f"the interrupted thread ended with {leader.error!r}"

        expected = {b"after-%d" % i for i in range(5)}
        for data in sorted(expected):
            js.publish(subj, data)

        def got_all():
            with lock:
                return expected <= {d for i, d in received if i != 0}

        try:
            wait_until(got_all, timeout=10)
        except AssertionError:
            with lock:
                got = sorted(d for i, d in received if i != 0)
            raise AssertionError(
                f"the other threads did not get the messages within 10s after the leader was interrupted; got {got}"
            ) from None
    finally:
        ctx.stop()
        for t in threads:
            t.join(5)
