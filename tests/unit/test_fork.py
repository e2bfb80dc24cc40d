"""The one fork hook (_core.fork): its callbacks, their order, a fork the hook missed."""

import os

import pytest

from jetstream_sync._core import fork


@pytest.fixture
def own_callbacks(monkeypatch):
    """fork's callbacks replaced by the test's, its generation and pid restored after."""
    monkeypatch.setattr(fork, "_callbacks", [])
    monkeypatch.setattr(fork, "generation", fork.generation)
    monkeypatch.setattr(fork, "pid", fork.pid)


def test_a_fork_the_hook_missed_runs_the_callbacks_once_in_order(own_callbacks, monkeypatch):
    calls = []
    fork.on_child(lambda: calls.append("lower layer"))
    fork.on_child(lambda: calls.append("higher layer"))
    before = fork.generation
    fork.check_pid()
    assert calls == [] and fork.pid == os.getpid()  # same process: nothing
    monkeypatch.setattr(fork, "pid", -1)  # as if this were a child the hook did not see
    fork.check_pid()
    assert calls == ["lower layer", "higher layer"]
    assert fork.generation == before + 1 and fork.pid == os.getpid()
    fork.check_pid()
    assert len(calls) == 2


def test_a_failing_child_callback_is_logged_and_the_others_still_run(own_callbacks, monkeypatch, caplog):
    calls = []

    def broken():
        raise RuntimeError("boom")

    fork.on_child(broken)
    fork.on_child(lambda: calls.append("after"))
    monkeypatch.setattr(fork, "pid", -1)
    fork.check_pid()
    assert calls == ["after"]
    assert any("after-fork callback" in r.getMessage() and r.name == "jetstream_sync._connection" for r in caplog.records)


def test_the_child_callbacks_run_lower_layers_first():
    modules = [cb.__module__ for cb in fork._callbacks]
    order = ["jetstream_sync._core.loop", "jetstream_sync._core.connection", "jetstream_sync.worker.shared"]
    assert [modules.index(m) for m in order] == sorted(modules.index(m) for m in order)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_draws_its_parents_ids():
    """Inboxes, generated names, object and batch ids drawn after a fork
    differ in the parent and the child: both may use the same server."""
    from jetstream_sync._core.nuid import next_nuid

    next_nuid()  # this thread's generator exists before the fork
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(write_end, " ".join(next_nuid() for _ in range(100)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    parent = {next_nuid() for _ in range(100)}
    with os.fdopen(read_end, "rb") as pipe:
        child = set(pipe.read().decode().split())
    assert os.waitpid(pid, 0)[1] == 0
    assert len(child) == 100 and not parent & child
