"""Child processes (the kit's nats-servers) that end with the process that started them.

A server must not outlive the Python process that started it: a CI job that
times out kills pytest with SIGKILL, and every server it had would otherwise
keep running, a few more at each timeout.

- Linux: the child asks the kernel for SIGKILL when its parent dies
  (``prctl(PR_SET_PDEATHSIG)`` between fork and exec, kept across exec). The
  kernel sends it when the *thread* that forked the child ends, so children
  are forked only by threads that live as long as the process: the main
  thread when it is the caller, else one daemon launcher thread. A server
  started from a short-lived thread outlives that thread.
- Everywhere: children still running when the interpreter exits normally are
  killed by an ``atexit`` hook. Elsewhere than Linux that is all there is: a
  process killed with SIGKILL leaves its children running.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from typing import IO, Callable, List, Optional, Sequence

__all__ = ["dies_with_parent", "end_children", "spawn"]

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
HANDOFF_TIMEOUT = 30.0  # seconds a caller waits for the launcher thread to fork its child


def _load_prctl() -> Optional[Callable[..., int]]:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return None
    return prctl


_PRCTL = _load_prctl()


def dies_with_parent() -> bool:
    """Whether a child started by :func:`spawn` is killed when this process
    dies, SIGKILL included (Linux); elsewhere only a normal exit stops it."""
    return _PRCTL is not None


def spawn(cmd: Sequence[str], output: IO[bytes]) -> "subprocess.Popen[bytes]":
    """Start ``cmd`` (stdout and stderr to ``output``) as a child that ends
    with this process; callable from any thread. Raises what ``Popen`` raises,
    or RuntimeError when the launcher thread did not fork within
    ``HANDOFF_TIMEOUT`` seconds."""
    parent = os.getpid()

    def start() -> "subprocess.Popen[bytes]":
        preexec = _die_with(parent) if _PRCTL is not None else None
        return subprocess.Popen(list(cmd), stdout=output, stderr=subprocess.STDOUT, preexec_fn=preexec)

    if _PRCTL is None or threading.current_thread() is threading.main_thread():
        proc = start()  # the main thread lives as long as the process
    else:
        proc = _launcher().fork(start)
    _children.add(proc)
    return proc


def _die_with(parent: int) -> Callable[[], None]:
    prctl = _PRCTL
    assert prctl is not None

    def in_child() -> None:  # between fork and exec: nothing that can block or raise
        prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
        if os.getppid() != parent:  # the parent died before the line above: no signal will come
            os._exit(1)

    return in_child


class _Fork:
    """One child to fork on the launcher thread; the caller waits for it, bounded."""

    def __init__(self, start: Callable[[], "subprocess.Popen[bytes]"]) -> None:
        self._start = start
        self._lock = threading.Lock()  # run() and an abandoning caller: one of them wins
        self._done = threading.Event()
        self._abandoned = False
        self._proc: Optional["subprocess.Popen[bytes]"] = None
        self._error: Optional[BaseException] = None

    def run(self) -> None:
        """Launcher thread only."""
        with self._lock:
            if self._abandoned:
                return
            try:
                self._proc = self._start()
            except BaseException as exc:  # handed to the caller
                self._error = exc
            self._done.set()

    def result(self, timeout: float) -> "subprocess.Popen[bytes]":
        if not self._done.wait(timeout):
            with self._lock:
                if not self._done.is_set():
                    self._abandoned = True
                    raise RuntimeError(f"the test kit's launcher thread did not start the process within {timeout}s")
        if self._error is not None:
            raise self._error
        assert self._proc is not None
        return self._proc


class _Launcher:
    """A daemon thread that forks children and lives as long as the process."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._forks: "queue.SimpleQueue[_Fork]" = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="jetstream-sync-launcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self._forks.get().run()

    def fork(self, start: Callable[[], "subprocess.Popen[bytes]"]) -> "subprocess.Popen[bytes]":
        job = _Fork(start)
        self._forks.put(job)
        return job.result(HANDOFF_TIMEOUT)


_lock = threading.Lock()
_current: Optional[_Launcher] = None


def _launcher() -> _Launcher:
    """This process's launcher; a forked child (which has no copy of the
    parent's threads) starts its own."""
    global _current
    with _lock:
        if _current is None or _current.pid != os.getpid():
            _current = _Launcher()
        return _current


class _Children:
    """The children spawned by this process, killed at a normal interpreter exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: List["subprocess.Popen[bytes]"] = []
        self._owner: Optional[int] = None

    def add(self, proc: "subprocess.Popen[bytes]") -> None:
        with self._lock:
            if self._owner != os.getpid():  # first child of this process (or of a forked child)
                self._owner, self._procs = os.getpid(), []
                atexit.register(self.kill_all, os.getpid())
            self._procs = [p for p in self._procs if p.poll() is None] + [proc]

    def end_own(self) -> None:
        """kill_all() now, for this process's children: a forked child's copy of
        its parent's list is left alone by kill_all's own check of the owner."""
        if self._owner is not None:
            self.kill_all(self._owner)

    def kill_all(self, owner: int) -> None:
        """At exit: SIGKILL every child still running (a paused one too) and reap it."""
        if os.getpid() != owner:
            return  # a forked child exiting: its parent's servers are not its own
        with self._lock:
            procs, self._procs = self._procs, []
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not refused
                    pass


_children = _Children()


def end_children() -> None:
    """Kill (SIGKILL) and reap every child this process spawned that still
    runs: what a normal exit does anyway, for whoever must run after it (the
    removal of their stores, :mod:`.scratch`)."""
    _children.end_own()
