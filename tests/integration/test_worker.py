"""The worker runner (jss.Worker / run_worker / `jetstream-sync worker`): acks on
the handler's outcome, concurrency, graceful stop, exit status, CLI errors."""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import jetstream_sync as jss
from jetstream_sync.__main__ import main as cli_main
from jetstream_sync.testing import NatsServer

from ..helpers import info_once, publish, wait_until


class Running:
    """A worker's run() on a thread of its own; ``status`` once it returned."""

    def __init__(self, worker: jss.Worker) -> None:
        self.worker = worker
        self.status = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.status = self.worker.run()

    def wait(self, timeout: float) -> int:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"worker still running after {timeout}s"
        return self.status


def run_until(worker: jss.Worker, predicate, timeout: float = 5.0) -> None:
    """Run ``worker`` until ``predicate()`` holds, then stop it: it must end with status 0."""
    run = Running(worker)
    wait_until(predicate, timeout=timeout)
    worker.stop()
    assert run.wait(5) == 0


@contextlib.contextmanager
def reaped(proc: subprocess.Popen):
    """Kill ``proc`` on the way out if the test left it running."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def settled(cons: jss.Consumer) -> bool:
    info = cons.info()
    return info.num_pending == 0 and info.num_ack_pending == 0


def worker_records(caplog, level=logging.WARNING):
    return [r for r in caplog.records if r.name == "jetstream_sync.worker" and r.levelno >= level]


def test_a_handler_that_returns_gets_its_message_acked(nc, js, stream, subj, cons):
    publish(js, subj, 50)
    seen = []
    worker = jss.Worker(seen.append, client=nc, stream=stream.name, consumer=cons.name, stats_interval=None)
    run = Running(worker)
    wait_until(lambda: len(seen) == 50 and settled(cons))
    worker.stop()
    assert run.wait(5) == 0
    assert sorted(int(m.data) for m in seen) == list(range(50))
    stats = worker.stats
    assert (stats.handled, stats.failed, stats.in_flight) == (50, 0, 0)
    assert stats.consume["delivered"] == 50 and stats.consume["pulls"] >= 1  # the context's counters too
    assert stats.as_dict()["handled"] == 50 and stats.as_dict()["delivered"] == 50
    assert not nc.is_closed  # a client we gave it stays open


def test_a_handler_that_raises_is_logged_with_its_traceback_and_the_message_nakd(
    nc, js, stream, subj, cons, caplog
):
    publish(js, subj, 5)
    deliveries = collections.defaultdict(list)

    def handler(msg):
        deliveries[msg.data].append(time.monotonic())
        if msg.data == b"3" and msg.metadata.num_delivered == 1:
            raise ValueError("cannot handle order 3")

    worker = jss.Worker(
        handler, client=nc, stream=stream.name, consumer=cons.name, nak_delay=0.5, stats_interval=None
    )
    run = Running(worker)
    wait_until(lambda: len(deliveries[b"3"]) == 2 and settled(cons))
    worker.stop()
    assert run.wait(5) == 0
    first, second = deliveries[b"3"]
    assert second - first >= 0.45  # redelivered after nak_delay, not AckWait (30 s) nor at once
    assert all(len(deliveries[str(i).encode()]) == 1 for i in (0, 1, 2, 4))
    failed = [r for r in worker_records(caplog, logging.ERROR) if "handler failed" in r.getMessage()]
    assert len(failed) == 1 and "stream seq 4" in failed[0].getMessage()
    assert failed[0].exc_info and "cannot handle order 3" in str(failed[0].exc_info[1])
    assert worker.stats.failed == 1 and worker.stats.handled == 5


def test_a_handler_that_settles_its_message_itself_is_not_acked_again(nc, js, stream, subj, cons, caplog):
    publish(js, subj, 30)
    calls = collections.Counter()

    def handler(msg):
        calls[msg.data] += 1
        n = int(msg.data)
        if n % 3 == 0:
            msg.ack_sync()
        elif n % 3 == 1:
            msg.term("never redeliver")
        # else: the worker acks

    worker = jss.Worker(handler, client=nc, stream=stream.name, consumer=cons.name, stats_interval=None)
    run = Running(worker)
    wait_until(lambda: sum(calls.values()) == 30 and settled(cons))
    worker.stop()
    assert run.wait(5) == 0
    assert set(calls.values()) == {1}  # nothing redelivered, the termed ones included
    assert worker_records(caplog) == []  # no "could not ack" (MsgAlreadyAckedError) warnings
    assert cons.info().num_redelivered == 0


def test_concurrency_n_runs_n_handlers_at_once(nc, js, stream, subj, cons):
    publish(js, subj, 8)
    barrier = threading.Barrier(4, timeout=5)  # breaks unless 4 handlers wait in it together
    lock = threading.Lock()
    running = [0, 0]  # now, most

    def handler(msg):
        with lock:
            running[0] += 1
            running[1] = max(running)
        try:
            barrier.wait()
        finally:
            with lock:
                running[0] -= 1

    worker = jss.Worker(
        handler, client=nc, stream=stream.name, consumer=cons.name, concurrency=4, stats_interval=None
    )
    run = Running(worker)
    wait_until(lambda: worker.stats.handled == 8, timeout=10)
    worker.stop()
    assert run.wait(5) == 0
    assert worker.stats.failed == 0 and running[1] == 4


def test_stop_drains_the_buffer_and_every_message_is_handled_once(nc, js, stream, subj, cons):
    publish(js, subj, 300)
    handled = collections.Counter()
    lock = threading.Lock()

    def handler(msg):
        time.sleep(0.002)  # handlers take a little time: stop() lands with messages buffered and in flight
        with lock:
            handled[msg.data] += 1

    def start():
        return Running(
            jss.Worker(
                handler, client=nc, stream=stream.name, consumer=cons.name, concurrency=3, stats_interval=None,
                max_messages=100,
            )
        )  # fmt: skip

    run = start()
    wait_until(lambda: sum(handled.values()) >= 20)
    t0 = time.monotonic()
    run.worker.stop()
    assert run.wait(10) == 0 and time.monotonic() - t0 < 5
    first = sum(handled.values())
    info = info_once(cons, lambda i: i.num_ack_pending == 0)  # the server takes the last acks in on its own time
    assert info.num_ack_pending == 0  # what was received was handled and acked, nothing left in limbo
    assert first + info.num_pending == 300
    assert first > 20  # the buffered messages were handed out after stop(), not given back
    run = start()
    wait_until(lambda: sum(handled.values()) == 300 and settled(cons), timeout=20)
    run.worker.stop()
    assert run.wait(5) == 0
    assert set(handled.values()) == {1} and len(handled) == 300


def test_a_stuck_handler_does_not_hold_the_stop_beyond_shutdown_timeout(nc, js, stream, subj, cons, caplog):
    publish(js, subj, 50)
    release = threading.Event()
    started = threading.Event()

    def handler(msg):
        started.set()
        release.wait(10)

    worker = jss.Worker(
        handler, client=nc, stream=stream.name, consumer=cons.name, shutdown_timeout=1.0, stats_interval=None
    )
    run = Running(worker)
    assert started.wait(5)
    t0 = time.monotonic()
    worker.stop()
    assert run.wait(5) == 0
    assert time.monotonic() - t0 < 5.0  # shutdown_timeout (1 s), not the handler's 10 s
    assert any("still running" in r.getMessage() for r in worker_records(caplog))
    # The buffered messages were NAK'd, not left to AckWait (30 s): a new worker gets
    # them at once; the stuck one is acked by its handler, late, on the open client.
    release.set()
    again = jss.Worker(lambda m: None, client=nc, stream=stream.name, consumer=cons.name, stats_interval=None)
    run = Running(again)
    wait_until(lambda: settled(cons), timeout=10)
    again.stop()
    assert run.wait(5) == 0
    assert again.stats.handled + worker.stats.handled == 50


def test_a_deleted_consumer_ends_the_worker_with_status_1_and_an_error_log(nc, js, stream, subj, cons, caplog):
    publish(js, subj, 5)
    seen = []
    worker = jss.Worker(seen.append, client=nc, stream=stream.name, consumer=cons.name, stats_interval=None)
    run = Running(worker)
    wait_until(lambda: len(seen) == 5)
    cons.delete()
    assert run.wait(10) == 1
    errs = [r.getMessage() for r in worker_records(caplog, logging.ERROR)]
    assert any("ended" in m and "ConsumerDeletedError" in m for m in errs), errs


def test_a_missing_consumer_or_server_gives_status_1(nc, stream, caplog):
    assert jss.run_worker(print, client=nc, stream=stream.name, consumer="nope", signals=()) == 1
    assert any("cannot consume" in r.getMessage() for r in worker_records(caplog, logging.ERROR))
    srv = NatsServer()  # never started: nothing listens on its port
    status = jss.run_worker(print, servers=srv.url, stream="S", consumer="C", signals=())
    assert status == 1
    assert any("could not connect to" in r.getMessage() for r in worker_records(caplog, logging.ERROR))


def test_around_wraps_each_call_and_thread_exit_runs_per_thread(nc, js, stream, subj, cons):
    publish(js, subj, 10)
    events = []
    lock = threading.Lock()

    class Around:
        def __enter__(self):
            with lock:
                events.append("enter")

        def __exit__(self, *exc):
            with lock:
                events.append("exit")

    def handler(msg):
        with lock:
            assert events[-1] in ("enter", "exit")
            events.append("call")

    worker = jss.Worker(
        handler, client=nc, stream=stream.name, consumer=cons.name, concurrency=2, around=Around,
        thread_exit=lambda: events.append("thread_exit"), stats_interval=None,
    )  # fmt: skip
    run = Running(worker)
    wait_until(lambda: worker.stats.handled == 10)
    worker.stop()
    assert run.wait(5) == 0
    assert collections.Counter(events) == {"enter": 10, "call": 10, "exit": 10, "thread_exit": 2}


def test_signals_are_installed_in_the_main_thread_only_and_restored(nc, stream, cons):
    before = signal.getsignal(signal.SIGTERM)
    seen_in_thread = []
    worker = jss.Worker(
        lambda m: None, client=nc, stream=stream.name, consumer=cons.name, stats_interval=0.05,
    )  # fmt: skip
    run = Running(worker)
    wait_until(lambda: cons.info().num_waiting >= 1)  # its pull is out: run() is under way
    seen_in_thread.append(signal.getsignal(signal.SIGTERM))
    worker.stop()
    assert run.wait(5) == 0
    assert seen_in_thread == [before]  # from another thread: none installed

    # A guard for this process: a SIGTERM that lands after run() has put the
    # previous handler back must not end the test session.
    late = []
    guard = signal.signal(signal.SIGTERM, lambda signum, frame: late.append(signum))
    try:
        main_worker = jss.Worker(lambda m: None, client=nc, stream=stream.name, consumer=cons.name)
        installed = signal.getsignal(signal.SIGTERM)

        def send_when_consuming() -> None:
            def consuming() -> bool:
                return signal.getsignal(signal.SIGTERM) is not installed and cons.info().num_waiting >= 1

            wait_until(consuming, timeout=10)
            os.kill(os.getpid(), signal.SIGTERM)

        sender = threading.Thread(target=send_when_consuming, daemon=True)
        sender.start()
        t0 = time.monotonic()
        assert main_worker.run() == 0  # SIGTERM: a graceful stop, not the end of the test process
        assert time.monotonic() - t0 < 10
        sender.join(5)
        assert signal.getsignal(signal.SIGTERM) is installed  # put back
        assert late == []  # the worker's handler took the signal
    finally:
        signal.signal(signal.SIGTERM, guard)
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"concurrency": 0}, "concurrency"),
        ({"stream": ""}, "stream"),
        ({"max_mesages": 10}, "unknown option"),
        ({"expires": 0.1}, "expires"),
        ({"shutdown_timeout": -1}, "shutdown_timeout"),
        ({"servers": None}, "servers"),
        ({"connect_options": "x"}, "connect_options"),
    ],
)
def test_bad_options_are_refused_before_connecting(kwargs, match):
    args = {"stream": "S", "consumer": "C", "servers": "nats://127.0.0.1:1", **kwargs}
    with pytest.raises(jss.InvalidOptionError, match=match):
        jss.Worker(print, **args)


def test_a_message_that_always_fails_is_redelivered_with_a_growing_delay_by_default(
    nc, js, stream, subj, cons, caplog
):
    publish(js, subj, 1)
    seen = []

    def handler(msg):
        seen.append(time.monotonic())
        raise RuntimeError("database down")

    worker = jss.Worker(handler, client=nc, stream=stream.name, consumer=cons.name, stats_interval=None)
    run = Running(worker)
    wait_until(lambda: len(seen) >= 3, timeout=10)  # 1 s, then 2 s
    worker.stop()
    assert run.wait(5) == 0
    gaps = [b - a for a, b in zip(seen, seen[1:])]
    assert gaps[0] >= 0.9 and gaps[1] >= 1.8, gaps  # not at once: no spin, no flood of tracebacks
    assert len(seen) <= 4


def test_the_last_failed_delivery_is_logged_as_not_redelivered(nc, js, stream, subj, caplog):
    cons = stream.create_consumer(durable_name="md", ack_policy="explicit", max_deliver=2)
    publish(js, subj, 1)

    def handler(msg):
        raise RuntimeError("database down")

    worker = jss.Worker(
        handler, client=nc, stream=stream.name, consumer=cons.name, nak_delay=0, stats_interval=None
    )
    run_until(worker, lambda: worker.stats.failed == 2)
    failed = [r.getMessage() for r in worker_records(caplog, logging.ERROR) if "handler failed" in r.getMessage()]
    assert len(failed) == 2, failed
    assert failed[0].endswith("NAK'd") and "not redelivered" not in failed[0]
    assert "not redelivered: that was delivery 2 of the consumer's max_deliver" in failed[1]


@pytest.mark.parametrize(
    "policy, warning, fate",
    [
        ("none", "a message whose handler fails is not redelivered",
         "not redelivered: the consumer's ack_policy is none"),
        ("all", "the ack of a later message settles an earlier failed one",
         "the ack of a later message settles it too (ack_policy all)"),
    ],
)  # fmt: skip
def test_a_consumer_that_would_drop_failures_is_warned_of_and_no_retry_is_promised(
    nc, js, stream, subj, caplog, policy, warning, fate
):
    cons = stream.create_consumer(durable_name="p", ack_policy=policy)
    publish(js, subj, 2)

    def handler(msg):
        if msg.data == b"0":
            raise RuntimeError("database down")

    worker = jss.Worker(handler, client=nc, stream=stream.name, consumer=cons.name, stats_interval=None)
    run_until(worker, lambda: worker.stats.failed == 1 and worker.stats.handled == 1)
    logged = [r.getMessage() for r in worker_records(caplog)]
    assert any(f"has ack_policy {policy}: {warning}" in m for m in logged), logged
    failed = [m for m in logged if "handler failed" in m]
    assert len(failed) == 1 and failed[0].endswith(fate), failed
    info = info_once(cons, lambda i: i.num_ack_pending == 0)  # the server takes the ack in on its own time
    assert info.num_ack_pending == 0  # indeed nothing is left to redeliver the failed message


def test_pulls_are_fitted_to_the_consumers_limits(nc, js, stream, subj, caplog):
    # The server refuses every larger pull (409 Exceeded MaxRequestBatch, a
    # transient status): unfitted, the worker would wait for ever.
    cons = stream.create_consumer(durable_name="small", ack_policy="explicit", max_batch=5, max_expires=2.0)
    publish(js, subj, 12)
    seen = []
    worker = jss.Worker(seen.append, client=nc, stream=stream.name, consumer=cons.name, stats_interval=None)
    run_until(worker, lambda: len(seen) == 12 and settled(cons), timeout=10)
    logged = [r.getMessage() for r in worker_records(caplog)]
    assert any("has max_batch 5: max_messages 5 instead of 500" in m for m in logged), logged
    assert any("has max_expires 2.0: expires 2.0 instead of 30.0" in m for m in logged), logged


def test_the_stats_line_has_every_counter_every_time(nc, stream, cons, caplog):
    caplog.set_level(logging.INFO, logger="jetstream_sync.worker")
    worker = jss.Worker(lambda m: None, client=nc, stream=stream.name, consumer=cons.name, stats_interval=None)
    run = Running(worker)
    wait_until(lambda: worker.stats.consume.get("pulls", 0) >= 1)
    worker.stop()
    assert run.wait(5) == 0
    line = next(r.getMessage() for r in worker_records(caplog, logging.INFO) if "worker stopped" in r.getMessage())
    for name in ("handled=0", "failed=0", "in_flight=0", "delivered=0", "nakd_on_stop=0", "pulls="):
        assert name in line, line


def test_a_handler_that_exits_the_process_ends_the_worker_with_status_1(nc, js, stream, subj, cons, caplog):
    publish(js, subj, 3)

    def handler(msg):
        sys.exit(3)  # escapes the handler's `except Exception`

    worker = jss.Worker(handler, client=nc, stream=stream.name, consumer=cons.name, stats_interval=None)
    assert Running(worker).wait(10) == 1  # not 0: a supervisor must see a failure and restart it
    assert any("died" in r.getMessage() for r in worker_records(caplog, logging.ERROR))


@pytest.mark.timeout(60)
def test_the_shutdown_bound_holds_when_the_server_stops_answering(private_server, caplog):
    with jss.connect(private_server.url) as admin:
        js = admin.jetstream()
        js.create_stream(name="HANG", subjects=["hang.>"])
        cons = js.create_consumer("HANG", durable_name="w", ack_policy="explicit")
        publish(js, "hang.x", 20)
    handled = threading.Event()
    worker = jss.Worker(
        lambda m: handled.set(), servers=private_server.url, stream="HANG", consumer="w",
        shutdown_timeout=1.0, stats_interval=None, connect_options={"connect_timeout": 1},
    )  # fmt: skip
    run = Running(worker)
    assert handled.wait(10)
    private_server.pause()  # SIGSTOP: the socket stays open, nothing answers
    try:
        t0 = time.monotonic()
        worker.stop()
        run.wait(10)
        took = time.monotonic() - t0
    finally:
        private_server.resume()
    assert took < 3.5, took  # shutdown_timeout 1 s (a close gets at least 0.5 s), not 5 s and more
    del cons


def test_an_async_handler_is_refused():
    async def handler(msg):
        pass

    with pytest.raises(jss.InvalidOptionError, match="plain function"):
        jss.run_worker(handler, stream="S", consumer="C", servers="nats://127.0.0.1:1")


def test_a_generator_handler_is_refused():
    def gen(msg):
        yield msg

    async def agen(msg):
        yield msg

    class Callable:
        def __call__(self, msg):
            yield msg

    for handler in (gen, agen, Callable()):
        with pytest.raises(jss.InvalidOptionError, match="not a generator function"):
            jss.Worker(handler, stream="S", consumer="C", servers="nats://127.0.0.1:1")


def test_a_handler_whose_body_never_runs_is_not_acked(nc, js, stream, subj, cons, caplog):
    # A decorator (a plain def) hides an async def / a generator: what it returns never ran.
    publish(js, subj, 2)

    async def work(msg):
        raise AssertionError("never awaited")

    def gen(msg):
        yield msg

    def handler(msg):
        return work(msg) if msg.data == b"0" else gen(msg)

    worker = jss.Worker(
        handler, client=nc, stream=stream.name, consumer=cons.name, nak_delay=30, stats_interval=None
    )
    run_until(worker, lambda: worker.stats.failed == 2)
    assert worker.stats.handled == 0
    info = cons.info()
    assert info.ack_floor.stream_seq == 0 and info.num_ack_pending == 2  # NAK'd (with a delay), not acked
    errs = [r.getMessage() for r in worker_records(caplog, logging.ERROR)]
    assert sum("its body never ran" in m for m in errs) == 2, errs


RETRYING_WORKER = """
import faulthandler, logging, signal, sys
import jetstream_sync as jss
faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for the stacks of a hung worker
logging.basicConfig(level=logging.INFO)
options = {{"retry_on_failed_connect": True, "reconnect_time_wait": 0.2, "max_reconnect_attempts": -1}}
sys.exit(jss.run_worker(print, servers={url!r}, stream="S", consumer="C", connect_options=options))
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_connecting_stops_the_worker_at_once(tmp_path, sig):
    url = NatsServer().url  # never started: nothing listens, and the worker retries for ever
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-c", RETRYING_WORKER.format(url=url)], stdout=log_file, stderr=subprocess.STDOUT
        )
    with reaped(proc):
        wait_until(lambda: "worker: connecting to" in log_path.read_text(), timeout=15)
        t0 = time.monotonic()
        proc.send_signal(sig)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # its threads' stacks, into the log
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=2)
            pytest.fail(f"the worker still ran 5 s after signal {int(sig)}; its log and stacks:\n{log_path.read_text()}")
        took = time.monotonic() - t0
    log = log_path.read_text()
    assert proc.returncode == 0, log  # stopped as asked, nothing was received
    assert took < 2, took
    assert f"signal {int(sig)} while connecting: stopped" in log, log


