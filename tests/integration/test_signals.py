"""install_signal_handlers(): SIGTERM drains a worker's consumer and acks what
it handled before the process exits, and a SIGTERM handler installed before
(a framework's) is still called and ends the process its own way.

The workers run as subprocesses; every wait is bounded (a poll with a
deadline, a join or subprocess wait with a timeout)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from ..helpers import info_once, publish, wait_until


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


_WORKER = textwrap.dedent(
    """
    import sys, time
    import jetstream_sync as jss

    url, stream_name = sys.argv[1], sys.argv[2]
    nc = jss.connect(url, name="sigterm-worker")
    jss.install_signal_handlers(timeout=5)
    cons = nc.jetstream().stream(stream_name).consumer("c")
    ready = False
    # A small buffer: what a drain has to hand out (20 x 20 ms) fits well
    # inside the 5 s shutdown budget, so nothing needs to be NAK'd.
    with cons.messages(max_messages=20) as it:
        for msg in it:
            if not ready:
                print("READY", flush=True)
                ready = True
            time.sleep(0.02)
            try:
                msg.ack()
            except Exception as exc:
                print(f"ACKFAIL {msg.metadata.sequence.stream} {exc!r}", flush=True)
                continue
            print(f"ACKED {msg.metadata.sequence.stream}", flush=True)
    print("END", flush=True)
    """
)


@pytest.mark.timeout(90)
def test_sigterm_drains_and_acks_before_exit(server, js, stream, subj, cons, tmp_path):
    total = 200
    publish(js, subj, total)
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, str(script), server.url, stream.name],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def reader():
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=reader, daemon=True).start()
    out = []
    try:
        deadline = time.monotonic() + 20
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "worker never printed READY"
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                continue
            assert line is not None, f"worker exited before READY: {proc.wait(5)} {proc.stderr.read()}"
            out.append(line)
            if line == "READY":
                break
        # Let it work a little so that acks and a buffer are in flight, then stop it.
        wait_until(lambda: sum(1 for line in list(lines.queue) if line and line.startswith("ACKED")) >= 5, timeout=10)
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            pytest.fail("worker did not exit within 15 s of SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    # Collect the rest of stdout (the reader ends at EOF).
    end = time.monotonic() + 5
    while time.monotonic() < end:
        try:
            line = lines.get(timeout=max(0.01, end - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        out.append(line)
    err = proc.stderr.read()

    assert rc in (0, -signal.SIGTERM, 128 + signal.SIGTERM), f"exit status {rc}; stderr:\n{err}"
    ack_fail = [line for line in out if line.startswith("ACKFAIL")]
    acked = [int(line.split()[1]) for line in out if line.startswith("ACKED")]
    assert acked, "worker acked nothing"
    assert acked == list(range(1, len(acked) + 1)), f"acked out of order / with gaps: {acked[:10]}…"

    # the server takes in the acks the ended worker sent on its own time
    info = info_once(cons, lambda i: i.num_ack_pending == 0 and i.ack_floor.stream_seq == len(acked) == i.delivered.stream_seq)
    # Nothing handed out is left un-acked (no message waits out AckWait).
    # Note: a NAK'd message still counts in num_ack_pending on nats-server
    # (it stays pending, queued for redelivery), so 0 here means the drain
    # handed the buffer out and the worker acked all of it.
    assert info.num_ack_pending == 0, (
        f"num_ack_pending={info.num_ack_pending} delivered={info.delivered} ack_floor={info.ack_floor}"
        f" acked by worker={len(acked)}; acks refused by the worker's client: {len(ack_fail)}"
        f" (first: {ack_fail[:1]}); stderr:\n{err}"
    )
    # The consumer delivers stream sequences 1, 2, 3 … in order (one consumer,
    # no redeliveries: AckWait is 30 s), and the worker acks each message as it
    # gets it and prints it right after ack() returned. So the acked set is the
    # prefix 1..len(acked), and the ack floor (highest sequence with everything
    # at or below it acked) equals len(acked) exactly when no printed ack was
    # lost (floor < printed) and no ack went out unprinted (floor > printed,
    # i.e. the process was killed between ack() and print, before its loop ended).
    assert info.ack_floor.stream_seq == len(acked), (
        f"ack_floor={info.ack_floor.stream_seq} but worker printed {len(acked)} acks; "
        f"delivered={info.delivered.stream_seq}; stderr:\n{err}"
    )
    assert info.delivered.stream_seq == info.ack_floor.stream_seq
    assert not ack_fail, f"acks refused during shutdown: {ack_fail}\nstderr:\n{err}"
    print(f"worker: exit {rc}, acked {len(acked)}, loop ended by itself: {'END' in out}")


_FRAMEWORK_WORKER = """
import signal, sys, threading, time
import jetstream_sync as jss

stop = threading.Event()
signal.signal(signal.SIGTERM, lambda s, f: (print("FRAMEWORK", flush=True), stop.set()))
nc = jss.connect(sys.argv[1])
jss.install_signal_handlers(timeout=5)
print("READY", flush=True)
stop.wait(30)
deadline = time.monotonic() + 10
while not nc.is_closed and time.monotonic() < deadline:  # the helper closes it
    time.sleep(0.01)
print("CLOSED" if nc.is_closed else "OPEN", flush=True)
"""


@pytest.mark.timeout(60)
def test_signal_helper_chains_a_framework_handler(server, tmp_path):
    """gunicorn-style: a SIGTERM handler installed before is still called, and
    the process ends the framework's way (not re-killed by the helper)."""
    script = tmp_path / "framework.py"
    script.write_text(_FRAMEWORK_WORKER)
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, str(script), server.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout.readline().strip() == "READY"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, (proc.returncode, err[-2000:])
    assert out.split() == ["FRAMEWORK", "CLOSED"], (out, err[-2000:])
