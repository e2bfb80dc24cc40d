"""The pull engine under faults: restarts, a paused server, Ctrl-C (also in
one of several threads sharing a context), a consumer deleted under load, and
statuses provoked on a real server (limits, push consumers, bad requests)."""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import Bounded, PullSpy, publish, wait_blocked, wait_until

RECONNECT = dict(reconnect_time_wait=0.2, max_reconnect_attempts=-1)


def test_messages_survive_a_server_restart(private_server, fnc):
    js = fnc.jetstream()
    stream = js.create_stream(name="R", subjects=["r.>"])
    cons = stream.create_consumer(durable_name="c")
    publish(js, "r.x", 5)
    got = []
    with cons.messages(expires=2.0) as ctx:
        for _ in range(5):
            msg = ctx.next(timeout=5)
            got.append(msg.data)
            msg.ack()
        fnc.flush()
        private_server.restart()
        wait_until(lambda: fnc.is_connected, timeout=10)
        publish(js, "r.x", 5, start=5)
        for _ in range(5):
            msg = ctx.next(timeout=10)
            got.append(msg.data)
            msg.ack()
        assert ctx.stats.reconnects >= 1
    assert got == [str(i).encode() for i in range(10)]


def test_consume_resumes_after_a_server_restart(private_server, fnc):
    js = fnc.jetstream()
    stream = js.create_stream(name="R", subjects=["r.>"])
    cons = stream.create_consumer(durable_name="c")
    got = []
    cc = cons.consume(lambda m: (got.append(m.data), m.ack()), expires=2.0)
    publish(js, "r.x", 5)
    wait_until(lambda: len(got) == 5)
    fnc.flush()
    private_server.restart()
    wait_until(lambda: fnc.is_connected, timeout=10)
    publish(js, "r.x", 5, start=5)
    wait_until(lambda: len(got) == 10, timeout=15)
    assert got == [str(i).encode() for i in range(10)]
    cc.stop()


@pytest.mark.timeout(180)
def test_recovers_from_two_restarts_and_a_pause(private_server, fnc):
    js = fnc.jetstream()
    stream = js.create_stream(name="F", subjects=["f.>"])
    total = 20_000
    publish(js, "f.x", total, b"p" * 64)
    # Messages the server had written when it went down are lost in flight and
    # come back only after AckWait (and count against max_ack_pending until
    # then): keep AckWait inside the bound this test asserts.
    cons = stream.create_consumer(durable_name="c", ack_wait=3.0)
    expires, hb = 4.0, 1.0
    seen = set()
    waits = []  # (start, end) of every next()
    back = []  # when the server was back after each fault
    done = threading.Event()
    errors = []

    def reader():
        try:
            with cons.messages(max_messages=500, expires=expires, idle_heartbeat=hb) as ctx:
                while len(seen) < total:
                    start = time.monotonic()
                    msg = ctx.next(timeout=60)
                    waits.append((start, time.monotonic(), msg.metadata.sequence.stream, msg.metadata.num_delivered, len(seen)))
                    seen.add(msg.metadata.sequence.stream)
                    msg.ack()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    t = threading.Thread(target=reader)
    t.start()
    for threshold, fault in ((4000, "restart"), (9000, "restart"), (14000, "pause")):
        wait_until(lambda: len(seen) >= threshold or done.is_set(), timeout=60)
        if fault == "restart":
            private_server.restart()
        else:
            private_server.pause()
            time.sleep(3 * hb)  # the fault itself: three heartbeats of silence
            private_server.resume()
        back.append(time.monotonic())
    assert done.wait(120)
    t.join(5)
    assert not errors
    assert seen == set(range(1, total + 1))  # every sequence handed at least once
    bound = expires + hb
    for start, end, *info in waits:
        after_back = [b for b in back if b < end]
        if after_back:
            waited_while_up = end - max(start, after_back[-1])
            assert waited_while_up <= bound, (waited_while_up, bound, info, [b - start for b in back])


def test_a_paused_server_is_noticed_by_the_heartbeat_watchdog(private_server, fnc):
    js = fnc.jetstream()
    stream = js.create_stream(name="P", subjects=["p.>"])
    cons = stream.create_consumer(durable_name="c")
    reports = []
    with cons.messages(expires=2.0, idle_heartbeat=0.5, error_handler=reports.append) as ctx:
        publish(js, "p.x", 1)
        ctx.next(timeout=5).ack()
        private_server.pause()
        try:
            with pytest.raises(jss.TimeoutError):
                ctx.next(timeout=1.6)
            # the alarm: two heartbeats missed, then a PING left unanswered (longer on a loaded machine)
            wait_until(lambda: any(isinstance(e, jss.NoHeartbeatError) for e in reports), timeout=10)
        finally:
            private_server.resume()
        publish(js, "p.x", 1, start=1)
        assert ctx.next(timeout=5).data == b"1"


