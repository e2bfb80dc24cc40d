"""The pull engine: loop-side halves of messages()/consume() and fetch().

Each engine owns one core nats-py subscription on its own inbox, publishes
``CONSUMER.MSG.NEXT`` requests with that inbox as reply, classifies statuses,
and hands user messages to the user side (:class:`Receiver`) in chunks
through a janus queue: every message that arrives in one burst from the
socket goes over as one list.

Pending counts (ADR-37) live under the receiver's lock: the user side
decrements them when it takes a message, the loop side when a status carries
``Nats-Pending-*`` headers, and only the loop side sends pulls.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import logging
import math
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, List, Optional, Tuple

import janus

from . import errors
from ._connection import Resource
from .message import NAK, WPI, Msg, WireMsg, parse_header_block, pin_id, reply_bytes
from .options import (
    ConsumeOptions,
    FetchOptions,
    StatusKind,
    Watchdog,
    classify_status,
    pending_from_headers,
    pull_request,
    refill,
    status_error,
)

if TYPE_CHECKING:  # pragma: no cover
    from ._connection import Connection

_log = logging.getLogger("jetstream_sync.pull")
monotonic = time.monotonic

_LIMIT_BACKOFF_START = 1.0
_SHUTDOWN_FLUSH = 5.0
# Hold no more than the callers take in this share of AckWait, and keep
# messages buffered longer than it alive with +WPI.
_ACK_WAIT_SHARE = 0.5
_PACE_WEIGHT = 0.2  # EWMA weight of a new pace sample
_PACE_RUN = 8  # takes per pace sample


@dataclass(frozen=True)
class ConsumerTarget:
    """The consumer an engine reads from: names, info subject, AckWait."""

    stream: str
    consumer: str
    info_subject: str  # $JS.API.CONSUMER.INFO.<stream>.<consumer>
    ack_wait: Optional[float]  # seconds; None when acks are off
    api_timeout: float


@dataclass(frozen=True)
class PullTarget(ConsumerTarget):
    """Where an engine pulls from."""

    pull_subject: str  # $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>

    @property
    def subject(self) -> str:
        return self.pull_subject


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


class PinId:
    """The pin id of one puller of a pinned_client consumer (ADR-42): learned
    from the ``Nats-Pin-Id`` header of the messages it gets, sent as ``id`` in
    its later pulls, dropped when the server calls it stale (423). Loop thread only."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = ""

    def learn(self, msg: Msg) -> None:
        pin = pin_id(msg)
        if pin:
            self.value = pin


class _End:
    """Queue item: no more messages; ``error`` is why (None = stopped/drained/done)."""

    __slots__ = ("error",)

    def __init__(self, error: Optional[BaseException]) -> None:
        self.error = error


