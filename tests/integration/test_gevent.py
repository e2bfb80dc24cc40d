"""gevent: a monkey-patched process uses real OS threads for the loop and
waits cooperatively, so other greenlets keep running."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest

# find_spec, not import: gevent must stay out of this process.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("gevent") is None, reason="gevent is not installed")

SCRIPT = textwrap.dedent(
    """
    from gevent import monkey

    monkey.patch_all()

    import os
    import sys
    import time

    import gevent
    import gevent.event

    import jetstream_sync as jss
    from jetstream_sync.testing import wait_until

    url = sys.argv[1]
    name = "GEVENT%d" % os.getpid()
    ticks = [0]

    def ticker():
        while True:
            ticks[0] += 1
            gevent.sleep(0.01)

    bg = gevent.spawn(ticker)

    def step(label):
        print("step:", label, file=sys.stderr, flush=True)

    step("connect 1")
    nc1 = jss.connect(url, name="gevent-1")
    step("connect 2")
    nc2 = jss.connect(url, name="gevent-2")
    js = nc2.jetstream()
    step("create stream")
    stream = js.create_stream(name=name, subjects=[name.lower() + ".>"])
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
    step("publish")
    ack = js.publish(name.lower() + ".x", b"hello")
    assert ack.seq == 1, ack
    step("fetch")
    got = []
    for msg in cons.fetch(1, expires=2):
        got.append(msg.data)
        msg.ack()
    assert got == [b"hello"], got
    nc2.flush()
    # the server takes acks in on its own time, after the flush's PONG
    wait_until(lambda: cons.info().num_ack_pending == 0, timeout=5)

    step("next on an empty consumer")
    before = ticks[0]
    start = time.monotonic()
    try:
        cons.next(timeout=1)
    except jss.TimeoutError:
        pass
    else:
        raise AssertionError("cons.next() returned a message")
    elapsed = time.monotonic() - start
    advanced = ticks[0] - before
    assert 0.8 < elapsed < 5, elapsed
    assert advanced > 20, "other greenlets starved during a blocking call: %d ticks" % advanced

    step("publish_async")
    # Locks shared with the loop thread: a loop-thread hub that never ran
    # used to strand this wait (even past its timeout).
    futures = [js.publish_async(name.lower() + ".y", b"x") for _ in range(2000)]
    assert js.publish_async_complete(timeout=10) is True
    assert futures[-1].result(5).seq == 2001

    step("core pub/sub on the first client")
    sub = nc1.subscribe(name.lower() + "-core")
    nc1.flush()
    nc2.publish(name.lower() + "-core", b"ping")
    assert sub.next_msg(timeout=5).data == b"ping"

    step("core subscription with a callback")
    seen = []
    done = gevent.event.Event()

    def on_msg(msg):
        seen.append(msg.data)
        gevent.sleep(0)  # a callback that yields to the hub must not wedge delivery
        if len(seen) == 50:
            done.set()

    cbsub = nc1.subscribe(name.lower() + "-cb", cb=on_msg)
    nc1.flush()
    for i in range(50):
        nc2.publish(name.lower() + "-cb", b"%d" % i)
    assert done.wait(10), seen
    assert seen == [b"%d" % i for i in range(50)], seen
    cbsub.unsubscribe()

    step("close")
    js.delete_stream(name)
    nc1.close()
    nc2.close()
    bg.kill()
    print("OK", ticks[0], advanced, flush=True)
    """
)


def test_gevent_monkey_patched_connect_twice_and_consume(server):
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, server.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the gevent script hung (killed after 60 s)\nstdout:\n{out}\nstderr:\n{err}")
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    assert out.startswith("OK"), out


AFTER_CLOSE = textwrap.dedent(
    """
    from gevent import monkey

    monkey.patch_all()

    import collections
    import sys

    import jetstream_sync as jss

    start_os_thread = monkey.get_original("_thread", "start_new_thread")
    os_lock = monkey.get_original("_thread", "allocate_lock")
    seen = collections.Counter()
    for _ in range(30):
        nc = jss.connect(sys.argv[1])
        js = nc.jetstream()
        nc.close()
        done = os_lock()
        done.acquire()

        def call():
            try:
                js.publish("after.close", b"")
            except Exception as exc:
                seen[type(exc).__name__] += 1
            finally:
                done.release()

        start_os_thread(call, ())  # may get the ended loop thread's ident
        assert done.acquire(True, 10), "the call did not return"
    print(dict(seen), flush=True)
    """
)


def test_gevent_call_after_close_from_a_new_os_thread_says_the_client_is_closed(server):
    """The loop runs on a real OS thread; one started after close() may reuse
    its ident, and is not the loop thread."""
    proc = subprocess.run(
        [sys.executable, "-c", AFTER_CLOSE, server.url], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.stdout.strip() == "{'ConnectionClosedError': 30}"


SIGTERM_WORKER = textwrap.dedent(
    """
    from gevent import monkey

    monkey.patch_all()

    import sys
    import time

    import jetstream_sync as jss

    nc = jss.connect(sys.argv[1])
    jss.install_signal_handlers(timeout=5)
    cons = nc.jetstream().stream(sys.argv[2]).consumer("c")
    acked = 0

    def handler(msg):
        global acked
        time.sleep(0.02)
        msg.ack()
        acked += 1
        print("ACKED", acked, flush=True)

    cc = cons.consume(handler, max_messages=20)
    cc.wait(60)
    time.sleep(60)  # the signal ends the process before this does
    """
)


@pytest.mark.timeout(60)
def test_sigterm_under_gevent_drains_acks_and_exits_by_the_signal(server, js, stream, subj, cons, tmp_path):
    """The signal handler runs in gevent's hub, where nothing may block: it
    used to start a thread there and crash with BlockingSwitchOutError."""
    from ..helpers import info_once, publish

    publish(js, subj, 200)
    script = tmp_path / "worker.py"
    script.write_text(SIGTERM_WORKER)
    proc = subprocess.Popen(
        [sys.executable, str(script), server.url, stream.name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()  # the first ACKED: consuming
        assert line.startswith("ACKED"), (line, proc.stderr.read() if proc.poll() is not None else "")
        proc.send_signal(15)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode in (-15, 143), (proc.returncode, err[-2000:])
    assert "BlockingSwitchOutError" not in err, err[-2000:]
    acked = 1 + sum(1 for line in out.splitlines() if line.startswith("ACKED"))
    info = info_once(cons, lambda i: i.num_ack_pending == 0 and i.ack_floor.stream_seq == acked)
    assert info.num_ack_pending == 0, (info.num_ack_pending, acked, err[-1000:])
    assert info.ack_floor.stream_seq == acked
