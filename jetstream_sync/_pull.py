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
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, List, Optional, Tuple

import janus

from . import errors
from ._wire import pub_command, send_raw
from .message import NAK, Msg, parse_header_block
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
    from .consumer import Consumer

_log = logging.getLogger("jetstream_sync")
monotonic = time.monotonic

# nats-py's slow-consumer limits would drop messages silently past these; the
# engine bounds what it asks for, so keep nats-py out of the way.
_SUB_LIMITS = dict(pending_msgs_limit=0, pending_bytes_limit=0)
_LIMIT_BACKOFF_START = 1.0
_SHUTDOWN_FLUSH = 5.0


@dataclass
class PullStats:
    """Counters of one messages()/consume()/fetch(); read from any thread."""

    delivered: int = 0  # messages handed to the user
    pulls: int = 0  # pull requests sent
    heartbeats: int = 0  # 100 Idle Heartbeat received
    missed_heartbeats: int = 0  # watchdog alarms
    reconnects: int = 0
    transient_errors: int = 0  # reported to the error handler (or logged)
    nakd_on_stop: int = 0  # buffered, never handed out, NAK'd by stop()
    buffered_high_water: int = 0  # most messages received and not yet handed out
    buffered_bytes_high_water: int = 0  # the same in bytes (max_bytes mode only)
    statuses: Dict[str, int] = field(default_factory=dict)  # "408 Request Timeout" -> count


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


class Receiver:
    """User side: the buffer of received messages and the blocking take().

    Threads share one buffer. One of them at a time blocks on the janus queue
    for the next chunk; the others wait on a condition for the buffer to
    fill, so a chunk is shared out instead of parked with one thread.
    """

    def __init__(self, consumer: "Consumer", error_handler: Optional[Callable[[BaseException], Any]] = None) -> None:
        self._client = consumer._js._client
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._buf: Deque[Msg] = collections.deque()
        self._state = OPEN
        self._end: Optional[_End] = None
        self._end_raised = False
        self._stop_error: Optional[BaseException] = None
        self._fetching = False
        self._followers = 0
        self.waiting = 0  # threads blocked for a message (read by the watchdog)
        self.wait_since = 0.0
        self.stats = PullStats()
        self.taken_bytes = 0  # bytes handed out (max_bytes mode)
        self.error_handler = error_handler
        self._queue: Any = None  # janus sync side, set by the engine
        self.closed_event = threading.Event()
        self.engine: Any = None

    # -- taking -------------------------------------------------------------

    def take(self, timeout: Optional[float], credit: bool = True) -> Msg:
        """The next message. Raises TimeoutError after ``timeout`` seconds,
        the terminal error once, then :class:`_Finished` when there is no more."""
        deadline = None if timeout is None else monotonic() + timeout
        lock = self._lock
        lock.acquire()
        try:
            if self._state is OPEN:
                self.engine.want_more()  # refills are driven by the user asking (ADR-37)
            while True:
                if self._state is STOPPED:
                    if self._stop_error is not None:
                        raise self._stop_error
                    raise _Finished()
                buf = self._buf
                if buf:
                    msg = buf.popleft()
                    if credit:
                        self._credit(msg)
                    if buf and self._followers:
                        self._cond.notify()
                    return msg
                if self._end is not None:
                    if self._end.error is not None and not self._end_raised:
                        self._end_raised = True
                        raise self._end.error
                    raise _Finished()
                remaining = None if deadline is None else deadline - monotonic()
                if remaining is not None and remaining <= 0:
                    raise errors.TimeoutError("no message within %.3fs" % timeout)
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
                        self._client._outbox.kick()  # acks go out before we sleep
                        item = self._get(remaining)
                    finally:
                        lock.acquire()
                        self._fetching = False
                finally:
                    self.waiting -= 1
                report = self._absorb(item)
                if self._followers:
                    self._cond.notify_all()
                if report is not None:
                    lock.release()
                    try:
                        self._call_error_handler(report)
                    finally:
                        lock.acquire()
        finally:
            lock.release()

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
                self.nak(item)  # never handed out
            else:
                self._buf.extend(item)
            return None
        if isinstance(item, _Report):
            return item.error
        if isinstance(item, _End) and self._end is None:
            self._end = item  # threads waiting on the condition see it when woken
        return None

    def _credit(self, msg: Msg) -> None:
        """Account a message handed to the user (lock held)."""
        self.stats.delivered += 1
        engine = self.engine
        if engine is not None:
            engine.taken(msg)

    def credit(self, msg: Msg) -> None:
        with self._lock:
            self._credit(msg)

    def _call_error_handler(self, exc: BaseException) -> None:
        handler = self.error_handler
        if handler is None:
            return
        try:
            handler(exc)
        except Exception:
            _log.exception("jetstream_sync: error handler raised")

    # -- ending ---------------------------------------------------------------

    def stop(self, error: Optional[BaseException] = None) -> bool:
        """Stop now; NAK what was received and never handed out. False if
        already stopped. ``error`` is raised to callers instead of the end of
        iteration (the client closing under them)."""
        with self._lock:
            if self._state is STOPPED:
                return False
            self._state = STOPPED
            self._stop_error = error
            leftover = list(self._buf)
            self._buf.clear()
            self._cond.notify_all()
        self.nak(leftover)
        if self._queue is not None:
            self._queue.put_nowait(_WAKE)  # the thread blocked on the queue re-checks state
        if self.engine is not None and not self._client._closed:
            self._client._lt.call_soon(self.engine.shutdown, "stop")
        return True

    def drain(self) -> bool:
        with self._lock:
            if self._state is not OPEN:
                return False
            self._state = DRAINING
        if self.engine is not None:
            self._client._lt.call_soon(self.engine.shutdown, "drain")
        return True

    @property
    def state(self) -> str:
        return self._state

    @property
    def finished(self) -> bool:
        return self._state is STOPPED or (self._end is not None and not self._buf)

    def nak(self, msgs: List[Msg]) -> None:
        """NAK messages never handed out, so the server redelivers them at once."""
        if not msgs or self._client._closed:
            return
        self.stats.nakd_on_stop += len(msgs)
        self._client._outbox.put_many([(m.reply, NAK) for m in msgs])


