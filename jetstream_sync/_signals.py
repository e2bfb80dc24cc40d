"""SIGTERM (and friends) as a graceful shutdown: drain, send queued acks, close.

Process managers (Kubernetes, gunicorn, systemd, Django/Celery-style workers)
stop a worker with SIGTERM, whose default action kills the process at once:
acks still queued are lost and buffered messages wait out their AckWait.
:func:`install_signal_handlers` replaces that with a bounded, graceful end.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any, Callable, Iterable, Optional

from . import options
from ._connection import live_connections

__all__ = ["install_signal_handlers"]

_log = logging.getLogger("jetstream_sync.signals")
_shutting_down = threading.Event()


def install_signal_handlers(
    signals: Iterable[int] = (signal.SIGTERM,),
    *,
    timeout: float = 10.0,
    exit: bool = True,
    on_shutdown: Optional[Callable[[int], Any]] = None,
) -> None:
    """On each of ``signals`` (default SIGTERM), end every Client of this process gracefully.

    Every ``messages()`` / ``consume()`` context is drained (no new pulls;
    what was received is still handed out, so a loop over it ends by itself
    and a ``consume()`` handler finishes its message), queued acks are sent,
    and every Client is closed — all within ``timeout`` seconds; whatever is
    left then is NAK'd by the close. With ``exit=True`` the process then ends
    the way the signal would have ended it (exit status 128 + signal number).
    A second signal during the shutdown ends the process at once.
    ``on_shutdown(signum)`` runs first, on the shutdown thread. Call it from
    the main thread, after forking workers (it applies to this process).
    """
    limit = options.duration("timeout", timeout)
    sigs = list(signals)

    def handler(signum: int, frame: Any) -> None:
        if _shutting_down.is_set():
            return
        _shutting_down.set()
        if exit:
            signal.signal(signum, signal.SIG_DFL)  # a second signal ends the process at once
        thread = threading.Thread(
            target=_shutdown, args=(signum, limit, exit, on_shutdown), name="jetstream-sync-shutdown", daemon=True
        )
        thread.start()

    for sig in sigs:
        signal.signal(sig, handler)


def _shutdown(signum: int, timeout: float, exit: bool, on_shutdown: Optional[Callable[[int], Any]]) -> None:
    deadline = time.monotonic() + timeout
    _log.info("signal %d: draining and closing every client (within %.1fs)", signum, timeout)
    try:
        if on_shutdown is not None:
            on_shutdown(signum)
    except Exception:
        _log.exception("on_shutdown raised")
    conns = live_connections()
    events = [e for c in conns for e in c.drain_resources()]
    for event in events:
        event.wait(max(deadline - time.monotonic() - timeout * 0.2, 0.0))
    for conn in conns:
        try:
            conn.close(timeout=max(deadline - time.monotonic(), 0.5))
        except Exception:
            _log.exception("closing a client after signal %d failed", signum)
    if exit:
        os.kill(os.getpid(), signum)  # the default action now: end as the signal would
