"""The main job: ``python -m jetstream_sync demo`` on an embedded server."""

import os
import subprocess
import sys

import pytest

from jetstream_sync.testing.launcher import dies_with_parent

from ..helpers import children_of, survivors_of_sigkill, wait_until


@pytest.mark.timeout(120)
def test_demo_runs_on_embedded_server():
    out = subprocess.run(
        [sys.executable, "-m", "jetstream_sync", "demo", "-n", "5000", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert out.returncode == 0, out.stderr
    assert "embedded nats-server" in out.stdout
    assert "published 5,000" in out.stdout
    assert "consumed  5,000" in out.stdout


@pytest.mark.skipif(not dies_with_parent(), reason="servers outlive a SIGKILLed process except on Linux")
@pytest.mark.timeout(60)
def test_the_embedded_server_ends_when_the_demo_is_killed():
    demo = subprocess.Popen(
        [sys.executable, "-m", "jetstream_sync", "demo", "-n", "100000000", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert "embedded nats-server on" in demo.stdout.readline().decode()  # started and ready
        servers = wait_until(lambda: children_of(demo.pid), timeout=10)
        assert survivors_of_sigkill(demo, servers) == [], "the embedded server outlived the demo"
    finally:
        demo.kill()
        demo.communicate()


@pytest.mark.timeout(60)
def test_demo_against_a_given_server(server):
    out = subprocess.run(
        [sys.executable, "-m", "jetstream_sync", "demo", "--server", server.url, "-n", "2000", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert out.returncode == 0, out.stderr
    assert "embedded" not in out.stdout and "consumed  2,000" in out.stdout


@pytest.mark.timeout(60)
def test_demo_against_a_down_server_says_so_in_one_line():
    import socket

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = subprocess.run(
        [sys.executable, "-m", "jetstream_sync", "demo", "--server", f"nats://me:s3cret@127.0.0.1:{port}", "-n", "10"],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        f"jetstream-sync demo: NoServersError: could not connect to nats://me:***@127.0.0.1:{port}: connection refused"
    ]


def test_progress_bar_writes_its_last_line_once():
    import io

    from jetstream_sync._tools.demo import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    bar = Progress("consume", 2000, out=out)
    for done in (1000, 2000, 2000):  # the loop reports the end, then the caller again after it
        bar.update(done)
    assert out.getvalue().count("100.0%") == 1
    assert out.getvalue().endswith("\n")
