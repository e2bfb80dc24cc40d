"""The background event-loop thread behind every blocking call.

One ``LoopThread`` per Client. It starts lazily (importing the package starts
nothing), is a daemon (a forgotten close() never hangs interpreter exit) and is
the only thread that touches nats-py objects. User threads hand it coroutines
with :meth:`LoopThread.run` or callbacks with :meth:`LoopThread.call_soon`.

Under gevent monkey-patching ``threading.Thread`` is a greenlet, which cannot
host a second asyncio loop; :class:`_GreenLoopThread` (chosen automatically)
runs the loop on a real OS thread and lets callers wait cooperatively.
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
import time
import weakref
from typing import Any, Awaitable, Callable, Coroutine, Optional, TypeVar

from .. import errors
from . import fork as _fork
from .logfields import log_fields

__all__ = ["LoopThread", "register_exit_hook"]

T = TypeVar("T")
_log = logging.getLogger("jetstream_sync._loop")  # the logger name users configure, kept from before the move
_counter = itertools.count(1)
_live: "weakref.WeakSet[LoopThread]" = weakref.WeakSet()
_exit_hooks: "list[weakref.ReferenceType[Any]]" = []
_exit_registered = False
_exit_lock = threading.Lock()


class LoopThread:
    """An asyncio loop running forever on its own daemon thread."""

    def __new__(cls, *args: Any, **kwargs: Any) -> "LoopThread":
        if cls is LoopThread and "gevent" in sys.modules and gevent_patched():
            cls = _GreenLoopThread
        return super().__new__(cls)

    def __init__(self, name: str = "jetstream-sync") -> None:
        _fork.check_pid()  # a fork the hook missed: the parent's objects are marked before this one is made
        self._name = f"{name}-loop-{next(_counter)}"
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._ident: Optional[int] = None
        self._created_in = os.getpid()  # for the error text; fork.pid is what is compared
        self._forked = False  # set in a forked child (fork.on_child)
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
        """True on the loop thread while it runs. Its ident is cleared as it
        ends (the system reuses a dead thread's ident), so no later thread
        passes for it."""
        return self._ident is not None and threading.get_ident() == self._ident

    def check_usable(self) -> None:
        """Raise unless a blocking call may be made from this thread now."""
        if self._forked or os.getpid() != _fork.pid:
            raise errors.ForkedProcessError(
                "this Client was created in process %d and cannot be used after "
                "os.fork(); create a new Client in the child process" % self._created_in
            )
        if self.in_loop_thread():
            raise errors.DeadlockError(
                "blocking jetstream_sync call made from the client's event-loop thread "
                "(for example inside an asyncio callback); it would deadlock"
            )
        if self._stopped:
            raise errors.ConnectionClosedError("the client is closed")

    def refuse_wait(self, what: str) -> None:
        """Raise DeadlockError on the loop thread: a wait there for ``what``,
        which the loop itself delivers, would never end."""
        if self.in_loop_thread():
            raise errors.DeadlockError(
                f"waiting for {what} on the client's event-loop thread (for example inside an asyncio "
                "callback) would deadlock"
            )

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

    def _main(self, loop: asyncio.AbstractEventLoop, ready: Any) -> None:
        asyncio.set_event_loop(loop)
        self._ident = self._thread_ident()
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            try:
                try:
                    _cancel_all(loop)
                    loop.run_until_complete(loop.shutdown_asyncgens())
                except Exception:  # pragma: no cover - best effort at teardown
                    pass
                loop.close()
                for fut in list(self._waiting):
                    fut.cancel()
            finally:
                # Before the thread ends: its ident is then free for a new
                # thread, which must not pass for the loop thread.
                self._ident = None

    def _thread_ident(self) -> int:
        return threading.get_ident()

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
            return self._result(fut, timeout)
        except concurrent.futures.TimeoutError:
            if fut.done():
                raise  # the coroutine itself raised a TimeoutError
            fut.cancel()
            assert timeout is not None  # only a bounded wait times out
            raise errors.TimeoutError("operation timed out after %.3fs" % timeout) from None
        except concurrent.futures.CancelledError:
            raise errors.ConnectionClosedError("operation cancelled: the client is closing") from None
        except BaseException:
            fut.cancel()
            raise
        finally:
            self._waiting.discard(fut)

    def _result(self, fut: "concurrent.futures.Future[T]", timeout: Optional[float]) -> T:
        """Block for ``fut``; raises concurrent.futures.TimeoutError after ``timeout``."""
        return fut.result(timeout)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Schedule ``fn(*args)`` on the loop without waiting (never blocks)."""
        if self._forked or os.getpid() != _fork.pid:
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
        if self._forked or os.getpid() != _fork.pid:
            return  # the child has no loop thread; never touch the parent's
        loop = self._loop
        if loop is None:
            return
        if self.in_loop_thread():
            loop.stop()
            return
        try:
            loop.call_soon_threadsafe(loop.stop)
        except RuntimeError:
            pass
        self._join(timeout)

    def _join(self, timeout: float) -> None:
        """Wait for the loop thread to end."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _after_fork_in_child(self) -> None:
        self._forked = True
        # The thread does not exist here; drop references without any I/O.
        self._thread = None
        self._ident = None
        self._lock = threading.Lock()


# -- gevent ---------------------------------------------------------------------
#
# Under monkey-patching the loop runs on a real OS thread, and that thread
# gets a gevent hub of its own: patched locks and sockets touched there
# create one anyway, and a hub that never runs strands every greenlet that
# waits on a lock it owns. So the loop uses gevent's selector, built in that
# thread: whenever asyncio waits for I/O, the thread's hub runs.

# Waits are cut in slices: a lost wake-up or a dead loop thread costs one slice.
_GREEN_SLICE = 0.5
_GREEN_POLL = 0.002  # gevent < 21.1: no thread-safe wake-up, poll instead
_GREEN_START_TIMEOUT = 30.0
_originals_cache: Any = None


def gevent_patched() -> bool:
    """True if gevent (already imported by someone else) patched ``threading``."""
    try:
        from gevent import monkey

        return bool(monkey.is_module_patched("threading"))
    except Exception:  # pragma: no cover - a broken or partial gevent
        return False


def _originals() -> Any:
    """The unpatched functions gevent saved when it patched them."""
    global _originals_cache
    if _originals_cache is None:
        import types

        from gevent import monkey

        get = monkey.get_original
        _originals_cache = types.SimpleNamespace(
            start_new_thread=get("_thread", "start_new_thread"),
            allocate_lock=get("_thread", "allocate_lock"),
            get_ident=get("_thread", "get_ident"),
            getaddrinfo=get("socket", "getaddrinfo"),
            getnameinfo=get("socket", "getnameinfo"),
        )
    return _originals_cache


class _GreenFlag:
    """A one-shot flag set from any OS thread and waited for, cooperatively,
    by greenlets of the thread that created it.

    gevent objects are not safe to touch from another OS thread; the setter
    only asks the waiter's hub, through its thread-safe callback queue, to
    set a gevent Event.
    """

    __slots__ = ("is_set", "value", "_event", "_wake")

    def __init__(self) -> None:
        import gevent
        import gevent.event

        self.is_set = False
        self.value: Any = None
        self._event = gevent.event.Event()
        self._wake = getattr(gevent.get_hub().loop, "run_callback_threadsafe", None)

    def set(self, value: Any = None) -> None:
        self.value = value
        self.is_set = True
        if self._wake is not None:
            self._wake(self._event.set)

    def wait(self, timeout: Optional[float], alive: Callable[[], bool]) -> bool:
        """True once set, False after ``timeout``; ConnectionClosedError if
        ``alive()`` turns false while not set."""
        step = _GREEN_SLICE if self._wake is not None else _GREEN_POLL
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set:
            wait = step
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                wait = min(step, remaining)
            self._event.wait(wait)
            if not self.is_set and not alive():
                raise errors.ConnectionClosedError("the client's event-loop thread has ended")
        return True


class _GreenSafeLoop(asyncio.SelectorEventLoop):
    """The loop of a _GreenLoopThread; build it in that thread.

    Blocking helpers (DNS, run_in_executor(None, …)) go to native threads:
    patched threads would be greenlets sharing the loop's OS thread.
    """

    def __init__(self) -> None:
        from gevent.selectors import GeventSelector

        super().__init__(GeventSelector())

    def run_in_executor(self, executor: Any, func: Callable[..., T], *args: Any) -> "asyncio.Future[T]":  # type: ignore[override]
        if executor is not None:
            return super().run_in_executor(executor, func, *args)
        self._check_closed()  # type: ignore[attr-defined]
        fut: "asyncio.Future[T]" = self.create_future()

        def work() -> None:
            outcome: "tuple[bool, Any]"
            try:
                outcome = (True, func(*args))
            except BaseException as exc:
                outcome = (False, exc)
            try:
                self.call_soon_threadsafe(_settle, fut, outcome)
            except RuntimeError:  # loop closed meanwhile
                pass

        _originals().start_new_thread(work, ())
        return fut

    async def getaddrinfo(
        self, host: Any, port: Any, *, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
    ) -> Any:
        # gevent's resolver would start a hub and a thread pool per calling thread.
        return await self.run_in_executor(None, _originals().getaddrinfo, host, port, family, type, proto, flags)

    async def getnameinfo(self, sockaddr: Any, flags: int = 0) -> Any:
        return await self.run_in_executor(None, _originals().getnameinfo, sockaddr, flags)


def _settle(fut: "asyncio.Future[Any]", outcome: "tuple[bool, Any]") -> None:
    if fut.cancelled():
        return
    ok, value = outcome
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


class _GreenLoopThread(LoopThread):
    """LoopThread of a gevent monkey-patched process (LoopThread() returns it).

    The loop runs on a real OS thread; callers (greenlets) wait without
    blocking their hub, so other greenlets keep running, and every wait is
    bounded by the loop thread being alive.
    """

    def __init__(self, name: str = "jetstream-sync") -> None:
        super().__init__(name)
        orig = _originals()
        self._native_ident = orig.get_ident
        self._alive = orig.allocate_lock()  # held while the OS thread runs

    def _thread_ident(self) -> int:
        return self._native_ident()  # type: ignore[no-any-return]

    def in_loop_thread(self) -> bool:
        return self._ident is not None and self._native_ident() == self._ident

    def _thread_alive(self) -> bool:
        return not self._forked and self._alive.locked()

    def _start(self) -> None:
        if sys.is_finalizing():
            raise errors.ConnectionClosedError("interpreter is shutting down")
        _register_atexit()
        ready = _GreenFlag()
        if not self._alive.acquire(False):  # never block the hub on a native lock
            raise errors.ConnectionClosedError("the previous event-loop thread is still running")
        try:
            _originals().start_new_thread(self._green_main, (ready,))
        except BaseException:
            self._alive.release()
            raise
        if not ready.wait(_GREEN_START_TIMEOUT, self._thread_alive):
            raise errors.TimeoutError("the event-loop thread did not start within %.0fs" % _GREEN_START_TIMEOUT)
        if isinstance(ready.value, BaseException):
            raise errors.ConnectionClosedError("the event-loop thread failed to start: %r" % ready.value)
        self._loop = ready.value

    def _green_main(self, ready: _GreenFlag) -> None:
        try:
            try:
                loop = _GreenSafeLoop()
            except BaseException as exc:
                ready.set(exc)
                return
            self._main(loop, _Ready(ready, loop))
        finally:
            try:  # free its libev loop: two file descriptors per client otherwise
                import gevent

                gevent.get_hub().destroy(destroy_loop=True)
            except Exception:  # pragma: no cover - best effort at teardown
                pass
            self._alive.release()

    def _result(self, fut: "concurrent.futures.Future[T]", timeout: Optional[float]) -> T:
        # Never block on a lock the loop thread shares: wait on a flag it sets.
        done = _GreenFlag()
        fut.add_done_callback(done.set)  # runs on the loop thread
        done.wait(timeout, self._thread_alive)
        return fut.result(0)  # raises TimeoutError if not done

    def _join(self, timeout: float) -> None:
        """Wait for the OS thread to end, letting other greenlets run."""
        deadline = time.monotonic() + timeout
        try:
            import gevent

            while self._alive.locked() and time.monotonic() < deadline:
                gevent.sleep(0.002)
        except Exception:  # no usable hub (interpreter exit): block this thread
            if self._alive.acquire(True, max(deadline - time.monotonic(), 0)):
                self._alive.release()


class _Ready:
    """What LoopThread._main calls ``set()`` on once the loop runs."""

    __slots__ = ("_flag", "_loop")

    def __init__(self, flag: _GreenFlag, loop: asyncio.AbstractEventLoop) -> None:
        self._flag, self._loop = flag, loop

    def set(self) -> None:
        self._flag.set(self._loop)


_CANCEL_ROUNDS = 10


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel every task and let each end, in rounds: a task may start another
    as it is cancelled (a client closing under a reconnect starts its flusher),
    and a task still pending when the loop closes fails when it is collected."""
    for _ in range(_CANCEL_ROUNDS):
        tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        if not tasks:
            return
        for t in tasks:
            t.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


def _log_task_error(task: "asyncio.Task[Any]") -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        _log.error("background task failed", exc_info=exc, extra=log_fields())


@_fork.on_child
def _after_fork_in_child() -> None:
    for lt in list(_live):
        lt._after_fork_in_child()
    _exit_hooks.clear()


def register_exit_hook(obj: Any) -> None:
    """Call ``obj.close_at_exit()`` at interpreter exit if it is still alive.

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
            obj.close_at_exit()
        except Exception:  # pragma: no cover - exit must not fail
            _log.debug("error closing client at exit", exc_info=True, extra=log_fields())
    for lt in list(_live):
        lt.stop(timeout=1.0)