# -- the command line ----------------------------------------------------------------------


def _worker(handler="os:getpid", server="nats://x", *more):
    """A worker command line with the stream, consumer and server given."""
    return ["worker", handler, "--stream", "S", "--consumer", "C", *(["--server", server] if server else []), *more]


@pytest.mark.parametrize(
    "argv, match",
    [
        (["worker"], "required"),
        (_worker("nohandler"), "module:function"),
        (_worker("no_such_mod_x:h"), "cannot import"),
        (_worker("os:no_such_fn"), "has no"),
        (_worker("os:sep"), "not callable"),
        (_worker(server=None), "NATS_URL"),
        (_worker("os:getpid", "nats://x", "--concurrency", "0"), "concurrency"),
        (_worker("os:getpid", "nats://x", "--log-level", "LOUD"), "log level"),
        (_worker("os:getpid", "nats://x", "--creds", "/no/file"), "credentials"),
        (_worker("asyncio:sleep"), "handler 'asyncio:sleep' is an async def"),
        (_worker("ast:walk"), "not a generator function"),
        (_worker(server="http://127.0.0.1:4222"), "unsupported URL scheme 'http'"),
        (_worker(server="nats://u:s3cr3t@127.0.0.1:99999"), "invalid server URL nats://u:***@127.0.0.1:99999"),
        (_worker(server="nats://u:s3/cr3t@127.0.0.1:4222"), "invalid server URL nats://u:***@127.0.0.1:4222"),
        (_worker(server="nats://s3#cr3t@127.0.0.1:4222"), "invalid server URL nats://***@127.0.0.1:4222"),
    ],
)  # fmt: skip
def test_cli_usage_errors_exit_2_with_one_line(argv, match, capsys, monkeypatch):
    monkeypatch.delenv("NATS_URL", raising=False)
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err
    assert "cr3t" not in err  # no piece of a password


