"""A Spark standalone cluster on loopback from the pip ``pyspark`` install: a
master and workers, each its own JVM, for the cluster tests.

Every process of the cluster (master, worker JVMs, the executor JVMs a worker
starts, their Python daemons and workers) inherits ``JSS_SPARK_CLUSTER=<token>:
<role>`` in its environment: that is how a worker is killed as a machine dies
(all of its processes, whatever process group pyspark's daemon moved to) and
how teardown proves nothing is left.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from jetstream_sync.testing import free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
ENV_KEY = "JSS_SPARK_CLUSTER"


class StandaloneCluster:
    """One master and numbered workers (one core each) under ``root``."""

    def __init__(self, root: Path, worker_memory: str = "1g") -> None:
        import pyspark

        self.root = root
        self.home = Path(pyspark.__file__).parent
        self.token = f"jss-{uuid.uuid4().hex}"
        self.worker_memory = worker_memory
        self.master_port, self.ui_port = free_port(), free_port()
        self.master: Optional[subprocess.Popen] = None
        self.workers: Dict[int, subprocess.Popen] = {}
        (root / "conf").mkdir(parents=True, exist_ok=True)  # empty: no spark-env.sh or defaults from elsewhere

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _launch(self, role: str, main: str, *args: str) -> subprocess.Popen:
        env = dict(
            os.environ,
            SPARK_HOME=str(self.home),
            SPARK_CONF_DIR=str(self.root / "conf"),
            SPARK_LOG_DIR=str(self.root / "logs"),
            SPARK_LOCAL_DIRS=str(self.root / "local"),  # a killed executor's scratch goes with tmp_path, not /tmp
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY="256m",
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
            PYSPARK_PYTHON=sys.executable,
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            **{ENV_KEY: f"{self.token}:{role}"},
        )
        log = open(self.root / f"{role}.log", "ab")
        try:
            # spark-class execs the JVM: the Popen's pid is the JVM's.
            return subprocess.Popen([str(self.home / "bin" / "spark-class"), main, *args], env=env, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()

    def start_master(self) -> None:
        self.master = self._launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(self.master_port), "--webui-port", str(self.ui_port))

    def start_worker(self, i: int) -> None:
        work = self.root / f"worker{i}"
        work.mkdir(exist_ok=True)
        self.workers[i] = self._launch(
            f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(free_port()),
            "--webui-port", str(free_port()), "--cores", "1", "--memory", self.worker_memory,
            "--work-dir", str(work), self.url,
        )

    def state(self) -> Dict[str, Any]:
        """The master's JSON status page (workers, apps)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as answer:
            return json.loads(answer.read())  # type: ignore[no-any-return]

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.state()["workers"] if w["state"] == "ALIVE")
        except (OSError, ValueError, http.client.HTTPException):  # the master is not (fully) up yet
            return 0

    def wait_workers(self, n: int, timeout: float = 180.0) -> None:
        """Until ``n`` workers are registered and alive (JVMs on a loaded 2-core machine)."""
        try:
            wait_until(lambda: self.alive_workers() == n, timeout=timeout, interval=0.5)
        except AssertionError:
            raise AssertionError(f"{n} workers not alive within {timeout}s:\n{self.log_tail()}") from None

    def processes(self, role: Optional[str] = None) -> List[int]:
        """Live processes of this cluster (of one role: "master", "worker0" …)."""
        want = f"{ENV_KEY}={self.token}:{role or ''}".encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environ = f.read()  # empty for a zombie: it is dead
            except OSError:  # gone, or another user's
                continue
            if any(var.startswith(want) for var in environ.split(b"\0")):
                found.append(int(entry))
        return found

    def _kill(self, role: Optional[str], timeout: float = 60.0) -> None:
        """SIGKILL every process of ``role`` (all, if None) until none is left."""

        def gone() -> bool:
            for pid in self.processes(role):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for name, proc in [("master", self.master), *((f"worker{i}", p) for i, p in self.workers.items())]:
                if proc is not None and role in (None, name):
                    proc.poll()  # reap our own children
            return not self.processes(role)

        wait_until(gone, timeout=timeout, interval=0.1)

    def kill_worker(self, i: int) -> None:
        """A machine lost: the worker's JVM, its executor and Python processes, by SIGKILL."""
        self._kill(f"worker{i}")
        self.workers.pop(i).wait(timeout=30)

    def stop(self) -> None:
        """Kill everything; fails when a process of the cluster outlives it."""
        try:
            self._kill(None)
        finally:
            for proc in [self.master, *self.workers.values()]:
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=30)
        assert not self.processes(), f"processes of the cluster left: {self.processes()}"

    def log_tail(self, chars: int = 3000) -> str:
        return "".join(f"--- {p.name}\n{p.read_text(errors='replace')[-chars:]}\n" for p in sorted(self.root.glob("*.log")))


def executors(spark: Any) -> int:
    """Executors registered with this driver (its statusTracker lists the driver too)."""
    return len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1


def wait_for_file(path: Path, timeout: float, failed: Any = None) -> str:
    """The text of ``path`` once it exists; ``failed()`` is checked meanwhile (a query's exception)."""

    def there() -> Optional[str]:
        problem = failed() if failed is not None else None
        if problem is not None:
            raise AssertionError(f"failed while waiting for {path.name}: {problem}")
        return path.read_text() if path.exists() else None

    return wait_until(there, timeout=timeout, interval=0.05)


def trap(marker: str, release: str, at: int) -> Any:
    """A UDF on ``seq``: the first task that reaches sequence ``at`` writes
    which worker runs it to ``marker`` and waits there (to be killed); a retry
    finds the marker and passes. So the test knows a batch is executing on
    that worker, and it stays mid-batch until the kill."""

    def check(seq):  # no type hints: pyspark would try to infer an Arrow UDF from them
        if seq == at:
            import os
            import time

            tmp = f"{marker}.{os.getpid()}"
            with open(tmp, "w") as f:
                f.write(os.environ.get("JSS_SPARK_CLUSTER", "").rpartition(":")[2])
            try:
                os.link(tmp, marker)  # atomic: one task claims the trap, with its content
            except FileExistsError:
                return seq
            finally:
                os.unlink(tmp)
            deadline = time.monotonic() + 300
            while not os.path.exists(release):
                if time.monotonic() > deadline:
                    raise RuntimeError("the worker running this task was not killed")
                time.sleep(0.05)
        return seq

    return check


def session_options() -> Dict[str, str]:
    """The settings every test session shares: loopback only, no UI, quiet."""
    # Workers must run this interpreter (with pyarrow and this package); all traffic on loopback.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }
