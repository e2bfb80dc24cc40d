"""What the loop-side engines share: the subscription and its sink,
chunked hand-off to the :class:`Receiver`, status parsing, the consumer
check (``Engine``); and for the continuous ones (pull consume, push) the
connection listeners, error reports, +WPI keepalive, stop and drain
(``ContinuousEngine``). Loop thread only, except where a method says "user side".
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, List, Optional, Tuple

import janus

from .. import errors
from .receiver import OPEN, STOPPED, WAKE, End, Receiver, Report
from .._core.message import WPI, Msg, WireMsg, parse_header_block, pin_id, reply_bytes
from .protocol import StatusKind, Watchdog, classify_status
from .._core.logfields import log_fields

if TYPE_CHECKING:  # pragma: no cover
    from .._core.connection import Connection

_log = logging.getLogger("jetstream_sync._engine")  # the logger name users configure, kept from before the move
monotonic = time.monotonic

SHUTDOWN_FLUSH = 5.0
# Hold no more than the callers take in this share of AckWait, and keep
# messages buffered longer than it alive with +WPI.
ACK_WAIT_SHARE = 0.5


@dataclass(frozen=True)
class ConsumerTarget:
    """The consumer an engine reads from: names, info subject, AckWait."""

    stream: str
    consumer: str
    info_subject: str  # $JS.API.CONSUMER.INFO.<stream>.<consumer>
    ack_wait: Optional[float]  # seconds; None when acks are off
    api_timeout: float

    @property
    def subject(self) -> str:
        """Pulled from (pull) or delivered on (push): each kind of target says."""
        raise NotImplementedError


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


class Engine:
    """What the continuous and the one-shot engines share: the subscription,
    chunked hand-off, status parsing, the consumer check. Loop thread only,
    except where a method says "user side"."""

    def __init__(self, conn: "Connection", receiver: Receiver, target: ConsumerTarget) -> None:
        self._conn = conn
        self._receiver = receiver
        self._lock = receiver.lock
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
        # NAKs of a stop are held while the subscription has interest: the
        # server redelivers a NAK'd message at once, into an open pull (or to
        # this push subscription), where it would be NAK'd again and use up
        # max_deliver. True while not subscribed: nothing to hold for.
        self._deferred: List[Msg] = []
        self._interest_gone = True
        receiver.engine = self

    async def _subscribe(self) -> bool:
        """Subscribe; False (and closed) when stopped, or the client closed, before it started."""
        self._loop = asyncio.get_running_loop()
        if self._receiver.state is STOPPED:
            self._done = True
            self._closed()
            return False
        self._q = janus.Queue()
        self._receiver.attach(self._q.sync_q)
        self._sid = await self._open()
        self._interest_gone = False
        self._remove_perm = self._conn.watch_permission(self._subject, self._denied)
        self._started = True
        return True

    async def _open(self) -> int:
        """Subscribe where the messages come (pull: a fresh inbox); the sid."""
        self._inbox = self._conn.new_inbox()
        return await self._conn.subscribe(self._inbox, self)

    def _denied(self, err: BaseException) -> None:
        self._end_with(err)

    def _end_with(self, err: BaseException) -> None:
        raise NotImplementedError

    # -- the subscription's sink (loop thread, called by the parser) -------------

    # The parser calls make(subject, reply, data, conn, hdr_raw) per message.
    make: Callable[[bytes, bytes, bytes, Any, Optional[bytes]], Any] = WireMsg

    def nak_later(self, msgs: List[Msg]) -> None:
        """Loop thread: NAK messages never handed out, once the subscription's
        interest is gone (at once if it is)."""
        if self._interest_gone:
            self._receiver.nak(msgs)
        else:
            self._deferred.extend(msgs)

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
            _log.debug("pull request not sent: connection closed", extra=self._log_fields())

    def _log_fields(self) -> Dict[str, Any]:
        """The log fields of this engine's records: its subject, stream and consumer."""
        t = self._target
        return log_fields(subject=self._subject, stream=t.stream, consumer=t.consumer)

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
            self._q.async_q.put_nowait(End(error))

    def _closed(self) -> None:
        """Loop thread: everything is written; wake whoever waits in stop()."""
        self._receiver.engine_closed()

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
                self.nak_later(item)
            elif not isinstance(item, Report) and item is not WAKE:
                keep.append(item)
        for item in keep:
            q.put_nowait(item)

    async def _unsubscribe(self, drain: bool) -> None:
        sid, self._sid = self._sid, None
        try:
            if sid is not None:
                await self._conn.unsubscribe(sid, drain, SHUTDOWN_FLUSH)
        finally:
            # No interest now: the NAKs held back go out, and the server
            # redelivers them to other subscribers.
            self._interest_gone = True
            deferred, self._deferred = self._deferred, []
            self._receiver.nak(deferred)

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
            _log.debug("consumer check on %s: %r", self._target.info_subject, exc, extra=self._log_fields())
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


class ContinuousEngine(Engine):
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
        if not await self._subscribe():
            return
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
        old = now - ack_wait * ACK_WAIT_SHARE
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
        _log.info("%s on %s: %s", type(exc).__name__, self._subject, exc, extra=self._log_fields())
        if self._receiver.error_handler is not None and not self._done:
            self._q.async_q.put_nowait(Report(exc))

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
        draining = self._shutdown_task is not None and not self._nak_arrivals
        task = self._begin_shutdown(None, nak=(mode == "stop"))
        if mode == "stop" and draining:
            # stop() after drain(): what the drain queued and nobody took is
            # NAK'd too, or it would wait out AckWait.
            self._nak_arrivals = True
            self._flush()
            self._nak_queued()
            task.add_done_callback(lambda _: self._nak_queued())
        return task

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