def test_a_lost_pull_is_noticed_by_a_caller_polling_with_short_timeouts(nc, js, stream, subj):
    """``next(timeout=...)`` shorter than the heartbeat alarm, in a loop (to
    check a stop flag): the waits add up, so a pull the server dropped without
    a word (here: max_waiting full, which the server answers with silence when
    the pull asks for heartbeats) is noticed and pulled again."""
    cons = stream.create_consumer(durable_name="mw", max_waiting=1)
    # Another puller holds the only waiting slot for 3 s.
    inbox = nc.new_inbox()
    blocker = nc.subscribe(inbox)
    body = b'{"batch": 1, "expires": 3000000000}'
    nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream.name}.mw", body, reply=inbox)
    wait_until(lambda: cons.info().num_waiting == 1)
    reports, got, stop = [], [], threading.Event()

    def poll() -> None:
        with cons.messages(expires=2.0, idle_heartbeat=0.5, error_handler=reports.append) as ctx:
            while not stop.is_set():
                try:
                    got.append(ctx.next(timeout=0.3).data)
                    return
                except jss.TimeoutError:
                    continue

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        wait_until(lambda: any(isinstance(e, jss.NoHeartbeatError) for e in reports), timeout=15)
        ended = blocker.next_msg(timeout=10)  # the blocker's pull expired: 408, pending counts, no data
        assert ended.data == b"" and "Nats-Pending-Messages" in ended.headers
        js.publish(subj, b"after")
        wait_until(lambda: got == [b"after"], timeout=15)
    finally:
        stop.set()
        poller.join(10)
    assert not poller.is_alive()
    blocker.unsubscribe()