class _Report:
    """Queue item: a transient problem for the error handler."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_WAKE = object()  # queue item: re-check state (stop() wakes the thread blocked on the queue)

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
        self._end: Optional[_End] = None
        self._stop_error: Optional[BaseException] = None
        self._fetching = False
        self._followers = 0
        self.waiting = 0  # threads blocked for a message (read by the watchdog)
        self.wait_since = 0.0
        self.stats = PullStats()
        self.taken_bytes = 0  # bytes handed out (max_bytes mode)
        self.error_handler = error_handler
        self.stop_wait = wait  # how long stop() waits for the engine to finish
        self._queue: Any = None  # janus sync side, set by the engine
        self.closed_event = threading.Event()  # the engine has finished (loop side)
        self.user_done = threading.Event()  # callers have seen the end: nothing left to hand out
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
                return msg
        return self._take(timeout, credit)

    def _take(self, timeout: Optional[float], credit: bool) -> Msg:
        deadline = None if timeout is None else monotonic() + timeout
        lock = self._lock
        lock.acquire()
        try:
            if self._state is OPEN:
                self.engine.want_more()  # refills are driven by the user asking (ADR-37)
            waited = False
            while True:
                if self._state is STOPPED:
                    self.user_done.set()
                    if self._stop_error is not None:
                        raise self._stop_error
                    raise Exhausted()
                buf = self._buf
                if buf:
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
                if self._end is not None:
                    self.user_done.set()
                    if self._end.error is not None:
                        raise self._end.error
                    raise Exhausted()
                remaining = None if deadline is None else deadline - monotonic()
                if remaining is not None and remaining <= 0:
                    if waited:
                        raise errors.TimeoutError("no message within %.3fs" % timeout)
                    remaining = 0.0  # look once at what was handed over, without waiting
                waited = True
                self.waiting += 1
                if self.waiting == 1:
                    self.wait_since = monotonic()
                try:
                    if self._fetching:
                        self._followers += 1
                        try:
                            self._cond.wait(remaining)
                        finally:
                            self._followers -= 1
                        continue
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
        finally:
            lock.release()

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
        if item is None or item is _WAKE:
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
        if isinstance(item, _Report):
            return item.error
        if isinstance(item, _End) and self._end is None:
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

    def credit(self, msg: Msg) -> None:
        with self._lock:
            self._credit(msg)

    def call_error_handler(self, exc: BaseException) -> None:
        handler = self.error_handler
        if handler is None:
            return
        try:
            handler(exc)
        except Exception:
            _log.exception("error handler raised")

    # -- ending ---------------------------------------------------------------

    def stop(self, error: Optional[BaseException] = None) -> bool:
        """Stop now; NAK what was received and never handed out. False if
        already stopped. ``error`` is raised to callers instead of the end of
        iteration (the client closing under them)."""
        with self._lock:
            leftover = self._halt(error)
        if leftover is None:
            return False
        self._halted(leftover)
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
            self._queue.put_nowait(_WAKE)  # the thread blocked on the queue re-checks state
        engine = self.engine
        if engine is not None and not self._conn.closing:
            try:
                self._conn.call_soon(engine.shutdown, "stop")
            except errors.JetStreamError:
                self.closed_event.set()  # no loop to finish on: nothing more will come
        elif engine is None or self._conn.closed:
            self.closed_event.set()

    def wait_closed(self, timeout: Optional[float]) -> bool:
        """Block until the engine has finished (NAKs written), unless called
        from the loop thread."""
        if self._conn.loop_thread.in_loop_thread():
            return self.closed_event.is_set()
        return self.closed_event.wait(timeout)

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
        """NAK what was never handed out, through an engine that holds NAKs
        until its interest is gone (push: a NAK'd message is redelivered at
        once, and must not come back to this subscription)."""
        engine = self.engine
        if msgs and engine is not None and engine.defers_naks and not self._conn.closing:
            try:
                self._conn.call_soon(engine.nak_later, msgs)
                return
            except errors.JetStreamError:
                pass
        self.nak(msgs)

    def nak(self, msgs: List[Msg]) -> None:
        """NAK messages never handed out, so the server redelivers them at once."""
        if not msgs or self._conn.closed or self._conn.forked:
            return
        self.stats.nakd_on_stop += len(msgs)
        self._conn.outbox.put_many([(reply_bytes(m), NAK) for m in msgs])

    # -- the connection closing (Resource) ----------------------------------------

    def drain_for_shutdown(self) -> Optional[threading.Event]:
        self.drain()
        return self.user_done

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


class _Engine:
    """What the continuous and the one-shot engines share: the subscription,
    chunked hand-off, status parsing, the consumer check. Loop thread only,
    except where a method says "user side"."""

    def __init__(self, conn: "Connection", receiver: Receiver, target: PullTarget) -> None:
        self._conn = conn
        self._receiver = receiver
        self._lock = receiver._lock
        self._stats = receiver.stats
        self._target = target
        self._subject = target.subject  # pulled from (pull) or delivered on (push)
        self._q: "janus.Queue[Any]" = None  # type: ignore[assignment]
        self._sid: Optional[int] = None
        self._inbox = ""
        self._chunk: Optional[List[Msg]] = None
        self._watch = Watchdog(0.0)
        self._started = False
        self._done = False
        self._nak_arrivals = False
        self._timer: Optional[asyncio.TimerHandle] = None
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self._checking = False  # a consumer check or alarm confirmation is running
        self._remove_perm: Optional[Callable[[], None]] = None
        # Received so far; with what the user took, the size of the buffer.
        self._recv_msgs = 0
        self._recv_bytes = 0
        self._count_bytes = False
        # Set once earlier pulls may still be open on top of new ones (alarms,
        # reconnects, leadership changes): arrivals beyond the bound are NAK'd.
        self._guard = False
        self._pin: Optional[PinId] = None  # pinned_client consumers only
        receiver.engine = self

    async def _subscribe(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._q = janus.Queue()
        self._receiver._queue = self._q.sync_q
        self._sid = await self._open()
        self._remove_perm = self._conn.watch_permission(self._subject, self._denied)
        self._started = True

    async def _open(self) -> int:
        """Subscribe where the messages come (pull: a fresh inbox); the sid."""
        self._inbox = self._conn.new_inbox()
        return await self._conn.subscribe(self._inbox, self)

    def _denied(self, err: BaseException) -> None:
        self._end_with(err)

    def _end_with(self, err: BaseException) -> None:
        raise NotImplementedError

    # -- the subscription's sink (loop thread, called by the parser) -------------

    make = WireMsg
    defers_naks = False  # see nak_later()

    def nak_later(self, msgs: List[Msg]) -> None:
        """Loop thread: NAK messages never handed out (engines that defer
        NAKs until their subscription is gone override this)."""
        self._receiver.nak(msgs)

    @property
    def conn(self) -> "Connection":
        """Handed to each Msg the parser makes (their acks go through it)."""
        return self._conn

    def on_status(self, hdrs: bytes) -> None:
        self._watch.last = monotonic()
        end = hdrs.find(b"\r\n")
        code, _, desc = hdrs[9 : end if end >= 0 else None].decode(errors="replace").partition(" ")
        self._on_status(code, desc.strip(), parse_header_block(hdrs) or {})

    def on_msgs(self, msgs: List[Msg]) -> None:
        """Every message of one socket read, in order."""
        self._watch.last = monotonic()
        if self._pin is not None:  # the newest message carries the current pin
            self._pin.learn(msgs[-1])
        if self._nak_arrivals or self._done or (self._guard and not self._fits(len(msgs))):
            for msg in msgs:  # one by one: each is checked against what was kept before it
                if self._nak_arrivals or self._done or (self._guard and self._overflows(msg)):
                    self._receiver.nak([msg])
                else:
                    self._accept([msg])
            return
        self._accept(msgs)

    def _accept(self, msgs: List[Msg]) -> None:
        """Count messages in and add them to the chunk for the user side."""
        self._recv_msgs += len(msgs)
        if self._count_bytes:
            self._recv_bytes += sum(m.size for m in msgs)
        self._on_batch(msgs)
        chunk = self._chunk
        if chunk is None:
            self._chunk = msgs
            self._loop.call_soon(self._flush)
        else:
            chunk.extend(msgs)

    def _on_batch(self, msgs: List[Msg]) -> None:
        """Messages accepted (subclasses count them)."""

    def _overflows(self, msg: Msg) -> bool:
        return False

    def _fits(self, count: int) -> bool:
        """``count`` more messages stay within the buffer bound (no per-message check needed)."""
        return True

    def _on_status(self, code: str, desc: str, hdrs: Dict[str, str]) -> None:
        raise NotImplementedError

    def _classify(self, code: str, desc: str) -> Optional[StatusKind]:
        """Count a status; None for a heartbeat (nothing more to do)."""
        kind = classify_status(code, desc)
        if kind is StatusKind.HEARTBEAT:
            self._stats.heartbeats += 1
            return None
        key = f"{code} {desc}".strip()
        self._stats.statuses[key] = self._stats.statuses.get(key, 0) + 1
        return kind

    def _flush(self) -> None:
        chunk, self._chunk = self._chunk, None
        if chunk:
            stats, receiver = self._stats, self._receiver
            buffered = self._recv_msgs - receiver.credited_now()
            if buffered > stats.buffered_high_water:
                stats.buffered_high_water = buffered
            if self._count_bytes:
                nbytes = self._recv_bytes - receiver.taken_bytes
                if nbytes > stats.buffered_bytes_high_water:
                    stats.buffered_bytes_high_water = nbytes
            if self._nak_arrivals:
                self.nak_later(chunk)
            else:
                self._handed_off(chunk)
                self._q.async_q.put_nowait(chunk)

    def _handed_off(self, chunk: List[Msg]) -> None:
        pass

    def _send_pull(self, body: bytes) -> None:
        self._stats.pulls += 1
        self._conn.outbox.send_now()  # acks and NAKs queued before this pull go first
        if not self._conn.send_pub(self._subject, self._inbox, body):
            _log.debug("pull request not sent: connection closed")

    def _finish(self, error: Optional[BaseException]) -> None:
        """Hand over what is buffered, then the end marker (loop thread)."""
        if self._done:
            return
        self._flush()
        self._done = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._remove_perm is not None:
            self._remove_perm()
            self._remove_perm = None
        if self._q is not None:
            self._q.async_q.put_nowait(_End(error))

    def _closed(self) -> None:
        """Loop thread: everything is written; wake whoever waits in stop()."""
        self._conn.unregister(self._receiver)
        self._receiver.closed_event.set()

    def _nak_queued(self) -> None:
        """NAK every chunk still in the hand-off queue (stop)."""
        if self._q is None:
            return
        q = self._q.async_q
        keep = []
        while True:
            try:
                item = q.get_nowait()
            except janus.AsyncQueueEmpty:
                break
            if isinstance(item, list):
                self._receiver.nak(item)
            elif not isinstance(item, _Report) and item is not _WAKE:
                keep.append(item)
        for item in keep:
            q.put_nowait(item)

    async def _unsubscribe(self, drain: bool) -> None:
        sid, self._sid = self._sid, None
        if sid is not None:
            await self._conn.unsubscribe(sid, drain, _SHUTDOWN_FLUSH)

    # -- the consumer check ----------------------------------------------------------

    def _check_consumer(self, then: Optional[Callable[[], None]] = None) -> None:
        """Ask for the consumer's info; "consumer (or stream) not found" ends
        this engine with ConsumerDeletedError. One check at a time."""
        if self._checking or self._done:
            return
        self._checking = True
        self._loop.create_task(self._acheck_consumer(then))

    async def _acheck_consumer(self, then: Optional[Callable[[], None]]) -> None:
        gone = False
        try:
            msg = await self._conn.request(self._target.info_subject, b"", self._target.api_timeout)
            err = json.loads(msg.data).get("error")
            gone = bool(err) and int(err.get("err_code") or 0) in (
                errors.ErrorCode.CONSUMER_NOT_FOUND,
                errors.ErrorCode.STREAM_NOT_FOUND,
            )
        except Exception as exc:  # JetStream down, timeouts: not proof it is gone
            _log.debug("consumer check on %s: %r", self._target.info_subject, exc)
        finally:
            self._checking = False
        if gone:
            t = self._target
            self._end_with(errors.ConsumerDeletedError(409, f"Consumer Deleted ({t.stream}/{t.consumer} not found)"))
        elif then is not None and not self._done:
            then()

    async def _traffic_since(self, since: float, wait: float) -> bool:
        """After a missed-heartbeat alarm, is this pull alive after all? A PING
        round trip (bounded) lets data the server sent before it be read; once
        the PONG is back the server holds the pull request, so a heartbeat is
        due within one more interval. True if anything arrived for this pull
        (a false alarm: a busy process, or a pull that reached the server late)."""
        answered = await self._conn.round_trip(min(max(wait / 2, 0.25), 1.0))
        deadline = monotonic() + (wait if answered else 0.0)
        while True:
            # Without the fast paths nats-py hands messages to a subscription
            # task, which may run after the PONG: yield, and look at its queue.
            await asyncio.sleep(0)
            sid = self._sid
            if self._watch.last > since or (sid is not None and self._conn.backlog(sid) > 0):
                return True
            if monotonic() >= deadline or self._done:
                return False
            await asyncio.sleep(min(0.01, wait / 4))


class _Continuous(_Engine):
    """What the continuous engines (pull consume, push) share: connection
    listeners, reports to the error handler, +WPI keepalive of buffered
    messages, stop and drain. Loop thread only, except where a method says
    "user side"."""

    def __init__(self, conn: "Connection", receiver: Receiver, target: Any) -> None:
        super().__init__(conn, receiver, target)
        self._connected = True
        self._shutting_down = False
        self._listeners: List[Callable[[], None]] = []
        self._shutdown_task: Optional["asyncio.Task[None]"] = None
        self._tick_every = 1.0
        # Chunks handed to the user side and maybe not yet taken, oldest
        # first: [handed at, cumulative index of its first message, chunk].
        self._held: Deque[List[Any]] = collections.deque()
        self._next_keepalive = 0.0

    async def start(self) -> None:
        if self._receiver.state is STOPPED:  # stopped (or the client closed) before it started
            self._loop = asyncio.get_running_loop()
            self._done = True
            self._closed()
            return
        await self._subscribe()
        conn = self._conn
        self._connected = conn.is_connected
        self._listeners = [
            conn.add_listener("disconnected", self._on_disconnected),
            conn.add_listener("reconnected", self._on_reconnected),
            conn.add_listener("closed", self._on_closed),
        ]
        self._timer = self._loop.call_later(self._tick_every, self._tick)

    # -- heartbeats ------------------------------------------------------------

    def _tick(self) -> None:
        self._timer = self._loop.call_later(self._tick_every, self._tick)
        if self._held:
            self._keepalive(monotonic())
        if not self._connected or self._shutting_down or self._receiver.state is not OPEN or self._checking:
            return
        if self._missed():
            self._checking = True
            self._loop.create_task(self._confirm_alarm(self._watch.last))  # missed() re-armed last: now

    def _missed(self) -> bool:
        """Is a heartbeat alarm due (re-arms the watchdog)?"""
        return self._watch.missed()

    async def _confirm_alarm(self, since: float) -> None:
        try:
            alive = await self._alive(since)
        finally:
            self._checking = False
        if alive or self._done or self._shutting_down:
            return
        self._stats.missed_heartbeats += 1
        alarm = self._watch.alarm_after
        self._report(errors.NoHeartbeatError(f"no heartbeat for {alarm:g}s on {self._subject}"))
        self._after_alarm()

    async def _alive(self, since: float) -> bool:
        """After an alarm: was it false (traffic after all)?"""
        raise NotImplementedError

    def _after_alarm(self) -> None:
        """A confirmed alarm was reported."""

    def _handed_off(self, chunk: List[Msg]) -> None:
        if self._target.ack_wait:
            held = self._held
            self._drop_taken(held)
            held.append([monotonic(), self._recv_msgs - len(chunk), chunk])

    def _drop_taken(self, held: Deque[List[Any]]) -> None:
        delivered = self._receiver.popped_now()  # only grows
        while held and held[0][1] + len(held[0][2]) <= delivered:
            held.popleft()

    def _keepalive(self, now: float) -> None:
        """+WPI for messages buffered (never handed out) for more than a share
        of AckWait, so a slow caller never gets a message the server already
        gave up on and redelivered elsewhere (or to it)."""
        ack_wait = self._target.ack_wait
        if not ack_wait or now < self._next_keepalive or self._receiver.state is not OPEN:
            return
        self._next_keepalive = now + ack_wait / 4
        held = self._held
        self._drop_taken(held)
        delivered = self._receiver.popped_now()
        old = now - ack_wait * _ACK_WAIT_SHARE
        wpi: List[Tuple[bytes, bytes]] = []
        for entry in held:
            if entry[0] > old:
                break
            entry[0] = now
            first, chunk = entry[1], entry[2]
            wpi.extend((reply_bytes(m), WPI) for m in chunk[max(delivered - first, 0) :])
        if wpi and not self._conn.closed:
            self._stats.kept_alive += len(wpi)
            self._conn.outbox.put_many(wpi)

    def _report(self, exc: BaseException) -> None:
        """A transient problem: count, log, queue for the error handler."""
        self._stats.transient_errors += 1
        _log.info("%s on %s: %s", type(exc).__name__, self._subject, exc)
        if self._receiver.error_handler is not None and not self._done:
            self._q.async_q.put_nowait(_Report(exc))

    def _end_with(self, err: BaseException) -> None:
        self._begin_shutdown(err)

    # -- connection -------------------------------------------------------------

    def _on_disconnected(self) -> None:
        self._connected = False

    def _on_reconnected(self) -> None:
        self._connected = True
        self._stats.reconnects += 1
        self._watch.traffic()
        self._resume()

    def _resume(self) -> None:
        """After a reconnect (subclasses re-pull)."""

    def _on_closed(self) -> None:
        self._connected = False
        self._begin_shutdown(errors.ConnectionClosedError("connection closed"))

    # -- ending ---------------------------------------------------------------

    def shutdown(self, mode: str) -> "asyncio.Future[None]":
        """``"stop"``: NAK everything not handed out; ``"drain"``: hand it all
        over. Loop thread; returns the (shared) shutdown task."""
        return self._begin_shutdown(None, nak=(mode == "stop"))

    def _begin_shutdown(self, error: Optional[BaseException], nak: bool = False) -> "asyncio.Future[None]":
        if self._shutdown_task is None:
            self._shutting_down = True
            self._loop = self._loop or asyncio.get_running_loop()
            self._shutdown_task = self._loop.create_task(self._shutdown(error, nak))
        return self._shutdown_task

    async def _shutdown(self, error: Optional[BaseException], nak: bool) -> None:
        if not self._started:
            self._done = True
            self._closed()
            return
        for remove in self._listeners:
            remove()
        self._cancel_timers()
        if nak:
            self._nak_arrivals = True
            self._flush()  # NAKs the chunk being collected
        closed = isinstance(error, errors.ConnectionClosedError)
        await self._unsubscribe(drain=error is None)
        self._unsubscribed()
        if nak:
            self._nak_queued()
        if closed:
            self._drop_queued()
        self._finish(error)
        if nak and not closed:
            await self._conn.flush_quietly(self._target.api_timeout)  # the NAKs reach the server
        self._closed()

    def _drop_queued(self) -> None:
        """The connection is gone: nothing queued can be acked; drop it."""
        q = self._q.async_q
        while True:
            try:
                q.get_nowait()
            except janus.AsyncQueueEmpty:
                return

    def _cancel_timers(self) -> None:
        """Shutting down: cancel what subclasses scheduled besides the tick."""

    def _unsubscribed(self) -> None:
        """Shutting down: the server has no interest any more."""


class PullEngine(_Continuous):
    """Continuous pull for one MessagesContext / ConsumeContext (ADR-37 consume)."""

    def __init__(self, conn: "Connection", receiver: Receiver, target: PullTarget, opts: ConsumeOptions) -> None:
        super().__init__(conn, receiver, target)
        self.opts = opts
        # Pending messages (requested, not yet handed out) = _base - the
        # receiver's credited count: takes need not touch the engine.
        self._base = 0
        receiver.lock_free = not opts.bytes_mode and not opts.stop_after
        receiver.stop_after = opts.stop_after
        if opts.priority is not None and opts.priority.pinned:
            self._pin = PinId()  # each messages()/consume() is a worker of its own
        self._pending_bytes = 0
        self._pull_requested = False
        self._backoff = 0.0
        self._backoff_handle: Optional[asyncio.TimerHandle] = None
        self._last_pull = (0, 0)  # (messages received when the last pull went out, its max_bytes)
        self._watch = Watchdog(2 * opts.idle_heartbeat)
        # Ticks also drive the keepalive: often enough to +WPI within AckWait.
        self._tick_every = min(opts.idle_heartbeat / 4, 1.0, (target.ack_wait or 8.0) / 8)
        self._body_cache: Dict[Tuple[int, int, str], bytes] = {}
        self._count_bytes = opts.bytes_mode
        # The most messages held at once: what the callers take within a share
        # of AckWait (user side, under the receiver lock).
        self._set_cap(opts.max_messages)

    # -- credit (user side, receiver lock held) ---------------------------------------

    @property
    def _pending_msgs(self) -> int:
        return max(self._base - self._receiver.credited, 0)

    @_pending_msgs.setter
    def _pending_msgs(self, value: int) -> None:
        self._base = self._receiver.credited + value
        self._update_refill_at()

    def _update_refill_at(self) -> None:
        # A take numbered above this finds pending below the refill threshold.
        self._receiver.refill_at = self._base - self._refill_below + 1

    def took(self, msg: Msg) -> None:
        """A message was handed out (lock held; its count is already in the
        receiver's ``credited``). Refills are checked when a caller asks for
        the next one (ADR-37), not here."""
        if self._count_bytes:
            size = msg.size
            self._pending_bytes = max(self._pending_bytes - size, 0)
            self._receiver.taken_bytes += size

    def paced(self, pace: float) -> None:
        """New pace sample: hold no more than the callers take within a share
        of AckWait (no duplicates for slow callers; fast ones are not capped)."""
        ack_wait = self._target.ack_wait
        if ack_wait and not self.opts.bytes_mode and pace > 0:
            cap = max(1, min(self.opts.max_messages, int(ack_wait * _ACK_WAIT_SHARE / pace)))
            if cap != self._cap:
                self._set_cap(cap)

    def _due(self) -> Optional[Tuple[int, int]]:
        return refill(self.opts, self._pending_msgs, self._pending_bytes, self._receiver.credited, self._cap)

    def want_more(self) -> None:
        """A caller wants a message; top up if due. Called per take: the
        usual answer ("enough pending") costs two comparisons."""
        if self._pull_requested or self._pending_msgs >= self._refill_below:
            return
        if self._due() is not None:
            self._pull_requested = True
            self._conn.call_soon(self._maybe_pull)

    def _set_cap(self, cap: int) -> None:
        self._cap = cap
        # Below this many pending messages a refill may be due (bytes mode: always look).
        opts = self.opts
        self._refill_below = (
            opts.max_messages + 1
            if opts.bytes_mode
            else (opts.threshold_messages if cap >= opts.max_messages else min(opts.threshold_messages, math.ceil(cap / 2)))
        )
        self._update_refill_at()

    def _maybe_pull(self) -> None:
        with self._lock:
            self._pull_requested = False
            if self._done or self._shutting_down or not self._connected or self._receiver.state is not OPEN:
                return
            due = self._due()
            if due is None:
                return
            if self.opts.bytes_mode:
                # Full again (stop_after may have asked for fewer than the 1,000,000 batch).
                self._pending_msgs = min(self._pending_msgs + due[0], self.opts.max_messages)
                self._pending_bytes = self.opts.max_bytes
            else:
                self._pending_msgs += due[0]  # requested and not yet taken: the limit
        self._last_pull = (self._recv_msgs, due[1])
        self._send_pull(self._body(*due))

    def _fits(self, count: int) -> bool:
        opts = self.opts
        return not opts.bytes_mode and self._recv_msgs + count - self._receiver.credited_now() <= opts.max_messages

    def _overflows(self, msg: Msg) -> bool:
        """A message beyond max_messages / max_bytes buffered (a stale pull
        still delivering after an alarm): never hold it."""
        opts = self.opts
        if self._recv_msgs - self._receiver.credited_now() >= opts.max_messages:
            self._stats.nakd_overflow += 1
            return True
        if opts.bytes_mode and self._recv_bytes - self._receiver.taken_bytes + msg.size > opts.max_bytes:
            self._stats.nakd_overflow += 1
            return True
        return False

    def _body(self, batch: int, max_bytes: int) -> bytes:
        pin = self._pin.value if self._pin is not None else ""
        key = (batch, max_bytes, pin)
        body = self._body_cache.get(key)
        if body is None:
            opts = self.opts
            body = pull_request(batch, opts.expires, max_bytes, opts.idle_heartbeat, False, opts.priority, pin)
            if len(self._body_cache) < 64:
                self._body_cache[key] = body
        return body

    def _reset_pending(self) -> None:
        with self._lock:
            self._pending_msgs = 0
            self._pending_bytes = 0
        self._guard = True

    def _on_batch(self, msgs: List[Msg]) -> None:
        self._backoff = 0.0

    # -- statuses -------------------------------------------------------------

    def _on_status(self, code: str, desc: str, hdrs: Dict[str, str]) -> None:
        kind = self._classify(code, desc)
        if kind is None:
            return
        if kind.terminal:
            self._begin_shutdown(status_error(kind, code, desc))
            return
        if kind is StatusKind.END or kind is StatusKind.SHUTDOWN:
            msgs, nbytes = pending_from_headers(hdrs)
            if code == "423" and self._pin is not None:
                self._pin.value = ""  # no longer the pinned one: pull without an id
            with self._lock:
                if code == "423" and not msgs:  # pin mismatch without counts: start over
                    self._pending_msgs = self._pending_bytes = 0
                else:
                    self._pending_msgs = max(self._pending_msgs - msgs, 0)
                    self._pending_bytes = max(self._pending_bytes - nbytes, 0)
            if kind is StatusKind.SHUTDOWN:
                self._report(status_error(kind, code, desc))
            if code == "409" and self._never_fits(nbytes, desc):
                self._back_off(errors.PullStatusError(409, f"{desc}: the next message is larger than max_bytes"))
                return
            self._maybe_pull()
        elif kind is StatusKind.LEADERSHIP:
            self._reset_pending()
            self._report(status_error(kind, code, desc))
            self._maybe_pull()
        elif kind is StatusKind.LIMIT:
            self._back_off(status_error(kind, code, desc))
        else:  # 503 no responders, unknown statuses: report; is the consumer still there?
            self._report(status_error(kind, code, desc))
            if kind is StatusKind.NO_RESPONDERS:
                self._check_consumer()

    def _never_fits(self, nbytes: int, desc: str) -> bool:
        """A 409 Message Size Exceeds MaxBytes that ends the last pull, which
        got nothing and asked for the full max_bytes: the next message can
        never fit, and an at-once re-pull would spin on this 409."""
        return (
            desc.lower().startswith("message size")
            and nbytes >= self.opts.max_bytes
            and (self._recv_msgs, nbytes) == self._last_pull
        )

    def _back_off(self, exc: BaseException) -> None:
        """Report; re-pulling at once would be refused again: wait, doubling."""
        self._report(exc)
        self._backoff = min(max(self._backoff * 2, _LIMIT_BACKOFF_START), self.opts.expires)
        if self._backoff_handle is None:
            self._backoff_handle = self._loop.call_later(self._backoff, self._retry_after_backoff)

    def _retry_after_backoff(self) -> None:
        self._backoff_handle = None
        self._reset_pending()
        self._maybe_pull()

    def _cancel_timers(self) -> None:
        if self._backoff_handle is not None:
            self._backoff_handle.cancel()

    def _resume(self) -> None:
        self._reset_pending()
        self._maybe_pull()

    # -- heartbeats and connection ----------------------------------------------

    def _missed(self) -> bool:
        receiver = self._receiver
        # Only while a caller is blocked for a message: not while it processes one.
        return bool(receiver.waiting) and self._watch.missed(receiver.wait_since)

    async def _alive(self, since: float) -> bool:
        return await self._traffic_since(since, self.opts.idle_heartbeat)

    def _after_alarm(self) -> None:
        # Earlier pulls may still be open on the server: move to a new inbox so
        # they cannot deliver on top of the new one, then pull afresh — unless
        # the consumer is gone.
        self._check_consumer(then=self._start_repull)

    def _start_repull(self) -> None:
        self._loop.create_task(self._repull_on_new_inbox())

    async def _repull_on_new_inbox(self) -> None:
        if self._done or self._shutting_down or self._sid is None:
            return
        old = self._sid
        self._inbox = self._conn.new_inbox()
        self._sid = await self._conn.subscribe(self._inbox, self)
        self._loop.create_task(self._conn.unsubscribe(old, drain=True, timeout=_SHUTDOWN_FLUSH))
        self._reset_pending()
        self._maybe_pull()

class FetchEngine(_Engine):
    """One pull request on its own inbox (fetch, fetch_no_wait, next)."""

    def __init__(
        self,
        conn: "Connection",
        receiver: Receiver,
        target: PullTarget,
        opts: FetchOptions,
        pin: Optional[PinId] = None,
    ) -> None:
        super().__init__(conn, receiver, target)
        self.opts = opts
        if opts.priority is not None and opts.priority.pinned:
            self._pin = pin or PinId()  # shared by the fetches of one Consumer handle
        self._received = 0
        self._bytes = 0
        self._watch = Watchdog(2 * opts.idle_heartbeat, opts.client_timeout)
        receiver.lock_free = True  # one pull: no credit to keep
        receiver.refill_at = 1 << 62
        tick = min(opts.client_timeout, 2 * opts.idle_heartbeat or opts.client_timeout) / 4
        self._tick_every = min(max(tick, 0.005), 0.25)
        self._shutdown_task: Optional["asyncio.Future[None]"] = None

    async def start(self) -> None:
        if self._receiver.state is STOPPED:
            self._loop = asyncio.get_running_loop()
            self._done = True
            self._closed()
            return
        await self._subscribe()
        o = self.opts
        self._watch.traffic()
        self._timer = self._loop.call_later(self._tick_every, self._tick)
        pin = self._pin.value if self._pin is not None else ""
        self._send_pull(pull_request(o.max_messages, o.expires, o.max_bytes, o.idle_heartbeat, o.no_wait, o.priority, pin))

    def _on_batch(self, msgs: List[Msg]) -> None:
        self._received += len(msgs)
        if self.opts.max_bytes:
            self._bytes += sum(m.size for m in msgs)
        if self._received >= self.opts.max_messages or (self.opts.max_bytes and self._bytes >= self.opts.max_bytes):
            self._loop.call_soon(self._end_pull, None)

    def _on_status(self, code: str, desc: str, hdrs: Dict[str, str]) -> None:
        kind = self._classify(code, desc)
        if kind is None:
            return
        if code == "423":  # another puller holds the pin: this one must pull again without an id
            if self._pin is not None:
                self._pin.value = ""
            self._end_pull(errors.PinIdMismatchError(423, desc))
            return
        self._end_pull(None if kind is StatusKind.END else status_error(kind, code, desc))

    def _end_with(self, err: BaseException) -> None:
        self._end_pull(err)

    def _tick(self) -> None:
        self._timer = self._loop.call_later(self._tick_every, self._tick)
        if self._checking or self._done:
            return
        if self._watch.missed():
            self._checking = True
            self._loop.create_task(self._confirm_alarm(self._watch.last))
        elif self._watch.expired():
            self._end_pull(None)  # the pull is lost (server restart…): end it like an expiry

    async def _confirm_alarm(self, since: float) -> None:
        try:
            false_alarm = await self._traffic_since(since, self.opts.idle_heartbeat)
        finally:
            self._checking = False
        if not false_alarm:
            self._stats.missed_heartbeats += 1
            self._end_pull(errors.NoHeartbeatError(f"no heartbeat for {self._watch.alarm_after:g}s"))

    def _end_pull(self, error: Optional[BaseException]) -> None:
        if self._done:
            return
        self._finish(error)
        self._loop.create_task(self._close())

    async def _close(self) -> None:
        await self._unsubscribe(drain=False)
        self._closed()

    def took(self, msg: Msg) -> None:
        """User side: one pull keeps no credit and never refills."""

    def paced(self, pace: float) -> None:
        """User side: one pull keeps no buffer cap."""

    def want_more(self) -> None:
        """User side: one pull never refills."""

    def shutdown(self, mode: str) -> "asyncio.Future[None]":
        """The user gave up on this fetch (loop thread): NAK what came and is unread."""
        if self._shutdown_task is None:
            self._loop = self._loop or asyncio.get_running_loop()
            self._shutdown_task = self._loop.create_task(self._cancel())
        return self._shutdown_task

    async def _cancel(self) -> None:
        if not self._started:
            self._done = True
            self._closed()
            return
        still_open = not self._done
        self._nak_arrivals = True
        self._flush()
        if still_open:
            self._finish(None)
        # While the pull was still open, messages may be in flight: drain them.
        await self._unsubscribe(drain=still_open)
        self._nak_queued()
        self._closed()
