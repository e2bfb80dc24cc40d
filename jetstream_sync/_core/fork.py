"""The one fork hook: what a forked child does with what it inherited.

A child of ``os.fork()`` inherits every Client of its parent, with the
parent's socket and a loop thread that does not exist in the child. Objects
made before the fork must refuse use there and never touch that socket. This
module owns ``os.register_at_fork`` and the bookkeeping of it (this
process's pid and fork generation); the modules that keep per-process state
register a callback with :func:`on_child`.

Order: in the child, right after the fork, the callbacks run in the order
they were registered. A module registers at import, after the modules it
imports have, so lower layers run first: loop threads (``loop``), then
connections (``connection``), then the shared clients (``worker.shared``).
A callback must not block or do I/O; one that raises is logged and the rest
still run.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, List

from .logfields import log_fields

__all__ = ["on_child", "check_pid", "generation", "pid"]

_log = logging.getLogger("jetstream_sync._connection")  # the logger name users configure, kept from before the move

# Written only by _in_child: at the fork (the child has one thread then), or
# at the first check_pid() of a child the hook missed; read anywhere without a
# lock (a lock held by another thread at the fork would stay held in the
# child). Objects made before a fork keep the generation they were made in
# and compare it: one int compare, cheap on hot paths.
generation = 0
# This process, as the hook last saw it: getpid() differs in a child whose
# fork the hook did not see (a fork made from C that bypassed it).
pid = os.getpid()

_callbacks: List[Callable[[], None]] = []


def on_child(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback()`` in every forked child, after the fork, after the
    callbacks registered before it. Returns ``callback`` (usable as a decorator)."""
    _callbacks.append(callback)
    return callback


def check_pid() -> None:
    """Run the child callbacks now if this process is a child the hook did
    not see (os.register_at_fork missing, or a fork made from C that
    bypassed it); otherwise nothing (one getpid)."""
    if os.getpid() != pid:
        _in_child()


def _in_child() -> None:
    global generation, pid
    generation += 1
    pid = os.getpid()
    for callback in list(_callbacks):
        try:
            callback()
        except Exception:  # the others must still run: each guards the parent's socket
            _log.exception("after-fork callback %r failed", callback, extra=log_fields())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_child)
