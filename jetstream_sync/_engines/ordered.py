"""The loop side of ordered consumers: the server consumer they recreate, and
pull engines that hand out only messages that continue its sequence.

An ordered consumer reads a stream in order, exactly once, with no acks: the
server consumer behind it is ephemeral, memory-stored, one replica, AckNone.
Whenever the sequence could break — a consumer-sequence gap, the consumer
deleted, missing heartbeats, no responders, a reconnect — the engine moves to
a new inbox, deletes the old consumer and creates ``<prefix>_<serial+1>``
starting at the stream sequence after the last message it accepted, so the
user never sees a gap or a duplicate.

Thread rules: :class:`OrderedState` fields named ``cseq``, ``sseq``,
``name``, ``serial`` and ``pull_done`` are written on the loop thread only;
``last_taken`` by the user side; a new read starts only after the previous
one has finished (checked by the public class), which orders the two.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

from .. import errors
from .pull import FetchEngine, PullEngine, PullTarget
from .receiver import Receiver
from .._core.connection import Connection
from .._core.jsapi import JsApi
from .._core.message import Msg, ack_sequences, reply_bytes
from ..models import AckPolicy, ConsumerConfig, ConsumerInfo, DeliverPolicy, StreamInfo
from ..options import ConsumeOptions, FetchOptions
from .protocol import StatusKind, classify_status, pull_request
from .._core.logfields import log_fields

_log = logging.getLogger("jetstream_sync._ordered")  # the logger name users configure, kept from before the move

# A last-per-subject consumer whose next messages were removed (a history
# limit, a purge) after it was made may keep messages pending and a pull
# waiting and deliver nothing more (nats-server 2.15): checked after this
# long without a message, then made again.
STALL_CHECK = 1.0
RESET_BACKOFF_START = 1.0
RESET_BACKOFF_MAX = 10.0
_DELETE_TIMEOUT = 10.0
_MIN_PULL = 0.05  # seconds: a re-pull with less of its expiry left is not sent
# Statuses that mean the server consumer is gone or unreachable: recreate it.
_RECREATE_ON = (StatusKind.CONSUMER_DELETED, StatusKind.NO_RESPONDERS)
# Statuses that end an ordered fetch short, without an error: the server
# consumer is going (shutdown) or moving (leader change); the next read
# creates another.
_SHORT_ON = (StatusKind.SHUTDOWN, StatusKind.LEADERSHIP)
# Failures that a new attempt cannot fix.
_FATAL = (errors.StreamNotFoundError, errors.ConnectionClosedError, errors.InvalidOptionError, errors.PermissionDeniedError)


class OrderedState:
    """One ordered consumer's server consumer and read position."""

    def __init__(self, js: JsApi, stream: str, base: ConsumerConfig, prefix: str, max_reset_attempts: int) -> None:
        self.js = js
        self.stream = stream
        self._base = base  # deliver policy, filters … of the first consumer
        self.prefix = prefix
        self.max_reset_attempts = max_reset_attempts  # 0: no limit
        self.serial = 0
        self.name: Optional[str] = None
        self.name_b = b""
        self.info: Optional[ConsumerInfo] = None
        self.cseq = 0  # last consumer sequence accepted from the current consumer
        self.sseq = 0  # stream sequence of the last message accepted
        self.pull_done = False  # the last fetch ended on the server (no pull left open)
        # Where the user's deliver policy put the first consumer (the stream
        # sequence before its first message; 0: unknown, reuse the policy).
        # A reset before any message starts here, so that "new" or "last"
        # does not skip what was stored while the consumer was replaced.
        self.origin = 0
        self.last_taken: Optional[Msg] = None  # the last message handed to the user
        self.lock = threading.Lock()  # user side: mode and active read
        self.mode: Optional[str] = None  # "fetch" or "consume", fixed by the first read
        self.active: Optional[Receiver] = None

    @property
    def by_last_per_subject(self) -> bool:
        """The current server consumer delivers by the last-per-subject policy."""
        info = self.info
        return info is not None and info.config.deliver_policy == DeliverPolicy.LAST_PER_SUBJECT

    @property
    def cursor(self) -> int:
        """Stream sequence of the last message handed to the user; before
        the first, where the deliver policy started (0: from the policy)."""
        msg = self.last_taken
        seqs = ack_sequences(reply_bytes(msg)) if msg is not None else None
        return seqs[1] if seqs is not None else self.origin

    def target(self) -> PullTarget:
        prefix = self.js.api_prefix
        return PullTarget(
            stream=self.stream,
            consumer=self.name or "",
            pull_subject=f"{prefix}.CONSUMER.MSG.NEXT.{self.stream}.{self.name}",
            info_subject=f"{prefix}.CONSUMER.INFO.{self.stream}.{self.name}",
            ack_wait=None,
            api_timeout=self.js.timeout,
        )

    def config(self, start_seq: int) -> ConsumerConfig:
        """The next server consumer: from ``start_seq`` (0: the user's deliver policy)."""
        base = self._base
        cfg = ConsumerConfig(
            name=f"{self.prefix}_{self.serial}",
            ack_policy=AckPolicy.NONE,
            deliver_policy=base.deliver_policy or DeliverPolicy.ALL,
            opt_start_seq=base.opt_start_seq,
            opt_start_time=base.opt_start_time,
            filter_subjects=base.filter_subjects,
            replay_policy=base.replay_policy,
            inactive_threshold=base.inactive_threshold,
            headers_only=base.headers_only,
            metadata=base.metadata,
            mem_storage=True,
            num_replicas=1,
        )
        if start_seq:
            cfg.deliver_policy = DeliverPolicy.BY_START_SEQUENCE
            cfg.opt_start_seq = start_seq
            cfg.opt_start_time = None
        return cfg

    async def create(self, start_seq: int) -> PullTarget:
        """Loop thread: delete the current server consumer (in the background)
        and create the next one from ``start_seq``; one attempt."""
        return self._adopt(await self._make(start_seq), start_seq)

    async def recreate(self, start_seq: int, current: Callable[[], bool]) -> Optional[PullTarget]:
        """:meth:`create` for a read under way; None when ``current()`` says
        it ended meanwhile: the consumer made is deleted and this state is left
        to the next read (which may have begun)."""
        info = await self._make(start_seq)
        if not current():
            self.delete_later(info.name)
            return None
        return self._adopt(info, start_seq)

    async def _make(self, start_seq: int) -> ConsumerInfo:
        old = self.name
        self.serial += 1
        self.name_b = b""  # whatever still arrives is stale; ``name`` stays the old one until the new exists
        self.cseq, self.sseq = 0, max(start_seq - 1, 0)
        self.pull_done = False
        if old is not None:
            self.delete_later(old)
        subject, payload = self.js.consumer_request(self.stream, self.config(start_seq), "create")
        resp = await self.js.arequest(subject, payload, about=f"stream {self.stream!r}")
        info = ConsumerInfo.from_response(resp)
        if self.info is not None:  # a replacement: is it still the stream the first one read?
            try:
                await self._check_same_stream(self.info)
            except BaseException:
                self.delete_later(info.name)
                raise
        return info

    async def _check_same_stream(self, previous: ConsumerInfo) -> None:
        """Raise StreamNotFoundError when the stream was deleted and made again
        since ``previous`` (a consumer of the old one) was created: the new
        stream's sequences start over, so going on after the last one taken
        would skip its messages. Checked after the replacement exists: a
        stream still there now is the one the replacement was made on. A user
        not allowed to ask goes on unchecked, as nats.go's ordered consumer
        always does."""
        try:
            resp = await self.js.arequest(f"STREAM.INFO.{self.stream}", about=f"stream {self.stream!r}")
        except errors.PermissionDeniedError as exc:
            _log.debug("ordered consumer on %s: stream not checked after a reset: %r", self.stream, exc,
                       extra=log_fields(stream=self.stream))
            return
        made = StreamInfo.from_response(resp).created
        if made is not None and previous.created is not None and made > previous.created:
            raise errors.StreamNotFoundError(
                404, errors.ErrorCode.STREAM_NOT_FOUND, f"stream {self.stream!r} was deleted and made again; this ordered read cannot go on in it"
            )

    def _adopt(self, info: ConsumerInfo, start_seq: int) -> PullTarget:
        self.info = info
        self.name = self.info.name
        self.name_b = self.name.encode()
        delivered = self.info.delivered
        # last_per_subject is no position: a reset keeps that policy (as nats.go).
        if not start_seq and delivered is not None and self._base.deliver_policy is not DeliverPolicy.LAST_PER_SUBJECT:
            self.origin = self.sseq = delivered.stream_seq or 0
        return self.target()

    def delete_later(self, name: str) -> None:
        """Loop thread: delete an abandoned server consumer, not waiting for it
        (the inactive threshold removes it if this fails)."""

        async def delete() -> None:
            try:
                async with asyncio.timeout(_DELETE_TIMEOUT):
                    await self.js.arequest(f"CONSUMER.DELETE.{self.stream}.{name}")
            except Exception as exc:  # gone already, connection down …
                _log.debug("ordered consumer %s/%s not deleted: %r", self.stream, name, exc,
                           extra=log_fields(stream=self.stream, consumer=name))

        asyncio.get_running_loop().create_task(delete())

    def abandon(self, name: str) -> None:
        """Loop thread: the read that used consumer ``name`` has ended with
        pulls maybe still open: the next read starts on a new consumer."""
        if self._drop(name):
            self.delete_later(name)

    def _drop(self, name: str) -> bool:
        if not name or name != self.name:
            return False
        self.name, self.name_b = None, b""
        self.pull_done = False
        return True

    async def forget(self, name: str) -> None:
        """Loop thread: the caller deletes consumer ``name``; the next read makes a new one."""
        self._drop(name)

    def in_order(self, msgs: List[Msg]) -> Tuple[List[Msg], bool]:
        """Loop thread: the messages that continue the current consumer's
        sequence, and whether a gap was found (the rest is dropped)."""
        name, cseq, sseq = self.name_b, self.cseq, self.sseq
        kept: List[Msg] = []
        gap = False
        for msg in msgs:
            seqs = ack_sequences(reply_bytes(msg))
            if seqs is None:
                continue  # not from a consumer: nothing to hand out
            cons, s, c = seqs
            if cons != name:
                continue  # from a consumer already replaced
            if c != cseq + 1:
                gap = True
                break
            cseq, sseq = c, s
            kept.append(msg)
        self.cseq, self.sseq = cseq, sseq
        return kept, gap


