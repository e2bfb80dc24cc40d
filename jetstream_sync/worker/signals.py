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
from typing import Any, Callable, Iterable, List, Optional

from .. import options
from .._core.connection import live_connections
from .._core.drain import drain_and_close
from .._core.logfields import log_fields

__all__ = ["install_signal_handlers", "catch_signals"]

_log = logging.getLogger("jetstream_sync._signals")  # the logger name users configure, kept from before the move
_shutting_down = threading.Event()


def install_signal_handlers(
    signals: Iterable[int] = (signal.SIGTERM,),
    *,
    timeout: float = 10.0,
    exit: bool = True,
    on_shutdown: Optional[Callable[[int], Any]] = None,
) -> None:
    """On each of ``signals`` (default SIGTERM), end every Client of this process gracefully.

    Every Client is drained as by ``Client.drain()``: every ``messages()`` /
    ``consume()`` context is drained (no new pulls; what was received is
    still handed out, so a loop over it ends by itself and a ``consume()``
    handler finishes its message), every service answers the requests it
    received and every subscription callback handles what arrived; then
    queued acks are sent and every Client is closed — all within ``timeout``
    seconds; whatever is left then is NAK'd by the close (a service answers
    its queued requests with 503). ``on_shutdown(signum)`` runs first, on
    the shutdown thread. Call it once, from the main thread, in the process
    that consumes (after forking workers).

    A handler that was installed before (a framework's own graceful stop,
    such as gunicorn's worker) is chained: it runs too, and ends the process
    its own way. Otherwise, with ``exit=True``, the process ends as the
    signal would have ended it (exit status 128 + signal number), and a
    second signal during the shutdown ends it at once. Under gunicorn prefer
    ``client.drain()`` in its ``worker_exit`` hook: gunicorn finishes the
    requests in flight first.
    """
    limit = options.duration("timeout", timeout)
    sigs = list(signals)
    previous = {sig: signal.getsignal(sig) for sig in sigs}
    trigger = threading.Event()
    received: List[int] = []

    def wait_for_signal() -> None:
        trigger.wait()
        signum = received[0]
        chained = callable(previous.get(signum))
        _shutdown(signum, limit, exit and not chained, on_shutdown)

    # Started now, not in the handler: a signal handler must not block, and
    # under gevent starting a thread does (its hub runs the handler).
    threading.Thread(target=wait_for_signal, name="jetstream-sync-shutdown", daemon=True).start()

    def handler(signum: int, frame: Any) -> None:
        first = not _shutting_down.is_set()
        if first:
            _shutting_down.set()
            received.append(signum)
            trigger.set()
        before = previous.get(signum)
        if callable(before):
            before(signum, frame)  # the framework's own graceful stop
        elif first and exit:
            signal.signal(signum, signal.SIG_DFL)  # a second signal ends the process at once

    for sig in sigs:
        signal.signal(sig, handler)


def _shutdown(signum: int, timeout: float, exit: bool, on_shutdown: Optional[Callable[[int], Any]]) -> None:
    deadline = time.monotonic() + timeout
    _log.info("signal %d: draining and closing every client (within %.1fs)", signum, timeout, extra=log_fields())
    try:
        if on_shutdown is not None:
            on_shutdown(signum)
    except Exception:
        _log.exception("on_shutdown raised", extra=log_fields())
    drain_and_close(live_connections(), max(deadline - time.monotonic(), 0.0))
    if exit:
        os.kill(os.getpid(), signum)  # the default action now: end as the signal would


def catch_signals(signals: Iterable[int], on_signal: Callable[[int], Any]) -> Callable[[], None]:
    """Call ``on_signal(signum)`` (it must not block) on the first of ``signals``;
    a second one gets the signal's default action, ending the process at once.
    Main thread only. Returns a function that puts the previous handlers back."""
    sigs = list(signals)
    previous = {sig: signal.getsignal(sig) for sig in sigs}
    fired: List[int] = []

    def handler(signum: int, frame: Any) -> None:
        if not fired:
            fired.append(signum)
            for sig in sigs:
                signal.signal(sig, signal.SIG_DFL)  # the next one ends the process
            on_signal(signum)

    for sig in sigs:
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, before in previous.items():
            signal.signal(sig, before if before is not None else signal.SIG_DFL)

    return restore
