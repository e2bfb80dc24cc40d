"""``jetstream-sync bench``: what a user measuring their own server sees."""

from __future__ import annotations

import json
import subprocess
import sys
import time

def bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jetstream_sync", "bench", *args, "--no-progress"],
        capture_output=True, text=True, timeout=timeout,
    )


def results_of(proc: subprocess.CompletedProcess) -> list:
    out = proc.stdout
    return json.loads(out[out.index("[") :])


def test_pub_then_consume_against_a_given_server_count_every_message(server, js):
    stream = f"BENCH{time.monotonic_ns()}"
    pub = bench("pub", "--server", server.url, "--stream", stream, "-n", "3000", "--size", "64",
                "--clients", "3", "--json")
    assert pub.returncode == 0, pub.stderr
    assert js.stream(stream).info().state.messages == 3000  # every PubAck was checked
    (p,) = results_of(pub)
    assert p["count"] == 3000 and p["msgs_per_s"] > 0 and p["mb_per_s"] > 0 and p["p99_us"] >= p["p50_us"] > 0

    cons = bench("consume", "--server", server.url, "--stream", stream, "--clients", "2", "--json")
    assert cons.returncode == 0, cons.stderr
    (c,) = results_of(cons)
    assert c["count"] == 3000 and c["ack"] == "explicit" and c["size"] == 64
    assert "msgs/s" in cons.stdout and "p99" in cons.stdout
    assert js.stream(stream).consumer_names() == []  # its consumer is deleted afterwards
    js.delete_stream(stream)


def test_sync_pub_and_fetch_mode(server, js):
    stream = f"BENCH{time.monotonic_ns()}"
    pub = bench("pub", "--server", server.url, "--stream", stream, "--mode", "sync", "-n", "500", "--json")
    assert pub.returncode == 0, pub.stderr
    assert results_of(pub)[0]["mode"] == "sync"
    cons = bench("consume", "--server", server.url, "--stream", stream, "--mode", "fetch", "--batch", "100",
                 "--ack", "none", "--json")
    assert cons.returncode == 0, cons.stderr
    assert results_of(cons)[0]["count"] == 500
    js.delete_stream(stream)


def test_both_on_an_embedded_server():
    proc = bench("both", "--embedded", "-n", "2000", "--json")
    assert proc.returncode == 0, proc.stderr
    pub, cons = results_of(proc)
    assert pub["count"] == cons["count"] == 2000
    # --mode names the mode of one step; the other keeps its default.
    proc = bench("both", "--embedded", "-n", "500", "--mode", "sync", "--json")
    assert proc.returncode == 0, proc.stderr
    pub, cons = results_of(proc)
    assert (pub["mode"], cons["mode"]) == ("sync", "messages") and cons["count"] == 500


def test_bad_arguments_are_refused_before_connecting():
    # No server listens on port 1: each of these must fail on the argument, not on connecting.
    for args, why in [
        (("pub", "--clients", "0"), "must be >= 1"),
        (("pub", "--stream", "a.b"), "--stream"),
        (("consume", "--timeout", "0"), "--timeout"),
        (("both",), "--embedded"),
        (("pub", "--mode", "fetch", "--embedded"), "--mode"),
        (("both", "--mode", "bogus", "--embedded"), "--mode"),
    ]:
        proc = bench(*args, "--server", "nats://127.0.0.1:1", timeout=60)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert why in proc.stderr, (args, proc.stderr)


def test_a_down_server_is_one_clear_line():
    proc = bench("pub", "--server", "nats://127.0.0.1:1", "-n", "10", timeout=60)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "127.0.0.1:1" in proc.stdout
