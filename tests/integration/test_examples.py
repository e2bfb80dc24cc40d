"""Every top-level examples/*.py runs against a real server and says what it did.

The docs include these files verbatim (pymdownx.snippets), so a passing run
here is a passing run of the code on the pages. Subdirectories of examples/
(framework projects) have tests of their own.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from wsgiref.util import setup_testing_defaults

import pytest

import jetstream_sync as jss

from ..helpers import info_once, wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# script -> a line its output must contain
EXPECTED = {
    "quickstart.py": "received quickstart.hello: hello, JetStream (delivery 1)",
    "cron_job.py": "exported 250",
    "consume_messages.py": "handled 100 messages",
    "fetch_batch.py": "fetch_no_wait: 15 messages",
    "consume_handler.py": "handled 50 jobs, closed=True",
    "publish_async.py": "msg_id: duplicate=True, same sequence=True",
    "schedules.py": "cancelled: True, left: []",
    "fast_batch.py": "refused at message 4: 3 stored, the last at sequence 11003",
    "threads.py": "4 threads handled 400 messages",
    "fork_shared_client.py": "parent: child exited with 0, stream has 2 messages",
    "kv.py": "create: the lock is taken",
    "kv_codecs_mirror.py": "origin after a put on the mirror: written through the mirror",
    "object_store.py": "get: 300000 bytes, same=True",
    "pyspark_read.py": "spark read 100 messages: {'ex.spark.eu': 50, 'ex.spark.us': 50}",
    "service.py": "service calc: 3 requests, 1 error, last error '400:division by zero'",
    "partitioned_groups.py": "handled 700 orders of 20 customers, in order per customer: True",
    "prometheus_exporter.py": 'jetstream_consume_total{context="billing",counter="delivered"} 100.0',
    "nats_context.py": "NATS_CONTEXT: connected to the context's server: True",
}
# run differently, below
SPECIAL = {"sigterm_worker.py", "gunicorn_app.py", "system_health.py"}


def _env(server) -> dict:
    return {**os.environ, "NATS_URL": server.url, "METRICS_PORT": "0"}  # 0: any free port


def test_every_example_is_tested():
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(EXPECTED) | SPECIAL


@pytest.mark.timeout(230)
@pytest.mark.parametrize(
    "script", [pytest.param(s, marks=pytest.mark.spark) if s.startswith("pyspark") else s for s in sorted(EXPECTED)]
)
def test_example_runs(server, script):
    if script.startswith("pyspark"):
        pytest.importorskip("pyspark", reason="the spark extra is not installed")
        if shutil.which("java") is None:
            pytest.skip("Spark needs Java 17+")
    timeout = 200 if script.startswith("pyspark") else 30
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / script)], env=_env(server), capture_output=True, text=True, timeout=timeout
    )
    assert out.returncode == 0, out.stderr
    assert EXPECTED[script] in out.stdout.splitlines(), out.stdout


@pytest.mark.timeout(60)
def test_sigterm_worker_drains_and_exits(server):
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "sigterm_worker.py")],
        env=_env(server),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready = proc.stdout.readline()  # blocks until the worker consumes (bounded by the test timeout)
        assert "ready" in ready, proc.stderr.read()
        with jss.connect(server.url) as nc:
            cons = nc.jetstream().consumer("EX_WORKER", "worker")
            # Every task delivered before the signal, so the count below is exact.
            wait_until(lambda: cons.info().num_pending == 0, timeout=10)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
            # the server takes in the acks the ended process sent on its own time
            info = info_once(cons, lambda i: i.num_ack_pending == 0)
            assert info.num_ack_pending == 0  # the shutdown sent every ack
            nc.jetstream().delete_stream("EX_WORKER")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    assert "worker stopped after 10 messages" in out.splitlines(), out


@pytest.mark.timeout(30)
def test_gunicorn_app_publishes_one_message_per_request(server, monkeypatch):
    monkeypatch.setenv("NATS_URL", server.url)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("gunicorn_app", None)
    import gunicorn_app

    try:
        responses = []
        for path in ("/a", "/b"):
            environ = {"PATH_INFO": path}
            setup_testing_defaults(environ)
            body = b"".join(gunicorn_app.app(environ, lambda status, headers: responses.append(status)))
            assert b'"stream": "EX_GUNICORN"' in body
        assert responses == ["200 OK", "200 OK"]
        with jss.connect(server.url) as nc:
            stream = nc.jetstream().stream("EX_GUNICORN")
            assert stream.get_msg(last_by_subject=gunicorn_app.SUBJECT).data == b"/b"
            stream.delete()
    finally:
        gunicorn_app.worker_exit(None, None)
        sys.modules.pop("gunicorn_app", None)


@pytest.mark.timeout(90)
def test_system_health_reports_every_server_of_a_cluster(nats_cluster, tmp_path):
    conf = tmp_path / "accounts.conf"
    conf.write_text(
        "accounts { SYS: { users: [{user: sys, password: sys-pw}] }, APP: { jetstream: enabled } }\n"
        "system_account: SYS\n"
    )
    cluster = nats_cluster(3, config=str(conf))
    for s in cluster.servers:  # the PING reaches the servers routed to the one the script connects to
        wait_until(lambda s=s: s.varz().get("routes", 0) >= 2, timeout=30)
    env = {**os.environ, "NATS_URL": cluster.urls[0], "NATS_USER": "sys", "NATS_PASSWORD": "sys-pw"}
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "system_health.py")], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "3 of 3 servers healthy" in lines, out.stdout
    assert sorted(line.split(":")[0] for line in lines[:3]) == ["n0", "n1", "n2"]
