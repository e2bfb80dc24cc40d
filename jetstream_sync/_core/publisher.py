"""The async publisher behind ``JetStream.publish_async``: one per connection,
a bounded window of pipelined publishes whose futures always resolve.

Long: the future is also the publisher's record of its publish; the window,
the sends (the loop's and a caller's own) and the reply routing all read that
record, and split into modules they would read each other's private fields.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import concurrent.futures._base as _futures_base
import itertools
import logging
import math
import threading
import time
from typing import Any, Callable, Coroutine, Deque, Dict, List, Optional, Protocol, Tuple, TypeVar, Union, cast

from .. import errors, options
from .logfields import log_fields
from .nats_errors import translate
from .wire import load_speedups, subscription_matches
from .puback import parse_puback, plain_puback
from .writer import Batcher, SocketWriter, encoded, pub_line
from ..models import PubAck
from .loop import LoopThread
from .outbox import AckOutbox
from .wire import Handler, Sink

T = TypeVar("T")


class PublisherConnection(Protocol):
    """What a publisher uses of its connection (which owns the publisher: a
    Protocol here keeps the import pointing one way)."""

    loop_thread: LoopThread
    outbox: AckOutbox
    direct: SocketWriter
    nc: Any  # nats-py's client, None before the connect

    def add_listener(self, event: str, fn: Callable[[], None]) -> Callable[[], None]: ...

    def new_inbox(self) -> str: ...

    def run(self, coro: Coroutine[Any, Any, T], timeout: Optional[float], confirm_acks: str = "") -> T: ...

    def send_commands(self, data: bytes, msgs: int, size: int) -> bool: ...

    async def subscribe(
        self,
        subject: str,
        handler: Union[Handler, Sink],
        queue: str = "",
        limits: Optional[Dict[str, int]] = None,
        denied: Optional[Callable[[BaseException], None]] = None,
    ) -> int: ...

__all__ = ["AsyncPublisher", "PubAckFuture", "parse_puback", "RETRY_ATTEMPTS", "RETRY_WAIT"]

_log = logging.getLogger("jetstream_sync._connection")  # the logger name users configure
RETRY_ATTEMPTS, RETRY_WAIT = options.RETRY_ATTEMPTS, options.RETRY_WAIT  # after "no responders" (ADR-22)
DEFAULT_MAX_PENDING = 4000
_SWEEP_INTERVAL = 0.1
# A publish with a Nats-Msg-Id unanswered this long is sent again (the same
# id: the stream's duplicate window stores it once): a stream leader that
# moves drops what it had not yet stored without a word.
RESEND_AFTER = 2.0
_STARVED = 1024  # queued publishes behind an unsent batch, then the publisher steps aside
_STEP_ASIDE = 0.05  # at most this long
_PENDING, _FINISHED = _futures_base.PENDING, _futures_base.FINISHED


_COND_LOCK = threading.Lock()
_allocate_lock = threading.Lock


_STREAMS: List[str] = []  # stream names of compact acks, by index (a few per process)
_STREAM_INDEX: Dict[str, int] = {}
_INDEX_BITS = 8
_MAX_STREAMS = 1 << _INDEX_BITS
_INDEX_MASK = _MAX_STREAMS - 1
_STREAMS_LOCK = threading.Lock()  # each connection's loop thread may add a name


def compact_ack(stream: str, seq: int) -> Any:
    """A plain PubAck as a resolved future keeps it until its result is asked
    for: an int, the sequence shifted left by _INDEX_BITS or'ed with the index
    of the stream's name in _STREAMS (a tuple beyond _MAX_STREAMS names). A
    PubAck object per future would be walked by every full collection while a
    caller keeps its futures; an int is not tracked by the collector at all."""
    index = _STREAM_INDEX.get(stream)
    if index is None:
        with _STREAMS_LOCK:
            index = _STREAM_INDEX.get(stream)
            if index is None:
                if len(_STREAMS) >= _MAX_STREAMS:
                    return (stream, seq)
                index = len(_STREAMS)
                _STREAMS.append(stream)  # before the index: a reader finds the name by the index
                _STREAM_INDEX[stream] = index
    return seq << _INDEX_BITS | index


def _as_puback(compact: Any) -> PubAck:
    """The PubAck of compact_ack's form."""
    if type(compact) is int:
        return PubAck(_STREAMS[compact & _INDEX_MASK], compact >> _INDEX_BITS)
    return PubAck(*compact)


