"""Unique ids from any thread: inbox names, generated consumer names, batch
and object ids (nats-py's NUID: 22 base-62 characters).

nats-py's ``NUID`` is not thread-safe: two threads in ``next()`` at once can
read the same sequence and return the same id, and a duplicate inbox would
route one caller's reply to another. So every thread has a NUID of its own
(``threading.local``; a greenlet's own under gevent): no lock on the way, and
ids of two threads never meet, their 12-character random prefixes differing as
those of two processes do. A forked child starts afresh, so it never continues
its parent's sequence. nats-py's own NUID of a connection is left to the loop
thread.
"""

from __future__ import annotations

import threading

from nats.nuid import NUID

from . import fork as _fork

__all__ = ["next_nuid"]

_local = threading.local()  # .nuid: the thread's NUID, made on its first id


def next_nuid() -> str:
    """A unique id (22 characters), from any thread."""
    try:
        nuid: NUID = _local.nuid
    except AttributeError:
        nuid = _local.nuid = NUID()
    return nuid.next().decode()


@_fork.on_child
def _after_fork_in_child() -> None:
    global _local
    _local = threading.local()  # the child's one thread draws a new prefix
