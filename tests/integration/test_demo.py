"""The main job: ``python -m jetstream_sync demo`` on an embedded server."""

import subprocess
import sys

import pytest


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
