"""gunicorn --preload with sync, gthread and gevent workers and jss.shared_client
(examples/gunicorn_app.py, the recipe of docs/threads-processes.md): every request
publishes exactly one message, from one client per worker process."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import List

import pytest

import jetstream_sync as jss
from jetstream_sync._server import free_port

from ..helpers import wait_until

pytestmark = pytest.mark.skipif(importlib.util.find_spec("gunicorn") is None, reason="gunicorn is not installed")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
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


@pytest.mark.timeout(150)
@pytest.mark.parametrize("worker", sorted(WORKER_ARGS))
def test_preloaded_workers_publish_each_request_exactly_once(private_server, worker, tmp_path):
    server = private_server  # its connections are this test's alone
    if worker == "gevent" and importlib.util.find_spec("gevent") is None:
        pytest.skip("gevent is not installed")
    port = free_port()
    cmd = [sys.executable, "-m", "gunicorn", "--preload", "-w", str(WORKERS), *WORKER_ARGS[worker],
           "-b", f"127.0.0.1:{port}", "--chdir", str(EXAMPLES), "-c", str(EXAMPLES / "gunicorn_app.py"),
           "--graceful-timeout", "10", "gunicorn_app:app"]
    log = open(tmp_path / "gunicorn.log", "w+")
    proc = subprocess.Popen(
        cmd, env=dict(os.environ, NATS_URL=server.url), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        def up() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/warmup", timeout=5):
                    return True
            except OSError:
                assert proc.poll() is None, "gunicorn exited"
                return False

        wait_until(up, timeout=30, interval=0.1)
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
    finally:
        # The whole group: killing only the master would orphan hung workers.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(5)
        log.seek(0)
        output = log.read()
    with jss.connect(server.url) as nc:
        js = nc.jetstream()
        assert js.stream_info(STREAM).state.messages == REQUESTS, output[-3000:]
        bodies = sorted(m.data for m in js.stream(STREAM).ordered_consumer().fetch(REQUESTS, expires=10))
    assert bodies == sorted([b"/warmup"] + [p.encode() for p in paths])  # each request exactly once
    assert "Traceback" not in output, output[-3000:]
