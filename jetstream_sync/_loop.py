"""The background event-loop thread behind every blocking call.

One ``LoopThread`` per Client. It starts lazily (importing the package starts
nothing), is a daemon (a forgotten close() never hangs interpreter exit) and is
the only thread that touches nats-py objects. User threads hand it coroutines
with :meth:`LoopThread.run` or callbacks with :meth:`LoopThread.call_soon`.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import itertools
import logging
import os
import sys
import threading
import weakref
from typing import Any, Awaitable, Callable, Coroutine, Optional, TypeVar

from . import errors

__all__ = ["LoopThread", "register_exit_hook"]

T = TypeVar("T")
_log = logging.getLogger("jetstream_sync")
_counter = itertools.count(1)
_live: "weakref.WeakSet[LoopThread]" = weakref.WeakSet()
_exit_hooks: "list[weakref.ReferenceType[Any]]" = []
_exit_registered = False
_exit_lock = threading.Lock()


class LoopThread:
    """An asyncio loop running forever on its own daemon thread."""

    def __init__(self, name: str = "jetstream-sync") -> None:
        self._name = f"{name}-loop-{next(_counter)}"
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._ident: Optional[int] = None
        self._pid = os.getpid()
        self._forked = False
        self._stopped = False
        # Futures of callers blocked in run(); cancelled if the loop ends first.
        self._waiting: "set[concurrent.futures.Future[Any]]" = set()
        _live.add(self)

    # -- state -------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def started(self) -> bool:
        return self._loop is not None

    def in_loop_thread(self) -> bool:
        return self._ident is not None and threading.get_ident() == self._ident

    def check_usable(self) -> None:
        """Raise unless a blocking call may be made from this thread now."""
        if self._forked or os.getpid() != self._pid:
            raise errors.ForkedProcessError(
                "this Client was created in process %d and cannot be used after "
                "os.fork(); create a new Client in the child process" % self._pid
            )
        if self.in_loop_thread():
            raise errors.DeadlockError(
                "blocking jetstream_sync call made from the client's event-loop thread "
                "(for example inside an asyncio callback); it would deadlock"
            )
        if self._stopped:
            raise errors.ConnectionClosedError("the client is closed")

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop, started on first use."""
        loop = self._loop
        if loop is not None:
            return loop
        with self._lock:
            if self._loop is None:
                self._start()
            assert self._loop is not None
            return self._loop

    def _start(self) -> None:
        if sys.is_finalizing():
            raise errors.ConnectionClosedError("interpreter is shutting down")
        _register_atexit()
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        thread = threading.Thread(target=self._main, args=(loop, ready), name=self._name, daemon=True)
        thread.start()
        ready.wait()
        self._thread = thread
        self._loop = loop

    def _main(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        self._ident = threading.get_ident()
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            try:
                _cancel_all(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
            except Exception:  # pragma: no cover - best effort at teardown
                pass
            loop.close()
            for fut in list(self._waiting):
                fut.cancel()

    # -- calls from user threads --------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T], timeout: Optional[float] = None) -> T:
        """Run ``coro`` on the loop and block for its result.

        On ``timeout`` the loop-side work is cancelled and
        :class:`jetstream_sync.TimeoutError` raised. On KeyboardInterrupt (or
        any exception in the waiting thread) the work is cancelled too, so
        nothing keeps running for a caller that is gone.
        """
        try:
            self.check_usable()
            loop = self.loop
        except BaseException:
            coro.close()
            raise
        try:
            fut = asyncio.run_coroutine_threadsafe(coro, loop)
        except RuntimeError:  # loop closed between the check and now
            coro.close()
            raise errors.ConnectionClosedError("the client is closed") from None
        self._waiting.add(fut)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            if fut.done():
                raise  # the coroutine itself raised a TimeoutError
            fut.cancel()
            raise errors.TimeoutError("operation timed out after %.3fs" % timeout) from None
        except concurrent.futures.CancelledError:
            raise errors.ConnectionClosedError("operation cancelled: the client is closing") from None
        except BaseException:
            fut.cancel()
            raise
        finally:
            self._waiting.discard(fut)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Schedule ``fn(*args)`` on the loop without waiting (never blocks)."""
        if self._forked or os.getpid() != self._pid:
            raise errors.ForkedProcessError("this Client cannot be used after os.fork()")
        if self.in_loop_thread():
            self.loop.call_soon(fn, *args)
            return
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # loop closed under us
            raise errors.ConnectionClosedError("the client is closed") from None

    def spawn(self, coro: Awaitable[Any]) -> None:
        """Start ``coro`` as a task on the loop, from any thread."""
        self.call_soon(self._create_task, coro)

    def _create_task(self, coro: Any) -> None:
        task = self.loop.create_task(coro)
        task.add_done_callback(_log_task_error)

    # -- shutdown -----------------------------------------------------------

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop (cancelling what still runs) and join its thread."""
        if self._stopped:
            return
        self._stopped = True
        if self._forked or os.getpid() != self._pid:
            return  # the child has no loop thread; never touch the parent's
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self.in_loop_thread():
            loop.stop()
            return
        try:
            loop.call_soon_threadsafe(loop.stop)
        except RuntimeError:
            pass
        thread.join(timeout)

    def _after_fork_in_child(self) -> None:
        self._forked = True
        # The thread does not exist here; drop references without any I/O.
        self._thread = None
        self._ident = None
        self._lock = threading.Lock()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


def _log_task_error(task: "asyncio.Task[Any]") -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        _log.error("jetstream_sync background task failed", exc_info=exc)


def _after_fork_in_child() -> None:
    for lt in list(_live):
        lt._after_fork_in_child()
    _exit_hooks.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def register_exit_hook(obj: Any) -> None:
    """Call ``obj._close_at_exit()`` at interpreter exit if it is still alive.

    Used by Client so that queued acks and publishes are flushed and the
    connection closed when the user forgot close().
    """
    with _exit_lock:
        _exit_hooks.append(weakref.ref(obj))


def _register_atexit() -> None:
    global _exit_registered
    with _exit_lock:
        if not _exit_registered:
            atexit.register(_at_exit)
            _exit_registered = True


def _at_exit() -> None:
    hooks = list(_exit_hooks)
    _exit_hooks.clear()
    for ref in hooks:
        obj = ref()
        if obj is None:
            continue
        try:
            obj._close_at_exit()
        except Exception:  # pragma: no cover - exit must not fail
            _log.debug("error closing client at exit", exc_info=True)
    for lt in list(_live):
        lt.stop(timeout=1.0)