class OrderedReceiver(Receiver):
    """Remembers the last message handed out: the next read starts after it."""

    ordered: OrderedState

    def take(self, timeout: Optional[float], credit: bool = True) -> Msg:
        msg = Receiver.take(self, timeout, credit)
        self.ordered.last_taken = msg
        return msg

    def serve(self, handler: Callable[[Msg], Any], failed: Callable[[Msg, Exception], None]) -> None:
        """consume(): each message noted as taken before its handler runs,
        as take() notes it (serve() takes without calling take())."""
        state = self.ordered

        def handle(msg: Msg) -> Any:
            state.last_taken = msg
            return handler(msg)

        Receiver.serve(self, handle, failed)

    def nak(self, msgs: List[Msg]) -> None:
        """AckNone: nothing to give back (the next consumer starts after the last one taken)."""


class OrderedPullEngine(PullEngine):
    """messages() / consume() of an ordered consumer: recreates the server
    consumer instead of ending or re-pulling on the same one."""

    def __init__(
        self, conn: Connection, receiver: Receiver, target: PullTarget, opts: ConsumeOptions, state: OrderedState
    ) -> None:
        super().__init__(conn, receiver, target, opts)
        self._state = state
        self._resetting = False
        self._wake: Optional[asyncio.Event] = None
        self._quiet_since = time.monotonic()  # since the last message, new consumer or stall check
        self._checking_stall = False

    def on_msgs(self, msgs: List[Msg]) -> None:
        if self._resetting:
            return
        self._quiet_since = time.monotonic()
        kept, gap = self._state.in_order(msgs)
        if kept:
            super().on_msgs(kept)
        if gap:
            self._recreate("consumer sequence gap")

    def on_status(self, hdrs: bytes) -> None:
        if not self._resetting:  # a status of the old consumer says nothing about the new one
            super().on_status(hdrs)

    def _on_status(self, code: str, desc: str, hdrs: Any) -> None:
        if classify_status(code, desc) in _RECREATE_ON:
            self._classify(code, desc)
            self._recreate(f"{code} {desc}".strip())
            return
        super()._on_status(code, desc, hdrs)

    def _maybe_pull(self) -> None:
        if not self._resetting:
            super()._maybe_pull()

    def _end_with(self, err: BaseException) -> None:
        if isinstance(err, errors.ConsumerDeletedError):  # the consumer check found it gone
            self._recreate("consumer deleted")
        else:
            super()._end_with(err)

    def _start_repull(self) -> None:
        self._recreate("missed heartbeats")  # after an alarm: never trust the old consumer

    def _resume(self) -> None:
        if self._wake is not None:
            self._wake.set()  # a reset waiting out its backoff tries again now
        self._recreate("reconnected")  # a memory consumer may not have survived

    def _closed(self) -> None:
        self._state.abandon(self._target.consumer)
        super()._closed()

    def _reset_pending(self) -> None:
        super()._reset_pending()
        # Never drop an arrival as overflow: it is already counted as read.
        self._guard = False

    def _tick(self) -> None:
        if self._resetting:
            self._watch.traffic()  # no heartbeat alarms while the consumer is replaced
        elif (
            self._state.by_last_per_subject and not self._checking_stall
            and self._pending_msgs and time.monotonic() - self._quiet_since >= STALL_CHECK
        ):  # fmt: skip
            self._checking_stall = True
            self._loop.create_task(self._check_stall())
        super()._tick()

    async def _check_stall(self) -> None:
        """A pull waits and nothing came for a while: does the server hold some?"""
        checked = self._target.consumer
        try:
            quiet_since = self._quiet_since
            resp = await self._state.js.arequest(f"CONSUMER.INFO.{self._target.stream}.{checked}")
            info = ConsumerInfo.from_response(resp)
            if info.num_pending and info.num_waiting and self._quiet_since == quiet_since:
                self._recreate("messages pending, a pull waiting, none delivered")
        except (errors.ConsumerNotFoundError, errors.StreamNotFoundError) as exc:
            # Gone under the pull, which may have been dropped without a status
            # (its stream deleted as it arrived): replace it now, not after the
            # heartbeat alarm; a stream that is gone ends the reset.
            if self._target.consumer == checked:  # not one a reset meanwhile replaced
                self._recreate(f"stall check: {exc}")
        except Exception as exc:  # JetStream busy or reconnecting: the heartbeat watchdog still watches
            _log.debug("ordered consumer %s: stall check: %r", self._target.consumer, exc,
                       extra=log_fields(stream=self._target.stream, consumer=self._target.consumer))
        finally:
            self._checking_stall = False
            self._quiet_since = time.monotonic()

    # -- the reset ----------------------------------------------------------------

    def _recreate(self, why: str) -> None:
        if self._resetting or self._done or self._shutting_down:
            return
        self._resetting = True
        self._stats.resets += 1
        _log.debug("ordered consumer %s: reset (%s)", self._target.consumer, why,
                   extra=log_fields(stream=self._target.stream, consumer=self._target.consumer))
        self._loop.create_task(self._reset())

    async def _reset(self) -> None:
        conn, state = self._conn, self._state
        # A new inbox first: nothing the old consumer still sends can reach the user.
        old, self._sid = self._sid, None
        self._inbox = conn.new_inbox()
        self._sid = await conn.subscribe(self._inbox, self)
        if old is not None:
            await conn.unsubscribe(old)
        attempts, delay = 0, RESET_BACKOFF_START
        while True:
            if self._done or self._shutting_down:
                return
            try:
                target = await state.recreate(state.sseq + 1 if state.sseq else 0, self._still_reading)
                break
            except _FATAL as exc:
                self._begin_shutdown(exc)
                return
            except Exception as exc:
                attempts += 1
                self._report(exc)
                if state.max_reset_attempts and attempts >= state.max_reset_attempts:
                    err = errors.OrderedConsumerResetError(f"ordered consumer not recreated after {attempts} attempts: {exc}")
                    err.__cause__ = exc
                    self._begin_shutdown(err)
                    return
                await self._backoff_wait(delay)
                delay = min(delay * 2, RESET_BACKOFF_MAX)
        if target is None:  # stopped meanwhile: the state is the next read's now
            return
        self._retarget(target)
        self._resetting = False
        self._quiet_since = time.monotonic()
        self._watch.traffic()
        self._reset_pending()
        self._maybe_pull()

    def _still_reading(self) -> bool:
        return not (self._done or self._shutting_down)

    async def _backoff_wait(self, delay: float) -> None:
        wake = self._wake = asyncio.Event()
        try:
            await asyncio.wait_for(wake.wait(), delay)
        except asyncio.TimeoutError:
            pass

    def _retarget(self, target: PullTarget) -> None:
        self._target = target
        self._subject = target.pull_subject
        if self._remove_perm is not None:
            self._remove_perm()
            self._remove_perm = self._conn.watch_permission(target.pull_subject, self._denied)


