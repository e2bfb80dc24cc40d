"""Connection events and the user's connection callbacks.

Listeners (the engines' reconnect handling, for one) are called on the loop
thread at each event and must not block. The user's callbacks (``error_cb``,
``disconnected_cb`` ...) run in order off the loop thread, on a
callback thread of their own, unless they are coroutine functions (then
they are awaited on the loop, as nats-py would).
"""

from __future__ import annotations

import inspect
import logging
import queue
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from .loop import gevent_patched
from .logfields import log_fields
from .nats_errors import slow_consumer

__all__ = ["EVENTS", "Events", "CallbackThread", "log_event"]

_log = logging.getLogger("jetstream_sync._connection")  # the logger name users configure, kept from before the move

EVENTS = ("disconnected", "reconnected", "closed")
SLOW_WARNING_EVERY = 1.0  # seconds between two warnings of one slow subscription that nats-py reports


class Events:
    """The listeners of one connection's events and its user callbacks."""

    def __init__(self, name: str) -> None:
        self._name = name  # the callback thread's, with "-callbacks"
        # Listeners are added and removed from the loop thread and user
        # threads; a list's append/remove are atomic, and tell() walks a copy.
        self._listeners: Dict[str, List[Callable[[], None]]] = {e: [] for e in EVENTS}
        self._user: Dict[str, Callable[..., Any]] = {}  # set once, before the connect
        self._thread: Optional[CallbackThread] = None
        self._slow_warned: Dict[int, float] = {}  # sid -> when its slow consumer was last warned of (loop thread)

    def set_user_callbacks(self, callbacks: Dict[str, Callable[..., Any]]) -> None:
        """Before the connect: the user's callbacks by option name (``error_cb`` ...)."""
        self._user = dict(callbacks)
        if any(not inspect.iscoroutinefunction(cb) for cb in self._user.values()):
            # Made here, on the caller's side: under gevent it must belong to the caller's hub.
            self._thread = CallbackThread(f"{self._name}-callbacks")

    def has_user_callback(self, name: str) -> bool:
        return name in self._user

    def add_listener(self, event: str, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn()`` on the loop thread at each ``event``; returns a remover."""
        listeners = self._listeners[event]
        listeners.append(fn)

        def remove() -> None:
            try:
                listeners.remove(fn)
            except ValueError:
                pass

        return remove

    def tell(self, event: str) -> None:
        """Loop thread: call the listeners of ``event``; one that raises is logged."""
        for listener in list(self._listeners.get(event, ())):
            try:
                listener()
            except Exception:
                _log.exception("%s listener failed", event, extra=log_fields())

    async def call_user(self, name: str, *args: Any) -> None:
        """Loop thread: the user's callback ``name`` (if any) with ``args``."""
        cb = self._user.get(name)
        if cb is None:
            return
        if inspect.iscoroutinefunction(cb):
            try:
                await cb(*args)
            except Exception:
                _log.exception("%s raised", name, extra=log_fields())
            return
        if self._thread is None:
            self._thread = CallbackThread(f"{self._name}-callbacks")
        self._thread.submit(cb, args)

    def log_error(self, exc: BaseException, err: BaseException, server: Optional[str]) -> None:
        """Loop thread: log ``exc``, an error nats-py passed to its error
        callback (``err``: as translated). A slow consumer is a warning with
        the subscription's subject, once a second per subscription (nats-py
        reports each message it drops; the rest at DEBUG); others are at
        DEBUG (error_cb gets them)."""
        slow = slow_consumer(exc)
        if slow is None:
            _log.debug("connection error: %r", exc, extra=log_fields(server=server))
            return
        now = time.monotonic()
        last = self._slow_warned.get(slow.sid)
        warn = last is None or now - last >= SLOW_WARNING_EVERY
        if warn:
            self._slow_warned[slow.sid] = now
        _log.log(logging.WARNING if warn else logging.DEBUG, "%s", err,
                 extra=log_fields(server=server, subject=slow.subject))  # fmt: skip

    def stop(self) -> None:
        """The callback thread ends once it has run what was submitted."""
        if self._thread is not None:
            self._thread.stop()


def log_event(event: str, url: Optional[str], closing: bool) -> None:
    """Connection events at INFO, an unasked-for disconnect at WARNING.
    ``url`` is the server last connected to (password redacted), None before
    a first connect: a failed one is told by NoServersError instead."""
    if event == "reconnected":  # also the first connect of retry_on_failed_connect
        _log.info("reconnected to %s", url, extra=log_fields(server=url))
    elif url is None:
        return
    elif event == "disconnected":
        _log.log(logging.INFO if closing else logging.WARNING, "disconnected from %s", url,
                 extra=log_fields(server=url))
    elif event == "closed":
        _log.info("connection to %s closed", url, extra=log_fields(server=url))


class CallbackThread:
    """Runs user connection callbacks off the loop thread, in order.

    Under gevent it is a greenlet of the hub that made it; the loop thread
    (a real OS thread) hands it items through that hub's thread-safe queue.
    """

    def __init__(self, name: str) -> None:
        self._queue: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._hub: Any = None
        if gevent_patched():
            import gevent

            self._hub = gevent.get_hub()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], args: Any) -> None:
        self._put((fn, args))

    def stop(self) -> None:
        self._put(None)

    def _put(self, item: Any) -> None:
        hub = self._hub
        if hub is None:
            self._queue.put(item)
        else:  # from any thread, the hub's own too: no thread ident to compare (they are reused)
            hub.loop.run_callback_threadsafe(self._queue.put, item)

    def _main(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                _log.exception("connection callback raised", extra=log_fields())
