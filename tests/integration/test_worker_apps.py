"""The Django project and the Flask app of ``examples/`` run their workers as a
user would: 2,000 messages, SIGTERM mid-way, restart, and every message is
handled exactly once with nothing left pending on the consumer."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import List

import pytest

from ..helpers import publish, wait_until

pytest.importorskip("django")
pytest.importorskip("flask")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOTAL = 2000
SIGTERM_AFTER = 300  # handled messages before the first SIGTERM

# Each handler call takes a few ms, so that the SIGTERM lands with messages
# buffered and in flight; it wraps the example's own handler.
SLOW_HANDLER = """
import time

from {module} import handle as record


def handle(msg):
    time.sleep(0.003)
    record(msg)
"""


def copy_example(name: str, dest: Path, handler_module: str) -> Path:
    target = dest / name
    shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns("*.sqlite3*", "__pycache__"))
    (target / "slow_handlers.py").write_text(textwrap.dedent(SLOW_HANDLER.format(module=handler_module)))
    return target


class Table:
    """Reads the example's table of handled messages (one row per handler call)."""

    def __init__(self, path: Path, table: str) -> None:
        self.path, self.table = path, table

    def query(self, sql: str) -> list:
        if not self.path.exists():
            return []
        with sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10) as db:
            try:
                return db.execute(sql.format(table=self.table)).fetchall()
            except sqlite3.OperationalError:  # the table is not made yet
                return []

    def count(self) -> int:
        rows = self.query("SELECT COUNT(*) FROM {table}")
        return rows[0][0] if rows else 0


def start(cmd: List[str], cwd: Path, env: dict, log: Path) -> subprocess.Popen:
    with open(log, "a") as f:
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen, log: Path) -> int:
    """SIGTERM; the worker must end within 5 s."""
    proc.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    try:
        status = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        raise AssertionError(f"the worker did not end within 5 s of SIGTERM:\n{log.read_text()[-3000:]}") from None
    assert time.monotonic() - t0 < 5
    return status


def run_scenario(js, stream, subj, cons, cmd: List[str], cwd: Path, env: dict, table: Table) -> None:
    publish(js, subj, TOTAL)
    log = cwd / "worker.log"
    procs = []
    try:
        procs.append(start(cmd, cwd, env, log))
        wait_until(lambda: table.count() >= SIGTERM_AFTER or procs[0].poll() is not None, timeout=20, interval=0.02)
        assert procs[0].poll() is None, f"the worker ended early:\n{log.read_text()[-3000:]}"
        assert stop(procs[0], log) == 0, log.read_text()[-3000:]
        first = table.count()
        assert first < TOTAL, "the SIGTERM landed after everything was handled: it tested nothing"

        procs.append(start(cmd, cwd, env, log))

        def all_done() -> bool:
            info = cons.info()
            return table.count() >= TOTAL and info.num_pending == 0 and info.num_ack_pending == 0

        # Not a speed check: a restarted Django worker on a loaded 2-core machine
        # took over 20 s to import, connect and handle the rest (CI, helpers' runs).
        wait_until(all_done, timeout=45, interval=0.05)
        assert stop(procs[1], log) == 0, log.read_text()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
    dupes = table.query("SELECT msg_id, COUNT(*) FROM {table} GROUP BY msg_id HAVING COUNT(*) > 1")
    assert dupes == [], f"handled more than once: {dupes[:10]}"
    assert table.count() == TOTAL
    expected = {f"{stream.name}:{seq}" for seq in range(1, TOTAL + 1)}
    assert {row[0] for row in table.query("SELECT msg_id FROM {table}")} == expected
    info = cons.info()
    assert info.num_pending == 0 and info.num_ack_pending == 0
    text = log.read_text()
    assert text.count("worker stopped: handled=") == 2


def worker_env(server, **extra: str) -> dict:
    env = dict(os.environ, NATS_URL=server.url, **extra)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


@pytest.mark.timeout(120)
def test_django_example_worker_handles_every_message_once_across_a_sigterm(server, js, stream, subj, cons, tmp_path):
    project = copy_example("django_project", tmp_path, "orders.handlers")
    env = worker_env(server)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=project, env=env, check=True, timeout=60
    )
    cmd = [
        sys.executable, "manage.py", "jetstream_worker", "slow_handlers:handle",
        "--stream", stream.name, "--consumer", cons.name, "--concurrency", "4", "--shutdown-timeout", "4",
    ]  # fmt: skip
    run_scenario(js, stream, subj, cons, cmd, project, env, Table(project / "db.sqlite3", "orders_handledmessage"))


@pytest.mark.timeout(120)
def test_flask_example_worker_handles_every_message_once_across_a_sigterm(server, js, stream, subj, cons, tmp_path):
    app_dir = copy_example("flask_app", tmp_path, "handlers")
    db = app_dir / "handled.sqlite3"
    env = worker_env(server, DATABASE=str(db))
    cmd = [
        sys.executable, "-m", "flask", "--app", "app", "jetstream-worker", "slow_handlers:handle",
        "--stream", stream.name, "--consumer", cons.name, "--concurrency", "4", "--shutdown-timeout", "4",
    ]  # fmt: skip
    run_scenario(js, stream, subj, cons, cmd, app_dir, env, Table(db, "handled"))
