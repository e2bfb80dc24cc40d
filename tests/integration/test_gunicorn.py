"""gunicorn --preload with sync, gthread and gevent workers and jss.shared_client
(examples/gunicorn_app.py, the recipe of docs/threads-processes.md): every request
publishes exactly one message, from one client per worker process. And the gevent
pitfall that page shows: a lock made at import, held across connect()."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Dict, Iterator, List, Tuple

import pytest

import jetstream_sync as jss
from jetstream_sync.testing import free_port

from ..helpers import wait_until

pytestmark = pytest.mark.skipif(importlib.util.find_spec("gunicorn") is None, reason="gunicorn is not installed")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DOC = Path(__file__).resolve().parents[2] / "docs" / "threads-processes.md"
STREAM, SUBJECT = "EX_GUNICORN", "ex.gunicorn.requests"
REQUESTS, WORKERS = 2000, 2
WORKER_ARGS = {
    "sync": ["-k", "sync"],
    "gthread": ["-k", "gthread", "--threads", "4"],
    "gevent": ["-k", "gevent", "--worker-connections", "100"],
}


def connections(server) -> List[dict]:
    url = f"http://127.0.0.1:{server.monitor_port}/connz?limit=10000"
    with urllib.request.urlopen(url, timeout=5) as r:
        return list(json.loads(r.read())["connections"])


def get(port: int, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        assert r.status == 200
        return json.loads(r.read())


def answered(port: int, path: str, timeout: float) -> bool:
    """Whether a 200 came within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status == 200
    except OSError:  # timed out (TimeoutError is an OSError), refused, reset
        return False


@contextlib.contextmanager
def gunicorn(tmp_path: Path, args: List[str], env: Dict[str, str], probe: str) -> Iterator[Tuple[subprocess.Popen, int, IO[str]]]:
    """gunicorn with ``args`` on a free port, once ``probe`` answers: (process,
    port, log). Its whole process group is killed on the way out: killing only
    the master would orphan hung workers."""
    port = free_port()
    cmd = [sys.executable, "-m", "gunicorn", *args, "-b", f"127.0.0.1:{port}"]
    log = open(tmp_path / "gunicorn.log", "w+")
    proc = subprocess.Popen(cmd, env=dict(os.environ, **env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def up() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{probe}", timeout=5):
                    return True
            except OSError:
                assert proc.poll() is None, "gunicorn exited"
                return False

        wait_until(up, timeout=30, interval=0.1)
        yield proc, port, log
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(5)
        log.seek(0)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("worker", sorted(WORKER_ARGS))
def test_preloaded_workers_publish_each_request_exactly_once(private_server, worker, tmp_path):
    server = private_server  # its connections are this test's alone
    if worker == "gevent" and importlib.util.find_spec("gevent") is None:
        pytest.skip("gevent is not installed")
    args = ["--preload", "-w", str(WORKERS), *WORKER_ARGS[worker], "--chdir", str(EXAMPLES),
            "-c", str(EXAMPLES / "gunicorn_app.py"), "--graceful-timeout", "10", "gunicorn_app:app"]
    with gunicorn(tmp_path, args, {"NATS_URL": server.url}, "/warmup") as (proc, port, log):
        paths = [f"/r{i}" for i in range(REQUESTS - 1)]  # the warm-up was request number one
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda p: get(port, p), paths))
        assert len({a["seq"] for a in answers}) == len(answers)  # one PubAck per request
        pids = {a["pid"] for a in answers}
        assert len(pids) >= 2  # the requests really were spread over the forked workers
        # shared_client: one connection per worker process that served, none from the master
        assert len(connections(server)) == len(pids)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    output = log.read()
    with jss.connect(server.url) as nc:
        js = nc.jetstream()
        assert js.stream_info(STREAM).state.messages == REQUESTS, output[-3000:]
        bodies = sorted(m.data for m in js.stream(STREAM).ordered_consumer().fetch(REQUESTS, expires=10))
    assert bodies == sorted([b"/warmup"] + [p.encode() for p in paths])  # each request exactly once
    assert "Traceback" not in output, output[-3000:]


# The app around each `def client()` block of the page: the readiness probe
# must not connect, or the first real requests would find the client made.
LOCK_APP = """import os

NATS_URL = os.environ["NATS_URL"]

{block}

def app(environ, start_response):
    if environ["PATH_INFO"] != "/health":
        client().flush(timeout=5)
    start_response("200 OK", [("Content-Length", "2")])
    return [b"ok"]
"""


@contextlib.contextmanager
def slow_handshake(target_port: int, hold: float) -> Iterator[Tuple[int, threading.Event]]:
    """A loopback port that forwards to ``target_port`` but holds each new
    connection ``hold`` seconds first (a server slow to answer a connect):
    (port, an event set once the first connection is being held)."""
    listener = socket.create_server(("127.0.0.1", 0))
    holding = threading.Event()
    closing = threading.Event()

    def pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def serve(conn: socket.socket) -> None:
        holding.set()
        if closing.wait(hold):
            conn.close()
            return
        upstream = socket.create_connection(("127.0.0.1", target_port), timeout=5)
        upstream.settimeout(None)
        threading.Thread(target=pipe, args=(upstream, conn), daemon=True).start()
        pipe(conn, upstream)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1], holding
    finally:
        closing.set()
        listener.close()


@pytest.mark.timeout(120)
def test_gevent_preload_lock_made_at_import_deadlocks_where_shared_client_works(server, tmp_path):
    """The two `def client()` blocks of docs/threads-processes.md, under
    gunicorn --preload -k gevent with one worker."""
    if importlib.util.find_spec("gevent") is None:
        pytest.skip("gevent is not installed")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S) if "def client(" in b]
    assert len(blocks) == 2, "the page shows the deadlocking and the working client() as two python blocks"
    (locked, shared), served, logs = blocks, {}, {}
    assert "threading.Lock()" in locked and "shared_client(" in shared
    for name, block, requests in (("locked", locked, 16), ("shared", shared, 300)):
        work = tmp_path / name
        work.mkdir()
        (work / "lock_app.py").write_text(LOCK_APP.format(block=block))
        # --timeout 120: the arbiter must not replace a hung worker while this looks at it.
        args = ["--preload", "-w", "1", *WORKER_ARGS["gevent"], "--timeout", "120", "--chdir", str(work), "lock_app:app"]
        # The first request's connect() is held 1 s (within the 2 s connect
        # timeout): the others come while it is in progress, whatever the load.
        with slow_handshake(server.port, hold=1.0) as (nats_port, holding):
            env = {"NATS_URL": f"nats://127.0.0.1:{nats_port}"}
            with gunicorn(work, args, env, "/health") as (proc, port, log), ThreadPoolExecutor(16) as pool:
                first = pool.submit(answered, port, "/r0", timeout=10)
                assert holding.wait(10), "the first request never connected"
                rest = pool.map(lambda i: answered(port, f"/r{i}", timeout=10), range(1, requests))
                served[name] = first.result() + sum(rest)
                served[name + " after"] = answered(port, "/health", timeout=2)
        logs[name] = log.read()[-3000:]
    assert served["shared"] == 300 and served["shared after"], logs["shared"]
    assert served["locked"] < 16 and not served["locked after"], served  # hung: not even the probe is answered
