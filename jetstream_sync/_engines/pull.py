"""The pull engines: loop-side halves of messages()/consume() and fetch().

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
import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from .. import errors
from .engine import ACK_WAIT_SHARE, SHUTDOWN_FLUSH, ConsumerTarget, ContinuousEngine, Engine, PinId
from .receiver import OPEN, Receiver
from .._core.message import Msg
from ..options import ConsumeOptions, FetchOptions
from .protocol import StatusKind, Watchdog, pending_from_headers, pull_request, refill, status_error

if TYPE_CHECKING:  # pragma: no cover
    from .._core.connection import Connection

_log = logging.getLogger("jetstream_sync._pull")  # the logger name users configure, kept from before the move
monotonic = time.monotonic

_LIMIT_BACKOFF_START = 1.0


@dataclass(frozen=True)
class PullTarget(ConsumerTarget):
    """Where an engine pulls from."""

    pull_subject: str  # $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>

    @property
    def subject(self) -> str:
        return self.pull_subject


class PullEngine(ContinuousEngine):
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

    def _shift_pending(self, delta: int, most: Optional[int] = None) -> None:
        """pending := max(pending + delta, 0), at most ``most``, from one
        reading of the credited count: a consume() worker adds to it without
        the lock, and a credit between two readings would be counted twice
        (pending one too high for good, each race one more)."""
        credited = self._receiver.credited
        pending = max(max(self._base - credited, 0) + delta, 0)
        self._base = credited + (pending if most is None else min(pending, most))
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
            cap = max(1, min(self.opts.max_messages, int(ack_wait * ACK_WAIT_SHARE / pace)))
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
                self._shift_pending(due[0], self.opts.max_messages)
                self._pending_bytes = self.opts.max_bytes
            else:
                self._shift_pending(due[0])  # requested and not yet taken: the limit
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
                    self._shift_pending(-msgs)
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
        self._loop.create_task(self._conn.unsubscribe(old, drain=True, timeout=SHUTDOWN_FLUSH))
        self._reset_pending()
        self._maybe_pull()


class FetchEngine(Engine):
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
        if not await self._subscribe():
            return
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