class OrderedFetchEngine(FetchEngine):
    """One pull of an ordered consumer: ends early at a gap or when the
    consumer is gone, and records whether the pull ended on the server (then
    the next fetch may go on with the same consumer). A consumer found gone
    before anything came is replaced once within the same fetch."""

    def __init__(
        self, conn: Connection, receiver: Receiver, target: PullTarget, opts: FetchOptions, state: OrderedState
    ) -> None:
        super().__init__(conn, receiver, target, opts)
        self._state = state
        self._began = 0.0
        self._replaced = False

    async def start(self) -> None:
        self._began = time.monotonic()
        await super().start()

    def on_msgs(self, msgs: List[Msg]) -> None:
        kept, gap = self._state.in_order(msgs)
        if kept:
            super().on_msgs(kept)
        if gap:
            self._end_pull(None)  # the next fetch starts on a new consumer

    def _on_batch(self, msgs: List[Msg]) -> None:
        super()._on_batch(msgs)
        if self._received >= self.opts.max_messages:
            self._state.pull_done = True  # the batch is complete: the server holds no pull

    def _on_status(self, code: str, desc: str, hdrs: Any) -> None:
        kind = classify_status(code, desc)
        if kind in _RECREATE_ON:
            self._classify(code, desc)
            if self._received or self._replaced or self._done:
                self._end_pull(None)  # a short fetch; the next one recreates the consumer
            else:
                # The consumer this fetch reused is gone (deleted, reaped, a
                # restart): an empty answer would say the stream has nothing.
                self._replaced = True
                self._loop.create_task(self._pull_again())
            return
        if kind in _SHORT_ON:
            self._classify(code, desc)
            self._end_pull(None)
            return
        if kind is StatusKind.END and not self._done:
            self._state.pull_done = True
        super()._on_status(code, desc, hdrs)


    async def _pull_again(self) -> None:
        """Loop thread: the same pull, for what is left of ``expires``, on a new consumer."""
        state, o = self._state, self.opts
        try:
            target = await state.recreate(state.sseq + 1 if state.sseq else 0, lambda: not self._done)
        except Exception as exc:  # JetStream down, stream gone …: the short fetch stands
            _log.debug("ordered fetch on %s: consumer not recreated: %r", state.stream, exc,
                       extra=log_fields(stream=state.stream))
            self._end_pull(None)
            return
        left = o.expires - (time.monotonic() - self._began) if o.expires else 0.0
        if target is None or self._done or (o.expires and left < _MIN_PULL):
            self._end_pull(None)  # given up meanwhile, or no time left for a pull
            return
        # What is left may be shorter than two heartbeats: the server refuses
        # a pull whose heartbeat exceeds half its expiry.
        hb = o.idle_heartbeat if 2 * o.idle_heartbeat <= left else 0.0
        self._target = target
        self._subject = target.pull_subject
        if self._remove_perm is not None:
            self._remove_perm()
            self._remove_perm = self._conn.watch_permission(target.pull_subject, self._denied)
        self._watch.traffic()
        self._send_pull(pull_request(o.max_messages, left, o.max_bytes, hb, o.no_wait, None, ""))
