"""The user side of every consumer context: the buffer of received messages
and the blocking take() that any number of threads share.

The loop-side engines (``_engine.py``, ``_pull.py``, ``_push.py``,
``_ordered.py``) hand messages over in chunks through a janus queue; takes
are lock-free in the common case and count what was handed out, from which
the engines derive pending credit (ADR-37).
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, List, Optional

import janus

from .. import errors
from .._core import otel
from .._core.connection import Resource
from .._core.message import NAK, Msg, reply_bytes
from .._core.logfields import log_fields

if TYPE_CHECKING:  # pragma: no cover
    from .._core.connection import Connection

_log = logging.getLogger("jetstream_sync._receiver")  # the logger name users configure, kept from before the move
monotonic = time.monotonic
_SLICE = 0.05  # wait_closed() looks at the connection this often

_PACE_WEIGHT = 0.2  # EWMA weight of a new pace sample
_PACE_RUN = 8  # takes per pace sample


@dataclass
class PullStats:
    """Counters of one messages()/consume()/fetch(); read from any thread."""

    delivered: int = 0  # messages handed to the user
    pulls: int = 0  # pull requests sent
    heartbeats: int = 0  # 100 Idle Heartbeat received
    missed_heartbeats: int = 0  # watchdog alarms
    reconnects: int = 0
    resets: int = 0  # ordered consumers: server consumer recreated (gap, deletion, reconnect, alarm)
    transient_errors: int = 0  # reported to the error handler (or logged)
    nakd_on_stop: int = 0  # buffered, never handed out, NAK'd by stop()
    nakd_overflow: int = 0  # arrived beyond max_messages/max_bytes (stale pulls), NAK'd
    kept_alive: int = 0  # +WPI sent for messages buffered longer than half of AckWait
    buffered_high_water: int = 0  # most messages received and not yet handed out
    buffered_bytes_high_water: int = 0  # the same in bytes (max_bytes mode only)
    statuses: Dict[str, int] = field(default_factory=dict)  # "408 Request Timeout" -> count

    def as_dict(self) -> Dict[str, Any]:
        """The counters as a plain dict (``statuses`` a dict of its own), for
        metrics exporters and JSON logs."""
        return asdict(self)


class End:
    """Queue item: no more messages; ``error`` is why (None = stopped/drained/done)."""

    __slots__ = ("error",)

    def __init__(self, error: Optional[BaseException]) -> None:
        self.error = error


class Report:
    """Queue item: a transient problem for the error handler."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


WAKE = object()  # queue item: re-check state (stop() wakes the thread blocked on the queue)

OPEN, DRAINING, STOPPED = "open", "draining", "stopped"