class _CompactState(str):
    """FINISHED (equal to it for Future's own checks), for a future whose
    result is in compact_ack's form: a result a caller set is never taken for one."""

    __slots__ = ()


_FINISHED_COMPACT = _CompactState(_FINISHED)


class PubAckFuture(concurrent.futures.Future[PubAck]):
    """A ``concurrent.futures.Future`` of a PubAck.

    Its condition variable is made only when something waits on it (most
    results are read after they are set), and asking for the result sends
    queued publishes at once instead of at the next batch or tick.

    It is also the publisher's record of the publish it stands for (one
    object per publish, not two): subject, payload, headers and header
    block, deadline and retries; the payload is let go once it is resolved.

    A plain acknowledgement is kept in :func:`compact_ack`'s form and each
    :meth:`result` call makes its PubAck (equal ones, not the same object).
    """

    def __init__(
        self,
        publisher: "AsyncPublisher",
        subject: str = "",
        data: bytes = b"",
        headers: Optional[Dict[str, str]] = None,
        hdr: bytes = b"",
        deadline: float = 0.0,
    ) -> None:
        self._subject = subject
        self._data = data
        self._headers = headers
        self._hdr = hdr  # the header block, built and checked in the caller's thread
        self._deadline = deadline
        self._attempt = 0
        # Future.__init__ minus the Condition, which _condition makes on demand.
        self._cond: Optional[threading.Condition] = None
        self._state = _PENDING
        self._result = None
        self._exception: Optional[BaseException] = None
        # Future's two lists, made on first use too: every GC-tracked object a
        # publish allocates costs the collector's time while results pile up.
        self._waiter_list: Optional[List[Any]] = None
        self._callback_list: Optional[List[Callable[["concurrent.futures.Future[PubAck]"], object]]] = None
        self._publisher = publisher

    _retry = (RETRY_ATTEMPTS, RETRY_WAIT)  # after "no responders": (attempts, -1: until the deadline; seconds)
    _written_at = math.inf  # a publish its caller wrote: when (the loop's are aged by their tokens)

    def written_now(self) -> None:
        """Its caller wrote it to the socket just now."""
        self._written_at = time.monotonic()

    def silent_since(self, since: float) -> bool:
        """Written by its caller at or before ``since`` (monotonic seconds)."""
        return self._written_at <= since

    def idempotent(self) -> bool:
        """It carries a Nats-Msg-Id: sending it again stores it once."""
        return b"Nats-Msg-Id:" in self._hdr

    def retry_with(self, retry: Tuple[int, float]) -> None:
        """(attempts, wait) after "no responders", instead of the defaults."""
        self._retry = retry

    def next_try(self) -> Optional[float]:
        """After "no responders": seconds to wait before it is sent again, or
        None when its attempts are used up or its deadline comes first."""
        if options.may_retry(self._retry, self._attempt, self._deadline):
            self._attempt += 1
            return self._retry[1]
        return None

    # Future's methods read and append to these; made under _condition when
    # waiters or callbacks are added (the paths that make them hold it).
    @property
    def _waiters(self) -> List[Any]:  # type: ignore[override]  # Future's attribute, read-only here
        waiters = self._waiter_list
        if waiters is None:
            waiters = self._waiter_list = []
        return waiters

    @property
    def _done_callbacks(self) -> List[Callable[["concurrent.futures.Future[PubAck]"], object]]:
        callbacks = self._callback_list
        if callbacks is None:
            callbacks = self._callback_list = []
        return callbacks

    @property
    def _condition(self) -> threading.Condition:
        cond = self._cond
        if cond is None:
            with _COND_LOCK:
                cond = self._cond
                if cond is None:
                    cond = self._cond = threading.Condition()
        return cond

    @_condition.setter
    def _condition(self, cond: threading.Condition) -> None:  # Future's is an attribute; nothing sets it here
        self._cond = cond

    def _finish_unwatched(self, result: Any, exception: Optional[BaseException], state: str = _FINISHED) -> bool:
        """Resolve without the Condition if nobody has asked for it yet.
        ``route_ack`` in ``_speedups.c`` does the same by these attribute names
        (tests/unit/test_puback_router.py holds the two to the same result)."""
        if self._cond is not None:
            return False
        with _COND_LOCK:
            if self._cond is not None:
                return False
            if self._state != _PENDING:  # pragma: no cover - cancel() makes the Condition
                raise concurrent.futures.InvalidStateError(f"{self._state}: {self!r}")
            self._result = result
            self._exception = exception
            self._state = state
        if self._callback_list:
            self._invoke_callbacks()  # type: ignore[attr-defined]  # Future's private method, not in typeshed
        return True

    # A plain lock its caller parks on (wait()), released once it is resolved.
    _wake: Optional[Any] = None

    def set_result(self, result: Any) -> None:
        if not self._finish_unwatched(result, None):
            super().set_result(result)
        if (wake := self._wake) is not None:
            wake.release()

    def set_ack(self, ack: Any) -> None:
        """set_result for the publisher's own replies: a future nobody watches
        keeps compact_ack's form, a watched one gets its PubAck."""
        if type(ack) is not int and type(ack) is not tuple:
            self.set_result(ack)  # a PubAck parsed from JSON
            return
        if not self._finish_unwatched(ack, None, _FINISHED_COMPACT):
            super().set_result(_as_puback(ack))
        if (wake := self._wake) is not None:
            wake.release()

    def set_exception(self, exception: Optional[BaseException]) -> None:
        if not self._finish_unwatched(None, exception):
            super().set_exception(exception)
        if (wake := self._wake) is not None:
            wake.release()

    def _wait_as_owner(self, timeout: float) -> PubAck:
        """result() for the one thread that made it and alone waits for it: parked
        on a plain lock the resolving thread releases (no Condition, no
        waiter list). TimeoutError as result()."""
        if self._state != _FINISHED:
            self._before_wait()
            wake = _allocate_lock()
            wake.acquire()
            self._wake = wake  # before looking again: a resolver that set the state after this sees it
            if self._state != _FINISHED:
                wake.acquire(True, timeout)
        return self.result(0)

    def result(self, timeout: Optional[float] = None) -> PubAck:
        if timeout is not None:
            options.optional_timeout("timeout", timeout)
        state = self._state
        if state == _FINISHED:
            if self._exception is not None:
                raise self._exception
            result: Any = self._result
        else:
            self._before_wait()
            result = super().result(timeout)
            state = self._state
        if state is not _FINISHED_COMPACT:
            return cast(PubAck, result)
        if type(result) is int:  # _as_puback inline: every kept future's read takes this (40 ns less a call)
            return PubAck(_STREAMS[result & _INDEX_MASK], result >> _INDEX_BITS)
        return _as_puback(result)

    def __repr__(self) -> str:
        if self._state is _FINISHED_COMPACT:
            return f"<{type(self).__name__} at {id(self):#x} state=finished returned PubAck>"
        return super().__repr__()

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        if timeout is not None:
            options.optional_timeout("timeout", timeout)
        if self._state == _FINISHED:
            return self._exception
        self._before_wait()
        return super().exception(timeout)

    def _before_wait(self) -> None:
        # The loop thread resolves this future: waiting on it there never ends.
        self._publisher.check_not_loop_thread()
        self._publisher.kick_quietly()