@pytest.mark.parametrize("which, says", [("bad", "holds no user JWT"), ("dir", "(Is a directory)")])
def test_cli_creds_file_is_read_and_checked_before_connecting(tmp_path, capsys, monkeypatch, which, says):
    files = {"bad": tmp_path / "bad.creds", "dir": tmp_path}
    files["bad"].write_text("garbage-SECRET\n")
    monkeypatch.delenv("NATS_URL", raising=False)
    assert cli_main(_worker("os:getpid", "nats://127.0.0.1:1", "--creds", str(files[which]))) == 2
    err = capsys.readouterr().err
    assert "--creds: " in err and str(files[which]) in err and says in err
    assert "SECRET" not in err and "Traceback" not in err


def test_cli_handler_module_that_fails_to_import_shows_where_and_exits_2(tmp_path, capsys, monkeypatch):
    (tmp_path / "broken_handlers_x.py").write_text("import os\n\ndef handle(msg)\n    pass\n")  # no colon
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["worker", "broken_handlers_x:handle", "--stream", "S", "--consumer", "C", "--server", "nats://x"]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "broken_handlers_x.py\", line 3" in err  # the traceback says where
    assert err.strip().splitlines()[-1].startswith(
        "jetstream-sync worker: error: importing 'broken_handlers_x' for handler 'broken_handlers_x:handle' failed: "
        "SyntaxError"
    )