class Receiver(Resource):
    """User side: the buffer of received messages and the blocking take().

    Threads share one buffer. One of them at a time blocks on the janus queue
    for the next chunk (the leader); the others wait on a condition for the
    buffer to fill, so a chunk is shared out instead of parked with one
    thread. Whatever ends the leader's wait — a chunk, an error, Ctrl-C —
    wakes a follower to lead next.
    """

    def __init__(
        self, conn: "Connection", error_handler: Optional[Callable[[BaseException], Any]] = None, wait: float = 5.0
    ) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._buf: Deque[Msg] = collections.deque()
        self._state = OPEN
        self._end: Optional[End] = None
        self._stop_error: Optional[BaseException] = None
        self._fetching = False
        self._followers = 0
        self.waiting = 0  # threads blocked for a message (read by the watchdog)
        # When the callers began waiting for the next message: a wait that
        # ended in a timeout and the callers' next one count as one.
        self.wait_since = 0.0
        self._popped_at_wait = -1
        self.stats = PullStats()
        self.taken_bytes = 0  # bytes handed out (max_bytes mode)
        self.error_handler = error_handler
        self.stop_wait = wait  # how long stop() waits for the engine to finish
        self._queue: Any = None  # janus sync side, set by the engine
        self.closed_event = threading.Event()  # the engine has finished (loop side)
        self._naks_handed: List[threading.Event] = []  # stop's NAKs given to the engine
        self.user_done = threading.Event()  # callers have seen the end: nothing left to hand out
        self.settled = threading.Event()  # user_done, or stopped: nothing more goes to the callers
        self.worker: Optional[threading.Thread] = None  # consume(): the thread that runs the handler
        self.engine: Any = None
        # Pace of the callers: EWMA of seconds between messages handed out
        # from a non-empty buffer (the engine caps its buffer by it).
        self.pace = 0.0
        self._last_pop = 0.0
        self._run_waited = False
        self._counter = itertools.count(1)  # numbers the takes (cadence of refill checks and pace samples)
        self._appended = 0  # messages ever put into _buf (under the lock, before the extend)
        # consume() credits a message when its handler returns, not when taken.
        self.explicit_credit = False
        self._credited = 0
        # Lock-free takes (set by the engine; not in max_bytes mode, which
        # accounts bytes per message). A take numbered above refill_at finds
        # pending below the refill threshold (maintained by the engine).
        self.lock_free = False
        self.refill_at = 1
        # End after this many messages were taken (0: never); takes then go
        # through the lock, which counts them exactly.
        self.stop_after = 0

    def mark_user_done(self) -> None:
        """The callers have seen the end. The connection keeps tracking the
        receiver until both this and the engine's end have happened, so a
        close() in between still stops what is left to hand out."""
        self.user_done.set()
        self.settled.set()
        if self.closed_event.is_set():
            self._conn.unregister(self)

    def engine_closed(self) -> None:
        """Loop thread: the engine has finished (NAKs written)."""
        self.closed_event.set()
        if self.user_done.is_set() or self._state is STOPPED:
            self._conn.unregister(self)

    @property
    def lock(self) -> threading.Lock:
        """The lock that also guards the engine's credit arithmetic."""
        return self._lock

    def attach(self, queue: Any) -> None:
        """The engine's hand-off queue (janus sync side) to take chunks from."""
        self._queue = queue

    # -- taking -------------------------------------------------------------

    def take(self, timeout: Optional[float], credit: bool = True) -> Msg:
        """The next message. Raises TimeoutError after ``timeout`` seconds,
        the terminal error (to every caller, every time), then
        :class:`Exhausted` when there is no more."""
        if self._conn.in_child:
            self._conn.check_fork()
        # The common case without the lock: deque.popleft and next() on a
        # count are atomic under the GIL, so each message goes to exactly one
        # thread and gets its own number; stop() empties the buffer with
        # popleft too. The engine derives pending credit from that number.
        if self.lock_free and self._state is OPEN:
            try:
                msg = self._buf.popleft()
            except IndexError:
                pass
            else:
                n = next(self._counter)
                if credit and n > self.refill_at:  # pending may be below the threshold
                    self.engine.want_more()
                if not n % _PACE_RUN:
                    with self._lock:
                        self._pace()
                if (tr := otel.active) is not None:
                    tr.received(msg)
                return msg
        msg = self._take(timeout, credit)
        if (tr := otel.active) is not None:
            tr.received(msg)
        return msg

    def _take(self, timeout: Optional[float], credit: bool) -> Msg:
        """The next message, waiting up to ``timeout`` (None: no limit) for the
        loop thread to hand one over; the path with the lock."""
        deadline = None if timeout is None else monotonic() + timeout
        lock = self._lock
        lock.acquire()
        try:
            if self._state is OPEN:
                self.engine.want_more()  # refills are driven by the user asking (ADR-37)
            waited = False
            while True:
                if self._state is STOPPED:
                    self.mark_user_done()
                    if self._stop_error is not None:
                        raise self._stop_error
                    raise Exhausted()
                if self._buf:
                    return self._pop(waited, credit)
                if self._end is not None:
                    self.mark_user_done()
                    if self._end.error is not None:
                        raise self._end.error
                    raise Exhausted()
                remaining = None if deadline is None else deadline - monotonic()
                if remaining is not None and remaining <= 0:
                    if waited:
                        assert timeout is not None  # it set the deadline
                        raise self._conn.timed_out("no message within %.3fs" % timeout)
                    remaining = 0.0  # look once at what was handed over, without waiting
                if remaining != 0.0 and self._conn.loop_thread.in_loop_thread():
                    self._conn.loop_thread.refuse_wait("a message")  # only the loop hands one over
                waited = True
                self._wait_for_items(remaining)
        finally:
            lock.release()

    def _pop(self, waited: bool, credit: bool) -> Msg:
        """Hand out the first buffered message (lock held)."""
        buf = self._buf
        msg = buf.popleft()
        popped = next(self._counter)
        if waited:
            self._run_waited = True
        if not popped % _PACE_RUN:
            self._pace()
        if credit:
            self.engine.took(msg)
        if popped == self.stop_after:  # the last one: end as stop() would (nothing more to NAK)
            leftover = self._halt(None)
            if leftover is not None:
                self._unlocked(self._halted, leftover)
        elif buf and self._followers:
            self._cond.notify()
        return msg

    def _wait_for_items(self, remaining: Optional[float]) -> None:
        """Wait up to ``remaining`` seconds for the loop thread's next item
        (lock held; released while waiting). One waiter leads and reads the
        hand-off queue; the others follow on the condition."""
        lock = self._lock
        self.waiting += 1
        if self.waiting == 1 and self._popped_at_wait != self.popped:
            # Something was handed out since the last wait began: the caller
            # was busy with it, not waiting, until now.
            self._popped_at_wait = self.popped
            self.wait_since = monotonic()
        try:
            if self._fetching:
                self._followers += 1
                try:
                    self._cond.wait(remaining)
                finally:
                    self._followers -= 1
                return
            self._fetching = True
            lock.release()
            try:
                self._conn.outbox.kick()  # acks go out before we sleep
                item = self._get(remaining)
            finally:
                lock.acquire()
                self._fetching = False
                if self._followers:  # even on Ctrl-C: someone else leads now
                    self._cond.notify()
        finally:
            self.waiting -= 1
        report = self._absorb(item)
        if self._followers:
            if isinstance(item, list) and self._end is None and self._state is not STOPPED:
                # A chunk: wake one; each taker wakes the next while
                # messages remain, so threads that would find the
                # buffer already empty sleep on (no herd per chunk).
                self._cond.notify()
            else:
                self._cond.notify_all()
        if report is not None:
            self._unlocked(self.call_error_handler, report)

    def _unlocked(self, fn: Callable[[Any], Any], arg: Any) -> None:
        """``fn(arg)`` with the lock (held by the caller) released meanwhile."""
        self._lock.release()
        try:
            fn(arg)
        finally:
            self._lock.acquire()

    def snapshot(self) -> PullStats:
        """A copy of the counters (delivered: what the callers were given)."""
        s = self.stats
        return replace(s, statuses=dict(s.statuses), delivered=self.credited_now())

    def _pace(self) -> None:
        """Sample the callers' pace (lock held), over runs of _PACE_RUN takes
        that all found the buffer non-empty (only they say how fast messages
        are consumed); the engine re-caps its buffer from it."""
        now = monotonic()
        if not self._run_waited and self._last_pop:
            sample = (now - self._last_pop) / _PACE_RUN
            self.pace = sample if not self.pace else self.pace + _PACE_WEIGHT * (sample - self.pace)
            if self.engine is not None:
                self.engine.paced(self.pace)
        self._run_waited = False
        self._last_pop = now

    def _get(self, timeout: Optional[float]) -> Any:
        try:
            return self._queue.get(timeout=timeout)
        except janus.SyncQueueEmpty:
            return None

    def _absorb(self, item: Any) -> Optional[BaseException]:
        """Take a queue item into the buffer (lock held); returns a report to deliver."""
        if item is None or item is WAKE:
            return None
        if isinstance(item, list):
            if self._state is STOPPED:
                self._nak_on_stop(item)  # never handed out
            else:
                # Count first: a lock-free reader then errs towards "taken",
                # which can only schedule a pull check, never skip one.
                self._appended += len(item)
                self._buf.extend(item)
            return None
        if isinstance(item, Report):
            return item.error
        if isinstance(item, End) and self._end is None:
            self._end = item  # threads waiting on the condition see it when woken
        return None

    @property
    def popped(self) -> int:
        """Messages taken out of the buffer (handed out or being handled).
        Exact under the lock; without it, at most one chunk too high."""
        return self._appended - len(self._buf)

    @property
    def credited(self) -> int:
        """Messages handed out and accounted (consume: when the handler returned)."""
        return self._credited if self.explicit_credit else self._appended - len(self._buf)

    def credited_now(self) -> int:
        """``credited``, read under the lock (exact): for the loop side."""
        with self._lock:
            return self.credited

    def popped_now(self) -> int:
        with self._lock:
            return self.popped

    def _credit(self, msg: Msg) -> None:
        """Account a message handed to the user (lock held)."""
        self._credited += 1
        engine = self.engine
        if engine is not None:
            engine.took(msg)

    def serve(self, handler: Callable[[Msg], Any], failed: Callable[[Msg, Exception], None]) -> None:
        """consume()'s worker loop: ``handler(msg)`` for each message, in the
        calling thread (the only one that takes), ``failed(msg, exc)`` when it
        raises; each message credited when its handler has returned. Returns
        at the end; raises the terminal error.

        take() and credit() inlined: this runs once per message, and the one
        worker thread never exists in a forked child (no fork check). A
        subclass that overrides take() overrides this too (OrderedReceiver)."""
        buf = self._buf
        popleft = buf.popleft
        counter = self._counter
        lock_free = self.lock_free  # set once, by the engine made before this thread started
        while True:
            msg = None
            if lock_free and self._state is OPEN:
                try:
                    msg = popleft()
                except IndexError:
                    pass
                else:
                    if not next(counter) % _PACE_RUN:
                        with self._lock:
                            self._pace()
            if msg is None:
                try:
                    msg = self._take(None, False)
                except Exhausted:
                    return
            if (tr := otel.active) is not None:
                tr.received(msg)  # as take() does: outside the handler's failures
            try:
                if tr is None:
                    handler(msg)
                else:
                    with tr.process(msg):
                        handler(msg)
            except Exception as exc:
                failed(msg, exc)
            finally:
                if lock_free:
                    # The count's only writer; the engine reads it once per
                    # step (engine.took() counts bytes, which lock-free mode
                    # does not keep).
                    credited = self._credited = self._credited + 1
                    if credited > self.refill_at and self._state is OPEN:
                        self.engine.want_more()
                else:
                    with self._lock:
                        self._credit(msg)
                        if self._credited > self.refill_at and self._state is OPEN:
                            self.engine.want_more()

    def call_error_handler(self, exc: BaseException) -> None:
        handler = self.error_handler
        if handler is None:
            return
        try:
            handler(exc)
        except Exception:
            _log.exception("error handler raised", extra=log_fields())

    # -- ending ---------------------------------------------------------------

    def stop(self, error: Optional[BaseException] = None) -> bool:
        """Stop now; NAK what was received and never handed out. False if
        already stopped. ``error`` is raised to callers instead of the end of
        iteration (the client closing under them)."""
        with self._lock:
            leftover = self._halt(error)
        if leftover is None:
            return False
        self.settled.set()
        if not leftover and self.user_done.is_set():
            # The callers saw the engine's end (a fetch run to completion): it
            # closes on its own, nothing is buffered or blocked on the queue;
            # no loop wake-up for a shutdown with nothing to do.
            pass
        else:
            self._halted(leftover)
        if self.closed_event.is_set():  # the engine ended before: nothing left to track
            self._conn.unregister(self)
        return True

    def _halt(self, error: Optional[BaseException]) -> Optional[List[Msg]]:
        """Mark stopped and empty the buffer (lock held); None if already stopped."""
        if self._state is STOPPED:
            return None
        self._state = STOPPED
        self._stop_error = error
        leftover = []
        buf = self._buf
        while True:  # popleft, as lock-free takers do: each message to one side
            try:
                leftover.append(buf.popleft())
            except IndexError:
                break
        self._appended -= len(leftover)  # NAK'd, never handed out
        self._cond.notify_all()
        return leftover

    def _halted(self, leftover: List[Msg]) -> None:
        """After _halt, without the lock: NAK the leftovers, wake the queue
        reader, shut the engine down."""
        self._nak_on_stop(leftover)
        if self._queue is not None:
            self._queue.put_nowait(WAKE)  # the thread blocked on the queue re-checks state
        engine = self.engine
        if engine is not None and not self._conn.closing:
            # An engine that has ended (drain, then stop) NAKs the chunks still
            # queued when its shutdown("stop") runs: wait_closed() waits for that.
            if not self._on_loop_before_closed(engine.shutdown, "stop"):
                self.closed_event.set()  # no loop to finish on: nothing more will come
        elif engine is None or self._conn.closed:
            self.closed_event.set()

    def prefetch(self) -> None:
        """Any thread: ask for messages now rather than at the first take."""
        self._conn.check_fork()
        with self._lock:
            if self._state is OPEN:
                self.engine.want_more()

    def check_wait(self, what: str, ready: bool = False) -> None:
        """Any thread: raise before a user's wait for ``what`` that could not
        end (a forked child, or the loop thread unless ``ready``)."""
        self._conn.check_wait(what, ready)

    def wait_closed(self, timeout: Optional[float]) -> bool:
        """Block until the engine has finished (NAKs written), unless called
        from the loop thread."""
        if self._conn.loop_thread.in_loop_thread():
            return self.closed_event.is_set()
        deadline = None if timeout is None else monotonic() + timeout
        if not self.closed_event.wait(timeout):
            return False
        # The engine may have ended before stop's NAKs reached it (drain, then
        # stop): those are written once the loop has run them.
        for handed in list(self._naks_handed):
            # In slices: a loop closed before it ran the hand-over never sets it.
            while not handed.wait(_SLICE if deadline is None else min(_SLICE, max(0.0, deadline - monotonic()))):
                if self._conn.closed:
                    return True
                if deadline is not None and monotonic() >= deadline:
                    return False
        return True

    def drain(self) -> bool:
        with self._lock:
            if self._state is not OPEN:
                return False
            self._state = DRAINING
        if self.engine is not None:
            try:
                self._conn.call_soon(self.engine.shutdown, "drain")
            except errors.JetStreamError:
                self.stop()
        return True

    @property
    def state(self) -> str:
        return self._state

    @property
    def finished(self) -> bool:
        return self._state is STOPPED or (self._end is not None and not self._buf)

    def _nak_on_stop(self, msgs: List[Msg]) -> None:
        """NAK what was never handed out, through the engine, which holds NAKs
        until its interest is gone (a NAK'd message is redelivered at once,
        and must not come back to this subscription's open pull)."""
        engine = self.engine
        if msgs and engine is not None and not self._conn.closing:
            if self._on_loop_before_closed(engine.nak_later, msgs):
                return
        self.nak(msgs)

    def _on_loop_before_closed(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run ``fn(*args)`` (stop's NAKs) on the loop thread; wait_closed()
        returns only once it has run. False when no loop takes it."""
        handed = threading.Event()

        def run() -> None:
            try:
                fn(*args)
            finally:
                handed.set()

        try:
            self._conn.call_soon(run)
        except errors.JetStreamError:
            return False
        self._naks_handed.append(handed)
        return True

    def nak(self, msgs: List[Msg]) -> None:
        """NAK messages never handed out, so the server redelivers them at once."""
        if not msgs or self._conn.closed or self._conn.forked:
            return
        self.stats.nakd_on_stop += len(msgs)
        self._conn.outbox.put_many([(reply_bytes(m), NAK) for m in msgs])

    # -- the connection closing (Resource) ----------------------------------------

    def drain_for_shutdown(self, timeout: float) -> Optional[threading.Event]:
        self.drain()
        if threading.current_thread() is self.worker:
            return None  # asked by the handler: it cannot take the rest while it waits
        return self.settled

    def connection_closing(self, error: BaseException) -> None:
        self.stop(error)
        if self._conn.closed:
            self.closed_event.set()

    async def connection_shutdown(self) -> None:
        engine = self.engine
        if engine is not None:
            await engine.shutdown("stop")


class Exhausted(Exception):
    """Internal: the receiver has nothing more to hand out."""