class _Finished(Exception):
    """Internal: the receiver has nothing more to hand out."""


class _Engine:
    """What the continuous and the one-shot engines share: the subscription,
    chunked hand-off, status parsing."""

    def __init__(self, consumer: "Consumer", receiver: Receiver) -> None:
        js = consumer._js
        self._client = js._client
        self._receiver = receiver
        self._lock = receiver._lock
        self._stats = receiver.stats
        self._pull_subject = f"{js.api_prefix}.CONSUMER.MSG.NEXT.{consumer.stream_name}.{consumer.name}"
        self._q: "janus.Queue[Any]" = None  # type: ignore[assignment]
        self._sub: Any = None
        self._inbox = ""
        self._chunk: Optional[List[Msg]] = None
        self._watch = Watchdog(0.0)
        self._done = False
        self._nak_arrivals = False
        self._timer: Optional[asyncio.TimerHandle] = None
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        # Received so far; with what the user took, the size of the buffer.
        self._recv_msgs = 0
        self._recv_bytes = 0
        self._count_bytes = False
        receiver.engine = self

    async def _subscribe(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._q = janus.Queue()
        self._receiver._queue = self._q.sync_q
        client = self._client
        nc = client._nc
        self._inbox = nc.new_inbox()
        if client._wire:
            # No callback: messages never enter nats-py's queue; the
            # dispatcher hands them to _on_raw as they are parsed.
            self._sub = await nc.subscribe(self._inbox, **_SUB_LIMITS)
            client._dispatcher.register(self._sub._id, self._on_raw)
        else:
            self._sub = await nc.subscribe(self._inbox, cb=self._cb, **_SUB_LIMITS)

    def _on_raw(self, subject: bytes, reply: bytes, data: bytes, hdrs: Optional[bytes]) -> None:
        self._watch.last = monotonic()
        if hdrs is not None and not reply and not data and hdrs.startswith(b"NATS/1.0 "):
            end = hdrs.find(b"\r\n")
            code, _, desc = hdrs[9:end].decode(errors="replace").partition(" ")
            self._on_status(code, desc.strip(), parse_header_block(hdrs) or {})
            return
        self._on_user(Msg(subject.decode(), reply.decode(), data, None, self._client, hdrs))

    async def _cb(self, m: Any) -> None:
        """nats-py callback, used only when the fast dispatch is unavailable."""
        self._watch.last = monotonic()
        hdrs = m.headers
        if hdrs is not None and not m.reply and not m.data and "Status" in hdrs:
            # nats-py folds the next header line into a missing description (503).
            desc = hdrs.get("Description", "").split("\n", 1)[0].strip()
            self._on_status(hdrs["Status"], desc, hdrs)
            return
        self._on_user(Msg(m.subject, m.reply, m.data, hdrs, self._client))

    def _on_user(self, msg: Msg) -> None:
        if self._nak_arrivals or self._done:
            self._receiver.nak([msg])
            return
        self._recv_msgs += 1
        if self._count_bytes:
            self._recv_bytes += msg.size
        self._on_user_msg(msg)
        chunk = self._chunk
        if chunk is None:
            self._chunk = [msg]
            self._loop.call_soon(self._flush)
        else:
            chunk.append(msg)

    def _on_user_msg(self, msg: Msg) -> None:
        pass

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
            buffered = self._recv_msgs - stats.delivered
            if buffered > stats.buffered_high_water:
                stats.buffered_high_water = buffered
            if self._count_bytes:
                nbytes = self._recv_bytes - receiver.taken_bytes
                if nbytes > stats.buffered_bytes_high_water:
                    stats.buffered_bytes_high_water = nbytes
            if self._nak_arrivals:
                self._receiver.nak(chunk)
            else:
                self._q.async_q.put_nowait(chunk)

    def _send_pull(self, body: bytes) -> None:
        self._stats.pulls += 1
        client = self._client
        if client._wire:
            if not send_raw(client._nc, pub_command(self._pull_subject, self._inbox, body)):
                _log.debug("jetstream_sync: pull request not sent: connection closed")
            return
        task = self._loop.create_task(client._nc.publish(self._pull_subject, body, reply=self._inbox))
        task.add_done_callback(self._pull_sent)

    def _pull_sent(self, task: "asyncio.Task[None]") -> None:
        if not task.cancelled() and task.exception() is not None:
            _log.debug("jetstream_sync: pull request not sent: %r", task.exception())

    def _finish(self, error: Optional[BaseException]) -> None:
        """Hand over what is buffered, then the end marker (loop thread)."""
        if self._done:
            return
        self._flush()
        self._done = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._q.async_q.put_nowait(_End(error))

    def _nak_queued(self) -> None:
        """NAK every chunk still in the hand-off queue (stop)."""
        q = self._q.async_q
        keep = []
        while True:
            try:
                item = q.get_nowait()
            except janus.AsyncQueueEmpty:
                break
            if isinstance(item, list):
                self._receiver.nak(item)
            elif not isinstance(item, (_Report,)) and item is not _WAKE:
                keep.append(item)
        for item in keep:
            q.put_nowait(item)

    async def _unsubscribe(self, drain: bool) -> None:
        sub, self._sub = self._sub, None
        if sub is None:
            return
        try:
            await self._unsubscribe_sub(sub, drain)
        finally:
            if self._client._dispatcher is not None:
                self._client._dispatcher.unregister(sub._id)

    async def _unsubscribe_sub(self, sub: Any, drain: bool) -> None:
        if self._client._nc.is_closed:
            return
        try:
            if drain:
                # UNSUB, then a round trip: whatever the server sent before it
                # still reaches the callback instead of being dropped. No
                # wait_for: its extra task would let later publishes overtake
                # the UNSUB on the wire.
                async with asyncio.timeout(_SHUTDOWN_FLUSH):
                    await sub.drain()
            else:
                await sub.unsubscribe()
        except Exception as exc:  # connection going away; nothing more will arrive
            _log.debug("jetstream_sync: unsubscribe: %r", exc)


class PullEngine(_Engine):
    """Continuous pull for one MessagesContext / ConsumeContext (ADR-37 consume)."""

    def __init__(self, consumer: "Consumer", receiver: Receiver, opts: ConsumeOptions) -> None:
        super().__init__(consumer, receiver)
        self.opts = opts
        self._pending_msgs = 0
        self._pending_bytes = 0
        self._pull_requested = False
        self._connected = True
        self._shutting_down = False
        self._backoff = 0.0
        self._backoff_handle: Optional[asyncio.TimerHandle] = None
        self._listeners: List[Callable[[], None]] = []
        self._watch = Watchdog(2 * opts.idle_heartbeat)
        self._tick_every = min(opts.idle_heartbeat / 4, 1.0)
        self._body_cache: Dict[Tuple[int, int], bytes] = {}
        self._count_bytes = bool(opts.max_bytes)
        self._shutdown_task: Optional["asyncio.Task[None]"] = None

    async def start(self) -> None:
        await self._subscribe()
        client = self._client
        self._connected = client._nc.is_connected
        self._listeners = [
            client._add_listener("disconnected", self._on_disconnected),
            client._add_listener("reconnected", self._on_reconnected),
            client._add_listener("closed", self._on_closed),
        ]
        self._timer = self._loop.call_later(self._tick_every, self._tick)
        # The first pull goes out when the first message is asked for.

    # -- credit ---------------------------------------------------------------

    def taken(self, msg: Msg) -> None:
        """User side (receiver lock held): a message was handed out."""
        if self._pending_msgs > 0:
            self._pending_msgs -= 1
        if self.opts.max_bytes:
            size = msg.size
            self._pending_bytes = max(self._pending_bytes - size, 0)
            self._receiver.taken_bytes += size

    def want_more(self) -> None:
        """User side (receiver lock held): a caller wants a message; top up if due."""
        if not self._pull_requested and refill(self.opts, self._pending_msgs, self._pending_bytes) is not None:
            self._pull_requested = True
            self._client._lt.call_soon(self._maybe_pull)

    def _maybe_pull(self) -> None:
        with self._lock:
            self._pull_requested = False
            if self._done or self._shutting_down or not self._connected or self._receiver._state is not OPEN:
                return
            due = refill(self.opts, self._pending_msgs, self._pending_bytes)
            if due is None:
                return
            self._pending_msgs = self.opts.max_messages
            self._pending_bytes = self.opts.max_bytes
        self._send_pull(self._body(*due))

    def _body(self, batch: int, max_bytes: int) -> bytes:
        key = (batch, max_bytes)
        body = self._body_cache.get(key)
        if body is None:
            opts = self.opts
            body = pull_request(batch, opts.expires, max_bytes, opts.idle_heartbeat)
            if len(self._body_cache) < 64:
                self._body_cache[key] = body
        return body

    def _reset_pending(self) -> None:
        with self._lock:
            self._pending_msgs = 0
            self._pending_bytes = 0

    def _on_user_msg(self, msg: Msg) -> None:
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
            with self._lock:
                if code == "423" and not msgs:  # pin mismatch without counts: start over
                    self._pending_msgs = self._pending_bytes = 0
                else:
                    self._pending_msgs = max(self._pending_msgs - msgs, 0)
                    self._pending_bytes = max(self._pending_bytes - nbytes, 0)
            if kind is StatusKind.SHUTDOWN:
                self._report(status_error(kind, code, desc))
            self._maybe_pull()
        elif kind is StatusKind.LEADERSHIP:
            self._reset_pending()
            self._report(status_error(kind, code, desc))
            self._maybe_pull()
        elif kind is StatusKind.LIMIT:
            # Re-pulling at once would be refused again: back off, doubling.
            self._report(status_error(kind, code, desc))
            self._backoff = min(max(self._backoff * 2, _LIMIT_BACKOFF_START), self.opts.expires)
            if self._backoff_handle is None:
                self._backoff_handle = self._loop.call_later(self._backoff, self._retry_after_backoff)
        else:  # 503 no responders, unknown statuses: report; the watchdog re-pulls
            self._report(status_error(kind, code, desc))

    def _retry_after_backoff(self) -> None:
        self._backoff_handle = None
        self._reset_pending()
        self._maybe_pull()

    def _report(self, exc: BaseException) -> None:
        """A transient problem: count, log, queue for the error handler."""
        self._stats.transient_errors += 1
        _log.info("jetstream_sync: %s on %s: %s", type(exc).__name__, self._pull_subject, exc)
        if self._receiver.error_handler is not None and not self._done:
            self._q.async_q.put_nowait(_Report(exc))

    # -- heartbeats and connection ----------------------------------------------

    def _tick(self) -> None:
        self._timer = self._loop.call_later(self._tick_every, self._tick)
        if not self._connected or self._shutting_down or self._receiver._state is not OPEN:
            return
        receiver = self._receiver
        # Only while a caller is blocked for a message: not while it processes one.
        if not receiver.waiting or not self._watch.missed(receiver.wait_since):
            return
        self._stats.missed_heartbeats += 1
        self._reset_pending()
        self._maybe_pull()
        alarm = self._watch.alarm_after
        self._report(errors.NoHeartbeatError(f"no heartbeat for {alarm:g}s on {self._pull_subject}"))

    def _on_disconnected(self) -> None:
        self._connected = False

    def _on_reconnected(self) -> None:
        self._connected = True
        self._stats.reconnects += 1
        self._watch.traffic()
        self._reset_pending()
        self._maybe_pull()

    def _on_closed(self) -> None:
        self._connected = False
        self._begin_shutdown(errors.ConnectionClosedError("connection closed"))

    # -- ending ---------------------------------------------------------------

    def shutdown(self, mode: str) -> "asyncio.Task[None]":
        """``"stop"``: NAK everything not handed out; ``"drain"``: hand it all
        over. Loop thread; returns the (shared) shutdown task."""
        return self._begin_shutdown(None, nak=(mode == "stop"))

    def _begin_shutdown(self, error: Optional[BaseException], nak: bool = False) -> "asyncio.Task[None]":
        if self._shutdown_task is None:
            self._shutting_down = True
            self._shutdown_task = self._loop.create_task(self._shutdown(error, nak))
        return self._shutdown_task

    async def _shutdown(self, error: Optional[BaseException], nak: bool) -> None:
        for remove in self._listeners:
            remove()
        if self._backoff_handle is not None:
            self._backoff_handle.cancel()
        if nak:
            self._nak_arrivals = True
            self._flush()  # NAKs the chunk being collected
        closed = isinstance(error, errors.ConnectionClosedError)
        await self._unsubscribe(drain=error is None)
        if nak:
            self._nak_queued()
        if closed:
            self._drop_queued()
        self._finish(error)
        self._receiver.closed_event.set()

    def _drop_queued(self) -> None:
        """The connection is gone: nothing queued can be acked; drop it."""
        q = self._q.async_q
        while True:
            try:
                q.get_nowait()
            except janus.AsyncQueueEmpty:
                return


class FetchEngine(_Engine):
    """One pull request on its own inbox (fetch, fetch_no_wait, next)."""

    def __init__(self, consumer: "Consumer", receiver: Receiver, opts: FetchOptions) -> None:
        super().__init__(consumer, receiver)
        self.opts = opts
        self._received = 0
        self._bytes = 0
        self._watch = Watchdog(2 * opts.idle_heartbeat, opts.client_timeout)
        tick = min(opts.client_timeout, 2 * opts.idle_heartbeat or opts.client_timeout) / 4
        self._tick_every = min(max(tick, 0.005), 0.25)
        self._shutdown_task: Optional["asyncio.Task[None]"] = None

    async def start(self) -> None:
        await self._subscribe()
        o = self.opts
        self._watch.traffic()
        self._timer = self._loop.call_later(self._tick_every, self._tick)
        self._send_pull(pull_request(o.max_messages, o.expires, o.max_bytes, o.idle_heartbeat, o.no_wait))

    def _on_user_msg(self, msg: Msg) -> None:
        self._received += 1
        if self.opts.max_bytes:
            self._bytes += msg.size
        if self._received >= self.opts.max_messages or (self.opts.max_bytes and self._bytes >= self.opts.max_bytes):
            self._loop.call_soon(self._end_pull, None)

    def _on_status(self, code: str, desc: str, hdrs: Dict[str, str]) -> None:
        kind = self._classify(code, desc)
        if kind is None:
            return
        self._end_pull(None if kind is StatusKind.END else status_error(kind, code, desc))

    def _tick(self) -> None:
        self._timer = self._loop.call_later(self._tick_every, self._tick)
        if self._watch.missed():
            self._stats.missed_heartbeats += 1
            self._end_pull(errors.NoHeartbeatError(f"no heartbeat for {self._watch.alarm_after:g}s"))
        elif self._watch.expired():
            self._end_pull(None)  # the pull is lost (server restart…): end it like an expiry

    def _end_pull(self, error: Optional[BaseException]) -> None:
        if self._done:
            return
        self._finish(error)
        self._loop.create_task(self._close())

    async def _close(self) -> None:
        await self._unsubscribe(drain=False)
        self._receiver.closed_event.set()

    def taken(self, msg: Msg) -> None:
        """User side: one pull keeps no credit."""

    def want_more(self) -> None:
        """User side: one pull never refills."""

    def shutdown(self, mode: str) -> "asyncio.Task[None]":
        """The user gave up on this fetch (loop thread): NAK what came and is unread."""
        if self._shutdown_task is None:
            self._shutdown_task = self._loop.create_task(self._cancel())
        return self._shutdown_task

    async def _cancel(self) -> None:
        still_open = not self._done
        self._nak_arrivals = True
        self._flush()
        if still_open:
            self._finish(None)
        # While the pull was still open, messages may be in flight: drain them.
        await self._unsubscribe(drain=still_open)
        self._nak_queued()
        self._receiver.closed_event.set()