def test_ctrl_c_inside_a_messages_loop(server, js, stream):
    stream.create_consumer(durable_name="c")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys, threading, time, jetstream_sync as jss
                nc = jss.connect(sys.argv[1])
                cons = nc.jetstream().consumer(sys.argv[2], "c")

                def ready():  # once the main thread sits blocked inside the loop's next()
                    main = threading.main_thread().ident
                    while True:
                        looks = set()
                        for _ in range(3):
                            frame = sys._current_frames().get(main)
                            names, f = set(), frame
                            while f is not None:
                                names.add(f.f_code.co_name)
                                f = f.f_back
                            looks.add((id(frame), frame.f_lasti, "__next__" in names))
                            time.sleep(0.02)
                        if len(looks) == 1 and looks.pop()[2]:
                            print("ready", flush=True)
                            return

                threading.Thread(target=ready, daemon=True).start()
                try:
                    for msg in cons.messages():
                        msg.ack()
                except KeyboardInterrupt:
                    t = time.monotonic()
                    nc.close()
                    print("interrupted", "closed" if nc.is_closed else "open", flush=True)
                """
            ),
            server.url,
            stream.name,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"  # blocked in the loop, waiting for messages
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    line = proc.stdout.readline().split()
    elapsed = time.monotonic() - sent
    proc.wait(10)
    assert line == ["interrupted", "closed"], proc.stderr.read()
    assert elapsed < 5.0  # promptly: not at the pull's expiry (30 s)


def limits_case(stream, cfg, opts):
    stream.create_consumer(durable_name="c", **cfg)
    return stream.consumer("c"), opts


@pytest.mark.parametrize(
    "cfg, opts, text",
    [
        ({"max_batch": 10}, {"max_messages": 20}, "Exceeded MaxRequestBatch"),
        ({"max_expires": 1.0}, {"expires": 3.0}, "Exceeded MaxRequestExpires"),
        ({"max_bytes": 100}, {"max_bytes": 1000}, "Exceeded MaxRequestMaxBytes"),
    ],
)
def test_limit_warnings_are_reported_without_a_tight_loop(nc, js, stream, cfg, opts, text):
    cons = stream.create_consumer(durable_name="c", **cfg)
    spy = PullSpy(nc, stream.name, "c")
    reports = []
    with cons.messages(error_handler=reports.append, **opts) as ctx:
        with pytest.raises(jss.TimeoutError):
            ctx.next(timeout=2.5)  # the for loop would not end either
        assert ctx.stats.transient_errors >= 1
    assert any(isinstance(e, jss.PullStatusError) and text in str(e) for e in reports)
    assert spy.count <= 4  # backed off: 1 s, then 2 s


def test_push_consumer_is_terminal(js, stream):
    # A pull handle made while the consumer was pull based; the consumer is
    # then replaced by a push one of the same name: the server's 409 ends it.
    cons = stream.create_consumer(durable_name="push")
    stream.delete_consumer("push")
    push = stream.create_push_consumer(durable_name="push", deliver_subject="deliver.here")
    assert isinstance(cons, jss.Consumer) and isinstance(push, jss.PushConsumer)
    with pytest.raises(jss.ConsumerPushBasedError):
        for _ in cons.messages():
            pass
    with pytest.raises(jss.ConsumerPushBasedError):
        list(cons.fetch(1, expires=1))
    # A push handle refuses pulls before anything is sent.
    with pytest.raises(jss.ConsumerPushBasedError):
        push.fetch(1, expires=1)


def test_bad_request_is_terminal(js, stream):
    # A priority-group consumer refuses pulls that name no group. The handle's
    # cached config predates the groups, so the client-side check lets the
    # pull through and the server's 400 is what ends it.
    cons = stream.create_consumer(durable_name="pg")
    stream.update_consumer(durable_name="pg", priority_groups=["g"], priority_policy="overflow")
    with pytest.raises(jss.BadRequestError) as ei:
        cons.next(timeout=2)
    assert ei.value.status == 400
    errors = []
    cc = cons.consume(lambda m: None, error_handler=errors.append)
    assert cc.wait(5)
    assert isinstance(errors[0], jss.BadRequestError)


def test_stop_racing_a_client_drain(server, stream):
    stream.create_consumer(durable_name="c")
    for _ in range(5):
        other = jss.connect(server.url)
        cons = other.jetstream().consumer(stream.name, "c")
        ctx = cons.messages()
        t = threading.Thread(target=ctx.stop)
        t.start()
        other.drain(timeout=5)
        t.join(5)
        assert not t.is_alive()
        assert other.is_closed


@pytest.mark.timeout(60)
def test_giving_up_reconnecting_ends_iteration(private_server):
    nc = jss.connect(private_server.url, reconnect_time_wait=0.1, max_reconnect_attempts=3)
    js = nc.jetstream()
    stream = js.create_stream(name="M", subjects=["m.>"])
    cons = stream.create_consumer(durable_name="c")
    ctx = cons.messages()
    errors = []
    cc = cons.consume(lambda m: None, error_handler=errors.append)
    wait_until(lambda: cons.info().num_waiting == 1)  # consuming: its pull is open on the server
    private_server.stop()
    with pytest.raises(jss.ConnectionClosedError):
        ctx.next(timeout=15)
    assert cc.wait(15)
    assert isinstance(errors[-1], jss.ConnectionClosedError)
    nc.close()


def test_blocking_publish_and_request_across_a_server_restart(private_server):
    """Both go through the pipelined publisher/requester: a restart never
    leaves a call waiting past its timeout, and both work again afterwards."""
    nc = jss.connect(private_server.url, **RECONNECT)
    try:
        js = nc.jetstream()
        js.create_stream(name="RS", subjects=["rs.>"], storage="file")
        responder = nc.subscribe("svc.echo")

        def answer():
            for msg in responder:
                nc.publish(msg.reply, msg.data)

        threading.Thread(target=answer, daemon=True).start()
        assert nc.request("svc.echo", b"before", timeout=5).data == b"before"
        assert js.publish("rs.a", b"before").seq == 1

        outcomes = []
        stop = threading.Event()

        def caller():
            while not stop.is_set():
                start = time.monotonic()
                try:
                    js.publish("rs.a", b"during", timeout=1)
                    nc.request("svc.echo", b"during", timeout=1)
                    outcomes.append(("ok", time.monotonic() - start))
                except (jss.TimeoutError, jss.NoRespondersError, jss.ConnectionClosedError) as exc:
                    outcomes.append((type(exc).__name__, time.monotonic() - start))

        t = threading.Thread(target=caller, daemon=True)
        t.start()
        private_server.restart()
        mark = len(outcomes)  # calls made once the server is back
        wait_until(lambda: any(o[0] == "ok" for o in outcomes[mark + 1 :]), timeout=30)
        stop.set()
        t.join(10)
        assert not t.is_alive()
        assert max(took for _, took in outcomes) < 2 * 1 + 1.5  # two calls of timeout 1 s, plus slack
        assert nc.request("svc.echo", b"after", timeout=5).data == b"after"
        assert js.publish("rs.a", b"after").seq >= 2
    finally:
        nc.close()


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