HANDLER = """
import time

def handle(msg):
    time.sleep(0.005)
    with open({out!r}, "a") as f:
        f.write(msg.data.decode() + "\\n")
"""


def test_cli_worker_ends_gracefully_on_sigterm_and_logs_no_password(tmp_path):
    with contextlib.ExitStack() as stack:
        srv = stack.enter_context(NatsServer(args=["--user", "svc", "--pass", "s3cr3t-pw"]))
        url = f"nats://svc:s3cr3t-pw@127.0.0.1:{srv.port}"
        nc = stack.enter_context(jss.connect(url))
        js = nc.jetstream()
        js.create_stream(name="JOBS", subjects=["jobs.>"])
        cons = js.create_consumer("JOBS", durable_name="w", ack_policy="explicit")
        publish(js, "jobs.x", 200)
        out = tmp_path / "handled.txt"
        (tmp_path / "jobs_handler.py").write_text(textwrap.dedent(HANDLER.format(out=str(out))))
        log_path = tmp_path / "worker.log"
        log_file = stack.enter_context(open(log_path, "w"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "jetstream_sync", "worker", "jobs_handler:handle", "--server", url,
             "--stream", "JOBS", "--consumer", "w", "--concurrency", "2", "--stats-interval", "0.2"],
            cwd=tmp_path, stdout=log_file, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_until(lambda: "worker stats: handled=" in log_path.read_text(), timeout=15)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=5)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        log = log_path.read_text()
        assert proc.returncode == 0, log
        assert "s3cr3t-pw" not in log
        assert "svc:***@127.0.0.1" in log  # the URL is there, redacted
        assert "worker stats: handled=" in log and "worker stopped: handled=" in log
        done = out.read_text().split()
        assert len(done) == len(set(done))
        # the server takes in the acks the ended process sent on its own time
        info = info_once(cons, lambda i: i.num_ack_pending == 0 and i.num_pending == 200 - len(done))
        assert info.num_ack_pending == 0 and info.num_pending == 200 - len(done)


