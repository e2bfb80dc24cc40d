"""The push engine: the loop side of a push consumer's messages()/consume().

One core subscription on the consumer's deliver subject (in its deliver
group, if it has one) hands messages to the user side (:class:`Receiver`)
in chunks, as the pull engine does; stop, drain, reports and the +WPI
keepalive are the continuous pull engine's. What ADR-15 adds:

- heartbeats: no traffic for 3 × the consumer's ``idle_heartbeat`` raises an
  alarm (NoHeartbeatError to the error handler, never terminal unless the
  consumer turns out to be gone);
- flow control: a ``100 FlowControl Request`` is answered once the user has
  taken every message that came before it (so the server never runs ahead of
  the user); a heartbeat carrying ``Nats-Consumer-Stalled`` is answered at
  once, so a request that was lost or is still waiting never stalls delivery;
- gaps: consumer sequences (from the ack subjects and the heartbeats'
  ``Nats-Last-Consumer``) must follow one another; a gap is reported as
  ConsumerSequenceMismatchError. Not in a deliver group, where each member
  sees only its share.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from .. import errors
from .engine import ConsumerTarget, ContinuousEngine, monotonic
from .receiver import PullStats, Receiver
from .._core.message import WireMsg, consumer_sequence, reply_bytes
from ..options import PushOptions
from .protocol import Watchdog, status_error
from .._core.logfields import log_fields

if TYPE_CHECKING:  # pragma: no cover
    from .._core.connection import Connection

__all__ = ["PushTarget", "PushStats", "PushEngine"]

_log = logging.getLogger("jetstream_sync._push")  # the logger name users configure, kept from before the move
_NEVER = 1 << 62  # a take number no caller reaches: no flow-control answer pending
_FC_STATUS = b"NATS/1.0 100"
_FC_KEY = "100 FlowControl Request"


@dataclass(frozen=True)
class PushTarget(ConsumerTarget):
    """Where a push engine listens, and what it needs of the consumer's config."""

    deliver_subject: str
    deliver_group: str  # "" for none
    idle_heartbeat: float  # seconds; 0 = the server sends none

    @property
    def subject(self) -> str:
        return self.deliver_subject


@dataclass
class PushStats(PullStats):
    """PullStats (``pulls`` stays 0) and what push delivery adds."""

    flow_control_replies: int = 0  # FC requests answered after the user took what came before
    stalled_replies: int = 0  # answered at once for a heartbeat saying the consumer is stalled
    sequence_gaps: int = 0  # consumer-sequence mismatches reported


class _FlowControl:
    """What the parser's ``make`` returns for a flow-control request."""

    __slots__ = ("reply",)

    def __init__(self, reply: bytes) -> None:
        self.reply = reply


