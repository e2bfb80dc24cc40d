"""``jetstream-sync service module:factory`` in a real subprocess: it serves
until SIGTERM, then drains within 5 s and every request sent before the
signal is answered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import jetstream_sync as jss

from ..helpers import wait_until

pytestmark = pytest.mark.timeout(60)

FACTORY = '''
import time

def make(nc):
    svc = nc.add_service("slowsvc", "1.0.0", workers=4)

    @svc.endpoint("work", subject="runner.work")
    def work(req):
        nc.publish("runner.started", req.data)
        time.sleep(0.2)  # the work a request takes
        req.respond(b"done " + req.data)

    return svc

def not_a_service(nc):
    return 42
'''


def _start(server, tmp_path, target):
    (tmp_path / "svcmod.py").write_text(textwrap.dedent(FACTORY))
    env = {**os.environ, "NATS_URL": server.url, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    return subprocess.Popen(
        [sys.executable, "-m", "jetstream_sync", "service", target, "--shutdown-timeout", "5"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _serving(nc):
    try:
        nc.request("$SRV.PING.slowsvc", b"", timeout=0.5)
        return True
    except (jss.NoRespondersError, jss.TimeoutError):
        return False


def test_sigterm_drains_the_requests_in_flight_within_5_seconds(server, tmp_path):
    proc = _start(server, tmp_path, "svcmod:make")
    try:
        with jss.connect(server.url) as nc:
            wait_until(lambda: _serving(nc), timeout=20)
            started = nc.subscribe("runner.started")
            answers = nc.subscribe("runner.replies.>")
            for i in range(20):
                nc.publish("runner.work", b"%d" % i, reply=f"runner.replies.{i}")
            nc.flush()  # every request is with the server, routed to the service before the signal
            started.next_msg(timeout=10)  # handlers are busy: requests in flight and queued
            proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            proc.wait(timeout=10)
            assert time.monotonic() - signalled < 5.0
            wait_until(lambda: answers.pending() == 20, timeout=5)
            got = sorted(answers.next_msg(timeout=1).data for _ in range(20))
            assert got == sorted(b"done %d" % i for i in range(20))
            with pytest.raises(jss.NoRespondersError):
                nc.request("runner.work", b"late")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert "signal 15: draining slowsvc 1.0.0" in err


def test_a_factory_that_returns_no_service_fails_with_status_1(server, tmp_path):
    proc = _start(server, tmp_path, "svcmod:not_a_service")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "must return a Service" in err


def test_a_bad_target_is_a_usage_error(server, tmp_path):
    proc = _start(server, tmp_path, "svcmod:missing")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "has no 'missing'" in err


def test_a_creds_file_that_cannot_be_used_is_a_usage_error(tmp_path, capsys):
    from jetstream_sync.worker.service_runner import main

    bad = tmp_path / "bad.creds"
    bad.write_text("garbage-SECRET\n")
    assert main(["os:getpid", "--server", "nats://127.0.0.1:1", "--creds", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"--creds: the credentials file {bad} holds no user JWT" in err and "SECRET" not in err