def test_a_signal_the_parent_ignores_stays_ignored(server, js, stream, subj, cons, tmp_path):
    # `worker &` in a shell script starts it with SIGINT ignored: a Ctrl-C meant
    # for the script must not stop it. SIGTERM still does.
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jetstream_sync", "worker", "builtins:id", "--server", server.url,
             "--stream", stream.name, "--consumer", cons.name, "--stats-interval", "0"],
            stdout=log_file, stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )  # fmt: skip
    with reaped(proc):
        wait_until(lambda: "worker: consuming" in log_path.read_text(), timeout=15)
        proc.send_signal(signal.SIGINT)
        publish(js, subj, 1)  # handled after the SIGINT: the worker goes on
        wait_until(lambda: cons.info().ack_floor.stream_seq == 1, timeout=10)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    log = log_path.read_text()
    assert proc.returncode == 0, log
    assert "signal 15: stopping" in log and "signal 2" not in log, log


def test_framework_settings_of_the_wrong_shape_are_usage_errors():
    from jetstream_sync.worker.cli import UsageError, build_worker

    values = {"handler": "os:getpid", "stream": "S", "consumer": "C", "server": None}
    with pytest.raises(UsageError, match="connect options setting must be a mapping, got list"):
        build_worker(values, configured_servers="nats://x", connect_options=["nats://u:pw@x"])
    with pytest.raises(UsageError, match="JETSTREAM_SYNC_SERVERS.*got a dict") as err:
        build_worker(values, configured_servers={"url": "nats://u:pw@x"}, setting='app.config["JETSTREAM_SYNC_SERVERS"]')
    assert "pw" not in str(err.value)