class AsyncPublisher(Batcher):
    """Pipelined JetStream publishes with a bounded window; one per connection.

    User threads queue publishes (blocking only while ``max_pending`` are in
    flight, each caller at most its own timeout). The loop thread is not
    woken per call: queued publishes go out per ``BATCH``, when a caller
    waits (a result, the window, completion), or after ``DELAY`` seconds.
    They are sent with replies on one wildcard inbox, and each Future is
    resolved with its PubAck or an error — also when the connection closes.

    Threads: ``_queue`` (a deque) is appended by user threads and drained by
    the loop; ``_submitted`` / ``_closed`` change under ``_cond``;
    ``_completed`` and ``_inflight`` belong to the loop thread (and to
    :meth:`fail_all` once the loop has stopped).
    """

    BATCH = 64
    DELAY = 0.002

    def __init__(
        self,
        conn: PublisherConnection,
        max_pending: int = DEFAULT_MAX_PENDING,
        make_reply: Optional[Callable[[bytes, bytes, bytes, Any, Optional[bytes]], Any]] = None,
    ) -> None:
        super().__init__(conn)
        # None: JetStream publishes, resolved with PubAcks (503 retried, ADR-22).
        # Else core requests, resolved with make_reply(subject, reply, data, conn, headers).
        self._make_reply = make_reply
        self._awaited = "publish acknowledgement" if make_reply is None else "reply"
        self._max = self._check_max(max_pending)
        self._inflight: Dict[bytes, PubAckFuture] = {}
        self._retrying: Dict[PubAckFuture, asyncio.TimerHandle] = {}  # loop thread: waiting to be sent again
        self._marks: Deque[Tuple[float, int]] = collections.deque()  # (when, last token) at each sweep
        self._prefix = b""
        self._sid: Optional[int] = None
        self._sweep_handle: Optional[asyncio.TimerHandle] = None
        self._next_id = 0
        self._submitted = 0
        self._completed = 0
        self._closed = False
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)  # entered as _lock where nobody waits (no Python-level __enter__)
        self._waiters = 0
        self._setup_lock = threading.Lock()
        self._sent = threading.Event()  # set by each send of the queue (see queued())
        self._direct_ids = itertools.count(1)  # tokens d1, d2, ... of publishes written by their callers
        speedups = load_speedups()
        # The C accelerator's batch send and PubAck reader, where it is built.
        self._pub_batch = speedups.pub_batch if speedups is not None else None
        self._plain_of = speedups.puback if speedups is not None else plain_puback
        # getattr: an accelerator built from an older source has no router (then Python's path).
        self._router_type = getattr(speedups, "PubAckRouter", None)
        conn.add_listener("closed", self._on_closed)

    @staticmethod
    def _check_max(max_pending: Any) -> int:
        return options.at_least("max_pending", max_pending, 1)

    @property
    def max_pending(self) -> int:
        return self._max

    def set_max_pending(self, max_pending: int) -> None:
        """Resize the window (any time; a smaller window applies to later calls)."""
        with self._cond:
            self._max = self._check_max(max_pending)
            self._cond.notify_all()

    @property
    def pending(self) -> int:
        """Publishes queued or awaiting their PubAck."""
        return self._submitted - self._completed

    def check_not_loop_thread(self) -> None:
        if self.conn.loop_thread.in_loop_thread():
            raise errors.DeadlockError(
                "waiting for a publish acknowledgement or reply on the client's event-loop thread "
                "(for example inside an asyncio callback) would deadlock"
            )

    def queued(self) -> None:
        """After an append. A thread publishing without pause keeps the GIL,
        and the loop thread it woke to send waits for it up to the switch
        interval (5 ms) while the server has nothing to do. So each time
        another _STARVED publishes wait behind a send the loop has not yet made,
        step aside until it has (bounded: the loop may be busy otherwise)."""
        queued = len(self._queue)
        if queued and not queued % _STARVED and self._scheduled and not self._lt.in_loop_thread():
            sent = self._sent
            sent.clear()
            if self._scheduled:  # the loop clears it before it sends, then sets ``sent``
                sent.wait(_STEP_ASIDE)
        super().queued()

    def _send_now(self) -> None:
        super()._send_now()
        self._sent.set()

    def kick_quietly(self) -> None:
        """kick(), but a closed or forked connection is not the caller's error here."""
        try:
            self.kick()
        except errors.JetStreamError:
            pass

    def publish(
        self,
        subject: str,
        data: bytes,
        headers: Optional[Dict[str, str]],
        hdr: bytes,
        timeout: float,
        now: bool = False,
        retry: Optional[Tuple[int, float]] = None,
    ) -> "concurrent.futures.Future[PubAck]":
        """Queue one publish (the caller has checked the connection and the
        arguments). ``now``: the caller is about to wait for it, so send it at
        once (one wake-up of the loop, not a timer and then a kick).
        ``retry``: (attempts, wait) after "no responders", if not the defaults."""
        if self._sid is None:
            self._setup()
        deadline = time.monotonic() + timeout
        future = entry = PubAckFuture(self, subject, data, headers, hdr, deadline)
        if retry is not None:
            entry.retry_with(retry)
        with self._lock:
            if self._submitted - self._completed >= self._max:
                self.kick_quietly()
                self._waiters += 1
                try:
                    ok = self._cond.wait_for(
                        lambda: self._closed or self._submitted - self._completed < self._max,
                        deadline - time.monotonic(),
                    )
                finally:
                    self._waiters -= 1
                if not ok:
                    raise errors.TimeoutError(
                        f"publish_async window ({self._max}) full for {timeout}s: acks are not coming back"
                    )
            if self._closed:
                raise errors.ConnectionClosedError("the client is closed")
            self._submitted += 1
            self._queue.append(entry)
        try:
            if now:
                self.kick()
            else:
                self.queued()
        except errors.JetStreamError as exc:  # the loop is gone: fail this one here
            try:
                self._queue.remove(entry)
            except ValueError:
                pass  # taken by the loop or by fail_all, which resolve it
            else:
                self._done(entry, None, exc)
        return future

    def publish_and_wait(
        self, subject: str, data: bytes, headers: Optional[Dict[str, str]], hdr: bytes, timeout: float,
        retry: Optional[Tuple[int, float]] = None,
    ) -> Any:
        """A blocking publish (or request): sent at once, behind the acks
        queued before it; the PubAck (or reply) within ``timeout``."""
        self.check_not_loop_thread()
        conn = self.conn
        outbox = conn.outbox
        future: "Optional[concurrent.futures.Future[PubAck]]" = None
        if conn.direct.usable and self._sid is not None:
            future = self._publish_direct(subject, data, headers, hdr, timeout, retry)
        if future is None:
            if outbox.has_queued():
                outbox.kick()
            future = self.publish(subject, data, headers, hdr, timeout, now=True, retry=retry)
        try:
            return future._wait_as_owner(timeout + 1.0) if isinstance(future, PubAckFuture) else future.result(timeout + 1.0)  # the sweeper fails it at its deadline first
        except concurrent.futures.TimeoutError:
            raise self.conn.timed_out(f"no {self._awaited} for {subject!r} within {timeout}s") from None

    def _publish_direct(
        self, subject: str, data: bytes, headers: Optional[Dict[str, str]], hdr: bytes, timeout: float,
        retry: Optional[Tuple[int, float]],
    ) -> Optional[PubAckFuture]:
        """Write the publish from this thread when nothing waits ahead of it
        (this queue, the outbox, the connection's buffers) and none of this
        publisher's is in flight; None: it was not written, go the usual way."""
        conn = self.conn
        if self._submitted != self._completed or self._queue or conn.outbox.has_queued():
            return None  # busy (read without the locks): no line built, no lock contended for nothing
        entry = PubAckFuture(self, subject, data, headers, hdr, time.monotonic() + timeout)
        if retry is not None:
            entry.retry_with(retry)
        entry.written_now()
        token = b"d%d" % next(self._direct_ids)
        line = pub_line(encoded(subject), self._prefix + token, hdr, data)
        direct = conn.direct
        with direct.lock:
            if self._queue or conn.outbox.has_queued():
                return None
            with self._lock:
                # Only when none is in flight: with others pending, the loop is awake
                # for their replies anyway and one send of a batch beats one per thread.
                if self._closed or self._submitted != self._completed:
                    return None
                self._submitted += 1
                self._inflight[token] = entry  # before the write: the reply may come first
            nc = conn.nc
            if nc is None or not direct.try_send(nc, line, len(data)):
                with self._lock:
                    if self._inflight.pop(token, None) is None:
                        return entry  # failed meanwhile by fail_all (the connection closed)
                    self._submitted -= 1
                return None
        if self._sweep_handle is None:
            self._lt.call_soon(self._arm_sweep)  # its deadline, as for the publishes the loop sends
        return entry

    def wait_complete(self, timeout: Optional[float]) -> bool:
        self.kick_quietly()
        with self._cond:
            self._waiters += 1
            try:
                return self._cond.wait_for(lambda: self._submitted == self._completed, timeout)
            finally:
                self._waiters -= 1

    def _setup(self) -> None:
        """The reply subscription, on first use."""
        with self._setup_lock:
            if self._sid is None:
                self.conn.run(self._asetup(), 10.0)

    async def _asetup(self) -> None:
        conn = self.conn
        prefix = conn.new_inbox() + "."
        self._prefix = prefix.encode()
        self._sid = await conn.subscribe(prefix + "*", self._reply_handler())

    def _reply_handler(self) -> Handler:
        """``_on_reply``, or for PubAcks with the C accelerator its router, which
        resolves plain acknowledgements in the parser's loop and hands the rest
        to ``_on_reply`` and ``_done`` (``_speedups.c``)."""
        if self._make_reply is not None or self._router_type is None:
            return self._on_reply
        return cast(Handler, self._router_type(
            self, self._prefix, self._inflight, PubAckFuture, compact_ack, self._on_reply, self._done, _PENDING, _FINISHED_COMPACT
        ))  # fmt: skip

    # -- loop side ------------------------------------------------------------

    def _send(self, queue: Deque[PubAckFuture]) -> None:
        queue = self._behind_the_outbox()
        try:
            self._send_batch(queue)
        finally:
            if queue:  # only if the lines could not be made: back in front, for the next round
                with self._lock:
                    self._queue.extendleft(reversed(queue))

    def _send_batch(self, queue: Deque[PubAckFuture]) -> None:
        if self._pub_batch is not None:
            while queue:
                first = self._next_id + 1
                try:
                    commands, count, size, self._next_id, failed = self._pub_batch(
                        queue, self._prefix, self._next_id, self._inflight
                    )
                except BaseException:
                    # No memory left for the lines: what was filed times out in the sweep.
                    self._next_id = max([self._next_id, *map(int, self._inflight)])
                    self._arm_sweep()
                    raise
                if count:
                    self._arm_sweep()
                    if not self.conn.send_commands(commands, count, size):
                        self._fail_unsent([b"%d" % i for i in range(first, first + count)])
                if failed is not None:  # one it could not take: fail it, go on with the rest
                    entry, exc = failed
                    if entry is None:
                        raise exc
                    self._fail(entry, exc)
            return
        parts = []
        sent = []
        prefix = self._prefix
        size = 0
        while queue:
            entry = queue.popleft()
            token = self._track(entry)
            sent.append(token)
            size += len(entry._data)
            parts.append(_command(entry, prefix + token))
        if not self.conn.send_commands(b"".join(parts), len(parts), size):
            self._fail_unsent(sent)

    def _fail_unsent(self, tokens: List[bytes]) -> None:
        exc = errors.ConnectionClosedError("cannot publish: the connection is closed or its buffer is full")
        for token in tokens:
            failed = self._inflight.pop(token, None)
            if failed is not None:
                self._fail(failed, exc)

    def _track(self, entry: PubAckFuture) -> bytes:
        """A reply token for ``entry``, awaiting its PubAck; arms the sweeper."""
        self._next_id += 1
        token = b"%d" % self._next_id
        self._inflight[token] = entry
        self._arm_sweep()
        return token

    def _arm_sweep(self) -> None:
        if self._sweep_handle is None:
            self._sweep_handle = asyncio.get_running_loop().call_later(_SWEEP_INTERVAL, self._sweep)

    def _behind_the_outbox(self) -> Deque[PubAckFuture]:
        """Loop thread: take what is queued, then send the outbox: what was
        taken has its callers' earlier acks and core publishes sent first."""
        with self._lock:
            batch, self._queue = self._queue, collections.deque()
        self.conn.outbox.send_now()
        return batch

    async def _publish_each(self) -> None:
        """Without the fast paths: one nats-py publish per message (Batcher
        runs one of these at a time)."""
        with self._lock:
            queue, self._queue = self._queue, collections.deque()
        await self.conn.outbox.send_queued()  # acks and core publishes queued before these go first
        await self._publish_batch(queue)

    async def _publish_batch(self, queue: Deque[PubAckFuture]) -> None:
        nc = self.conn.nc
        while queue:
            entry = queue.popleft()
            token = self._track(entry)
            try:
                if nc is None:
                    raise errors.ConnectionClosedError("not connected")
                await nc.publish(entry._subject, entry._data, reply=(self._prefix + token).decode(), headers=entry._headers)
            except Exception as exc:
                if self._inflight.pop(token, None) is not None:
                    self._fail(entry, translate(exc))

    def _on_reply(self, subject: bytes, reply: bytes, data: bytes, headers: Optional[bytes]) -> None:
        entry = self._inflight.pop(subject[len(self._prefix) :], None)
        if entry is None:
            return  # timed out already
        if not data and headers is not None and headers.startswith(b"NATS/1.0 503"):
            self._no_responders(entry)
            return
        if self._make_reply is not None:
            self._done(entry, self._make_reply(subject, reply, data, self.conn, headers), None)
            return
        try:
            ack = parse_puback(data, self._plain_of, compact_ack)
        except errors.JetStreamError as exc:
            self._fail(entry, exc)
        else:
            self._done(entry, ack, None)

    def _no_responders(self, entry: PubAckFuture) -> None:
        if self._make_reply is not None:
            self._fail(entry, errors.NoRespondersError(f"no responders for a request to {entry._subject!r}"))
            return
        # ADR-22: the stream may be moving (a new leader, a restart, just
        # created): try again shortly, as long as the call's deadline allows.
        wait = entry.next_try()
        if wait is not None:
            self._retrying[entry] = asyncio.get_running_loop().call_later(wait, self._resend, entry)
            return
        tries = entry._attempt + 1
        self._fail(entry, errors.NoRespondersError(
            f"no stream answered a publish to {entry._subject!r} ({tries} attempt{'s' if tries > 1 else ''})"
        ))  # fmt: skip

    def _resend(self, entry: PubAckFuture) -> None:
        if self._retrying.pop(entry, None) is None:
            return  # failed meanwhile (the connection closed)
        self._queue.appendleft(entry)  # the same message, Nats-Msg-Id included
        self.kick_quietly()

    def _sweep(self) -> None:
        """Time out overdue publishes; re-armed only while some are in flight."""
        self._sweep_handle = None
        now = time.monotonic()
        # list(): user threads add publishes they wrote themselves (atomic under the GIL)
        expired = [t for t, e in list(self._inflight.items()) if e._deadline <= now]
        for token in expired:
            entry = self._inflight.pop(token)
            self._fail(entry, self.conn.timed_out(f"no {self._awaited} for {entry._subject!r}"))
        if self._make_reply is None and self._inflight:
            self._resend_silent(now)
        if self._inflight:
            self._sweep_handle = asyncio.get_running_loop().call_later(_SWEEP_INTERVAL, self._sweep)

    def _resend_silent(self, now: float) -> None:
        """Send again the publishes with a Nats-Msg-Id unanswered for RESEND_AFTER seconds."""
        marks, since = self._marks, now - RESEND_AFTER
        marks.append((now, self._next_id))
        while len(marks) > 1 and marks[1][0] <= since:
            marks.popleft()
        old_upto = marks[0][1] if marks[0][0] <= since else 0  # tokens up to this one are that old
        silent = []
        for token, entry in list(self._inflight.items()):  # in the order they were sent
            if token[:1] == b"d":
                if not entry.silent_since(since):
                    continue
            elif int(token) > old_upto:
                break  # this one and all after it are younger
            if entry.idempotent():
                silent.append(token)
        for token in silent:
            entry = self._inflight.pop(token)
            _log.debug("publish to %r unanswered for %gs: sent again", entry._subject, RESEND_AFTER,
                       extra=log_fields(subject=entry._subject))
            self._queue.appendleft(entry)
        if silent:
            self.kick_quietly()

    def denied(self, kind: str, subject: str, err: BaseException) -> None:
        """Loop thread: the server refused publishes to ``subject`` (or the
        reply inbox): fail those in flight now instead of at their timeout."""
        if kind == "subscription":
            if not subscription_matches(subject, self._prefix.decode() + "1"):
                return
            doomed = list(self._inflight)
        else:
            in_flight = list(self._inflight.items())  # a copy: user threads add to it (see _sweep)
            doomed = [t for t, e in in_flight if e._subject.lower() == subject]  # subject: lower case
        for token in doomed:
            entry = self._inflight.pop(token, None)
            if entry is not None:
                self._fail(entry, err)

    def _on_closed(self) -> None:
        self.fail_all(errors.ConnectionClosedError("connection closed before the publish was acknowledged"))

    def refuse_new(self) -> None:
        """Any thread: publish() raises ConnectionClosedError from now on."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def fail_all(self, exc: BaseException) -> None:
        """Resolve everything queued or in flight with ``exc`` and refuse new
        publishes (the connection is closed; the loop has stopped or is the caller)."""
        with self._cond:
            self._closed = True
            pending: List[PubAckFuture] = list(self._inflight.values())
            self._inflight.clear()
            for entry, handle in self._retrying.items():
                handle.cancel()
                pending.append(entry)
            self._retrying.clear()
            while self._queue:
                pending.append(self._queue.popleft())
            self._cond.notify_all()
        if self._sweep_handle is not None:
            self._sweep_handle.cancel()
            self._sweep_handle = None
        for entry in pending:
            self._fail(entry, exc)

    def _fail(self, entry: PubAckFuture, exc: BaseException) -> None:
        self._done(entry, None, exc)

    def _done(self, entry: PubAckFuture, ack: Any, exc: Optional[BaseException]) -> None:
        future = entry
        entry._data = entry._hdr = b""  # the payload is not kept as long as the future
        entry._headers = None
        try:
            if exc is not None:
                future.set_exception(exc)
            elif self._make_reply is None:
                future.set_ack(ack)
            else:
                future.set_result(ack)
        except concurrent.futures.InvalidStateError:  # cancelled by the user meanwhile
            pass
        # Only the loop thread (or fail_all once it stopped) counts completions,
        # so no lock here; a waiter bumps _waiters before it checks _completed
        # and this reads _waiters after the increment, so one of them sees the other.
        self._completed += 1
        if self._waiters:
            self._freed()

    def _freed(self) -> None:
        """After a completion while publishers wait (also called by the C
        accelerator's router): wake them once half the window is free, not per ack."""
        if self._submitted - self._completed <= self._max // 2:
            with self._cond:
                self._cond.notify_all()


def _command(entry: PubAckFuture, reply: bytes) -> bytes:
    """The PUB (or HPUB) line of a queued publish."""
    return pub_line(encoded(entry._subject), reply, entry._hdr, entry._data)
