"""The test kit (jetstream_sync.testing) against real servers: its fault
helpers do what they say, its fixtures start and stop what they say, and the
user-project example of docs/testing.md passes with the plugin alone, and
no server outlives the process that started it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import jetstream_sync as jss
from jetstream_sync.testing import NatsServer, wait_for_ack_floor
from jetstream_sync.testing.launcher import dies_with_parent

from ..helpers import process_gone, publish, survivors_of_sigkill, wait_until

ROOT = Path(__file__).resolve().parents[2]


def test_a_paused_server_answers_nothing_until_it_resumes(nats_server, client):
    js = client.jetstream(timeout=0.5)
    js.account_info()
    with nats_server.paused():
        with pytest.raises(jss.TimeoutError):
            js.account_info()
    assert client.jetstream(timeout=10).account_info() is not None


def test_a_killed_and_restarted_server_keeps_its_jetstream_store(nats_server, client):
    js = client.jetstream(timeout=1)
    js.create_stream(name="KEPT", subjects=["kept.>"])
    publish(js, "kept.x", 3)
    nats_server.kill()
    assert not nats_server.running
    nats_server.start()
    info = wait_until(lambda: _stream_info(js, "KEPT"), timeout=20)
    assert info.state.messages == 3


def _stream_info(js, name):
    try:
        return js.stream_info(name)
    except (jss.TimeoutError, jss.ConnectionClosedError, jss.NoRespondersError):
        return None  # still reconnecting


def test_a_cluster_of_three_forms_and_elects_a_meta_leader(nats_cluster):
    cluster = nats_cluster(3)
    leader = cluster.wait_for_meta_leader(timeout=30)
    assert leader in cluster.names
    # each server counts its peers on its own time: one can still say 2 once a leader is elected
    wait_until(lambda: {s.jsz()["meta_cluster"]["cluster_size"] for s in cluster.servers} == {3}, timeout=30)
    with jss.connect(cluster.urls) as nc:
        assert nc.is_connected


def test_wait_for_ack_floor_sees_a_handler_on_another_thread_ack(client):
    js = client.jetstream()
    stream = js.create_stream(name="FLOOR", subjects=["floor.>"])
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
    last = publish(js, "floor.x", 5)[-1]
    with pytest.raises(AssertionError, match=r"stream sequence 0, not 5"):
        wait_for_ack_floor(cons, last, timeout=0.2)
    handling = cons.consume(lambda msg: msg.ack())
    try:
        assert wait_for_ack_floor(cons, last, timeout=10).ack_floor.stream_seq == 5
    finally:
        handling.stop()


def test_the_fixtures_stop_their_servers_after_the_test(tmp_path):
    """A user project of the docs' example plus a test noting its servers'
    pids, run by pytest with the kit's plugin and nothing of this project's."""
    for name in ("totals.py", "test_totals.py"):
        shutil.copy(ROOT / "examples" / "testing" / name, tmp_path / name)
    (tmp_path / "test_pids.py").write_text(
        "def test_note_pids(nats_server, nats_cluster, client, tmp_path_factory):\n"
        "    pids = [nats_server.pid] + [s.pid for s in nats_cluster(2).servers]\n"
        "    with open('pids', 'w') as f:\n"
        "        f.write(' '.join(map(str, pids)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "jetstream_sync.testing.plugin", "-p", "no:cacheprovider"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    examples = (ROOT / "examples" / "testing" / "test_totals.py").read_text().count("\ndef test_")
    assert f"{examples + 1} passed" in run.stdout  # the example's tests and test_note_pids
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 3
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# A user's test that starts the kit's servers (a server, a 3-node cluster, and a
# server started from a thread that has ended), notes their pids and hangs, as
# a test does when a CI job times out and kills pytest.
HANGING_TEST = """
import os, threading
from jetstream_sync.testing import NatsServer

def test_hangs(nats_server, nats_cluster, tmp_path):
    pids = [nats_server.pid] + [s.pid for s in nats_cluster(3).servers]
    started = []
    starter = threading.Thread(target=lambda: started.append(NatsServer(store_dir=str(tmp_path / "t")).start()))
    starter.start()
    starter.join()
    pids.append(started[0].pid)
    with open("pids.tmp", "w") as f:
        f.write(" ".join(map(str, pids)))
    os.rename("pids.tmp", "pids")
    threading.Event().wait(300)
"""


@pytest.mark.skipif(not dies_with_parent(), reason="servers outlive a SIGKILLed process except on Linux")
@pytest.mark.timeout(120)
def test_the_servers_of_a_pytest_run_killed_with_sigkill_end_with_it(tmp_path):
    (tmp_path / "test_hangs.py").write_text(HANGING_TEST)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "jetstream_sync.testing.plugin", "-p", "no:cacheprovider"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: (tmp_path / "pids").exists() or run.poll() is not None, timeout=90)
        assert run.poll() is None, run.communicate()[0].decode(errors="replace")
        pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
        assert len(pids) == 5 and not any(process_gone(p) for p in pids)
        assert survivors_of_sigkill(run, pids) == [], "servers outlived the pytest run that started them"
    finally:
        run.kill()
        run.communicate()


def test_a_server_started_from_a_thread_that_ended_keeps_running_and_restarts(tmp_path):
    """Servers may be started from any thread: one whose thread has ended (its
    OS thread gone too) still answers, and a restart from another such thread
    keeps its store."""
    server = NatsServer(store_dir=str(tmp_path / "nats"))

    def in_a_thread(action):
        tids = []
        t = threading.Thread(target=lambda: (tids.append(threading.get_native_id()), action()))
        t.start()
        t.join(30)
        assert not t.is_alive()
        if os.path.isdir("/proc/self/task"):  # join returns before the OS thread is gone: wait for that too
            wait_until(lambda: not os.path.exists(f"/proc/self/task/{tids[0]}"), timeout=10)

    try:
        in_a_thread(server.start)
        first = server.pid
        with jss.connect(server.url) as nc:
            js = nc.jetstream()
            js.create_stream(name="KEPT", subjects=["kept.>"])
            publish(js, "kept.x", 2)
        assert server.running and not process_gone(first)
        in_a_thread(server.restart)
        assert server.running and server.pid != first and process_gone(first)
        with jss.connect(server.url) as nc:
            assert nc.jetstream().stream_info("KEPT").state.messages == 2
        assert server.running
    finally:
        server.stop()
