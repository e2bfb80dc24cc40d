"""The test kit's temporary directories (a server's store, a benchmark's
build) do not outlive the process that made them: not after a normal exit
without cleanup, not after SIGKILL (the next process removes them), and never
while their owner lives. Each process here runs with its own TMPDIR, so what
it leaves is all there is to see."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jetstream_sync.testing.launcher import dies_with_parent
from jetstream_sync.testing.scratch import OWNER_FILE

from ..helpers import process_gone, survivors_of_sigkill

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]

# A started server left running, one never started, and a bare directory;
# prints them as JSON, then waits for a line on stdin (or EOF) and exits normally.
OWNER = """
import json, sys
from jetstream_sync.testing import NatsServer
from jetstream_sync.testing.scratch import make_dir
started, unused = NatsServer().start(), NatsServer()
print(json.dumps({"pid": started.pid, "stores": [started.store_dir, unused.store_dir, make_dir("jss-x-")]}), flush=True)
sys.stdin.readline()
"""


def _owner(tmp: Path) -> "tuple[subprocess.Popen[str], dict]":
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER], env=_env(tmp), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"the owner process ended early with {proc.wait(10)}"
    return proc, json.loads(line)


def _env(tmp: Path) -> dict:
    return dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))


def _make_one_and_exit(tmp: Path) -> None:
    code = "from jetstream_sync.testing.scratch import make_dir; make_dir('jss-y-')"
    subprocess.run([sys.executable, "-c", code], env=_env(tmp), check=True, timeout=60)


def test_a_process_that_exits_without_cleanup_leaves_no_store_and_no_server(tmp_path):
    proc, made = _owner(tmp_path)
    assert all(os.path.isdir(d) for d in made["stores"])
    proc.communicate("\n", timeout=60)
    assert proc.returncode == 0
    assert process_gone(made["pid"])
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(not dies_with_parent(), reason="a SIGKILLed process's servers outlive it except on Linux")
def test_the_stores_of_a_process_killed_with_sigkill_are_removed_by_the_next_process(tmp_path):
    proc, made = _owner(tmp_path)
    assert survivors_of_sigkill(proc, [made["pid"]]) == []
    assert all(os.path.isdir(d) for d in made["stores"])  # nobody ran at its exit
    _make_one_and_exit(tmp_path)
    assert os.listdir(tmp_path) == []


def test_a_living_process_keeps_its_stores_while_another_process_sweeps(tmp_path):
    proc, made = _owner(tmp_path)
    try:
        _make_one_and_exit(tmp_path)
        assert all(os.path.isdir(d) for d in made["stores"])
        assert sorted(os.listdir(os.path.dirname(made["stores"][0]))) == sorted(
            [OWNER_FILE] + [os.path.basename(d) for d in made["stores"]]
        )
    finally:
        proc.communicate("\n", timeout=60)
    assert os.listdir(tmp_path) == []


FORKS = """
import os, sys
from jetstream_sync.testing.scratch import make_dir
mine = make_dir("jss-parent-")
pid = os.fork()
if pid == 0:
    child = make_dir("jss-child-")  # a root of its own; the sweep must leave the parent's
    print(child, flush=True)
    assert os.path.isdir(mine)
else:
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert os.path.isdir(mine), "the forked child's exit removed its parent's directory"
    print(mine, flush=True)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_neither_sweeps_nor_removes_its_parents_directories(tmp_path):
    run = subprocess.run([sys.executable, "-c", FORKS], env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    child, parent = run.stdout.split()
    assert os.path.dirname(child) != os.path.dirname(parent)
    assert os.listdir(tmp_path) == []  # both exited normally: both roots gone