class PushEngine(ContinuousEngine):
    """Delivery for one push MessagesContext / ConsumeContext. Loop thread
    only, except where a method says "user side"."""

    _target: PushTarget

    def __init__(self, conn: "Connection", receiver: Receiver, target: PushTarget, opts: PushOptions) -> None:
        receiver.stats = self._push_stats = PushStats()  # before the base class takes it
        super().__init__(conn, receiver, target)
        self.opts = opts
        receiver.lock_free = True
        receiver.refill_at = _NEVER  # lowered to a flow-control request's position
        self._watch = Watchdog(opts.heartbeat_alarm)
        hb = target.idle_heartbeat
        self._tick_every = min(hb / 2 if hb else 1.0, 1.0, (target.ack_wait or 8.0) / 8)
        # The flow-control request waiting for the user: answered once this
        # many messages were taken (0: none). Set under the receiver lock.
        self._fc_reply = ""
        self._fc_at = 0
        self._fc_soon = False
        self._controls = 0  # flow-control requests made by make() and not yet handled
        self._gaps = not target.deliver_group
        self._last_cseq = 0  # 0: not known yet

    async def _open(self) -> int:
        t = self._target
        return await self._conn.subscribe(t.deliver_subject, self, queue=t.deliver_group)

    # -- the subscription's sink (loop thread, called by the parser) ---------------

    def make(self, subject: bytes, reply: bytes, data: bytes, conn: Any, hdr_raw: Optional[bytes]) -> Any:
        """A Msg; a flow-control request (a status 100 with a reply) is marked instead."""
        if hdr_raw is None or data or not hdr_raw.startswith(_FC_STATUS):
            return WireMsg(subject, reply, data, conn, hdr_raw)
        self._controls += 1
        return _FlowControl(reply)

    def on_msgs(self, msgs: List[Any]) -> None:
        if not self._controls:
            self._deliver(msgs)
            return
        self._controls = 0
        self._watch.last = monotonic()
        run: List[Any] = []
        for msg in msgs:
            if type(msg) is _FlowControl:
                if run:
                    self._deliver(run)
                    run = []
                self._flow_control(msg.reply.decode())
            else:
                run.append(msg)
        if run:
            self._deliver(run)

    def _deliver(self, msgs: List[Any]) -> None:
        if self._gaps:
            self._check_sequence(msgs)
        super().on_msgs(msgs)

    def _on_status(self, code: str, desc: str, hdrs: Dict[str, str]) -> None:
        kind = self._classify(code, desc)
        if kind is None:  # an idle heartbeat
            stalled = hdrs.get("Nats-Consumer-Stalled")
            if stalled:
                self._answer(stalled, stalled=True)
            if self._gaps:
                self._check_last(hdrs.get("Nats-Last-Consumer", ""))
            return
        err = status_error(kind, code, desc)
        if kind.terminal:  # 409 Consumer Deleted
            self._begin_shutdown(err)
        else:
            self._report(err)

    # -- flow control ---------------------------------------------------------------

    def _flow_control(self, reply: str) -> None:
        """A request: answer once the user took every message before it."""
        statuses = self._stats.statuses
        statuses[_FC_KEY] = statuses.get(_FC_KEY, 0) + 1
        receiver = self._receiver
        with self._lock:
            if receiver.credited < self._recv_msgs:
                self._fc_reply, self._fc_at = reply, self._recv_msgs
                receiver.refill_at = self._recv_msgs - 1  # that take calls want_more()
                return
        self._answer(reply)

    def want_more(self) -> None:
        """User side, per take past ``refill_at``: is the pending answer due?"""
        at = self._fc_at
        if at and self._receiver.credited >= at and not self._fc_soon:
            self._fc_soon = True
            self._conn.call_soon(self._answer_due)

    def took(self, msg: Any) -> None:
        """User side, receiver lock held: a message was handed out (consume:
        its handler returned)."""
        self.want_more()

    def paced(self, pace: float) -> None:
        """User side: the server paces push delivery; nothing to cap."""

    def _answer_due(self) -> None:
        self._fc_soon = False
        with self._lock:
            reply, at = self._fc_reply, self._fc_at
            if not at or self._receiver.credited < at:
                return
        self._answer(reply)

    def _answer(self, reply: str, stalled: bool = False) -> None:
        """Reply (empty) to a flow-control subject; clears the pending request
        it answers. Stalled heartbeats repeat until the server has an answer:
        each is answered, as a lost answer would stall delivery for good."""
        with self._lock:
            if reply == self._fc_reply:
                self._fc_reply, self._fc_at = "", 0
                self._receiver.refill_at = _NEVER
        if self._done or not self._conn.send_pub(reply, "", b""):
            return
        if stalled:
            self._push_stats.stalled_replies += 1
        else:
            self._push_stats.flow_control_replies += 1

    # -- sequence gaps ----------------------------------------------------------------

    def _check_sequence(self, msgs: List[Any]) -> None:
        """Consumer sequences rise by one per delivery: a run of n is gap-free
        when its ends are n - 1 apart and it follows the last one seen, so
        only the ends are parsed unless something is off."""
        first = consumer_sequence(reply_bytes(msgs[0]))
        n = len(msgs)
        last = first if n == 1 else consumer_sequence(reply_bytes(msgs[-1]))
        prev = self._last_cseq
        if not first or (prev and first != prev + 1) or last - first != n - 1:
            self._scan(msgs)
        else:
            self._last_cseq = last

    def _scan(self, msgs: List[Any]) -> None:
        for msg in msgs:
            seq = consumer_sequence(reply_bytes(msg))
            if not seq:  # not a JetStream message: nothing to check
                continue
            prev = self._last_cseq
            if prev and seq != prev + 1:
                self._gap(prev + 1, seq)
            self._last_cseq = seq

    def _check_last(self, value: str) -> None:
        """A heartbeat's ``Nats-Last-Consumer``: the last sequence the server sent."""
        if not value.isdigit():
            return
        last = int(value)
        if self._last_cseq and last != self._last_cseq:
            self._gap(self._last_cseq + 1, last + 1)
        self._last_cseq = last

    def _gap(self, expected: int, received: int) -> None:
        self._push_stats.sequence_gaps += 1
        self._report(errors.ConsumerSequenceMismatchError(expected, received))

    # -- heartbeats -------------------------------------------------------------------

    # The base class's _missed() watches all the time, not only while a
    # caller waits: heartbeats come whatever the user does (the server is
    # idle or stalled).

    async def _alive(self, since: float) -> bool:
        if self._target.deliver_group:
            # Each heartbeat goes to one member of the group: silence here is
            # normal while the server holds the consumer bound.
            return await self._bound()
        return await self._traffic_since(since, self._target.idle_heartbeat)

    def _after_alarm(self) -> None:
        self._check_consumer()  # gone: ends with ConsumerDeletedError

    async def _bound(self) -> bool:
        """The server answers and has interest for the consumer's deliver subject."""
        t = self._target
        try:
            msg = await self._conn.request(t.info_subject, b"", t.api_timeout)
            info = json.loads(msg.data)
        except Exception as exc:  # timeouts, JetStream down: not alive as far as we know
            _log.debug("consumer info on %s: %r", t.info_subject, exc,
                       extra=log_fields(stream=t.stream, consumer=t.consumer))
            return False
        return bool(info.get("push_bound")) and not info.get("error")
