"""Temporary directories that do not outlive the process that made them (POSIX).

A nats-server's store, a benchmark's build or a soak's cluster each take a
directory; a process that forgets to remove one, or is killed with SIGKILL
(a CI timeout), would leave it in the temporary directory for good, one more
at every run. So each process keeps its directories under one root of its
own, ``<tmp>/jss-run-XXXX``:

- at a normal exit the root is removed, after the process's nats-servers are
  killed (:mod:`.launcher`), so that none writes into it meanwhile;
- while the process lives it holds an advisory lock (``flock``) on the root's
  ``.owner`` file; the kernel drops the lock when the process ends, however it
  ends. The first directory a process makes removes every other root whose
  lock it can take: their owners are gone.

A root is renamed into place only once its lock is held, so a sweep never
takes a root that is still being made. A forked child shares its parent's
lock and root: it does not remove them at its exit, and its sweep cannot take
the lock it shares.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import tempfile
import threading
from typing import Optional

from .launcher import end_children

__all__ = ["make_dir", "sweep"]

ROOT_PREFIX = "jss-run-"
OWNER_FILE = ".owner"
_MAKING_PREFIX = ".jss-making-"  # not a root yet: the sweep leaves it alone


class _Root:
    """This process's root and the lock that says it is alive."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        making = tempfile.mkdtemp(prefix=_MAKING_PREFIX)
        fd = os.open(os.path.join(making, OWNER_FILE), os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else holds it
        self.path = os.path.join(os.path.dirname(making), ROOT_PREFIX + os.path.basename(making)[len(_MAKING_PREFIX):])
        os.rename(making, self.path)
        self._fd: Optional[int] = fd
        atexit.register(self.remove)

    def remove(self) -> None:
        """At exit: end the servers that may write here, then remove the root."""
        if os.getpid() != self.pid:
            return  # a forked child exiting: the root is its parent's
        end_children()
        shutil.rmtree(self.path, ignore_errors=True)
        self.release()

    def release(self) -> None:
        """Let go of the lock (its file may be gone already)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


_lock = threading.Lock()
_root: Optional[_Root] = None


def make_dir(prefix: str) -> str:
    """A new directory ``<root>/<prefix>XXXX``, removed with this process's
    root at exit (see the module's docstring). The first call of a process
    sweeps the roots of processes that have ended."""
    global _root
    with _lock:
        if _root is None or _root.pid != os.getpid():
            sweep()
            _root = _Root()
        elif not os.path.isdir(_root.path):  # removed under us (a tmp cleaner): a new one
            _root.release()
            _root = _Root()
        root = _root.path
    return tempfile.mkdtemp(prefix=prefix, dir=root)


def sweep(tmp: Optional[str] = None) -> int:
    """Remove the roots under ``tmp`` (default the temporary directory) whose
    owner has ended: its lock can be taken, or its lock file is gone (a removal
    cut short). Returns how many were removed."""
    tmp = tmp or tempfile.gettempdir()
    removed = 0
    try:
        entries = list(os.scandir(tmp))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(ROOT_PREFIX) or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            fd: Optional[int] = os.open(os.path.join(entry.path, OWNER_FILE), os.O_RDWR)
        except FileNotFoundError:
            fd = None
        except OSError:
            continue  # another user's: not ours to judge
        try:
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # held: its owner lives
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
        finally:
            if fd is not None:
                os.close(fd)
    return removed
