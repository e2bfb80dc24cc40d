"""JetStream publish: headers, PubAck parsing, ADR-22 retries, and the
windowed asynchronous publisher behind ``JetStream.publish_async``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures._base as _futures_base
import json
import logging
import re
import threading
import time
from typing import TYPE_CHECKING, Any, Deque, Dict, Optional

import nats.errors as _nerr

from . import errors
from .client import translate
from ._wire import Batcher, send_raw
from .models import PubAck

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

# ADR-22: retry a publish that met "no responders" (stream leader moving,
# server restarting) a couple of times before failing.
RETRY_ATTEMPTS = 2
RETRY_WAIT = 0.25
DEFAULT_MAX_PENDING = 4000
_SWEEP_INTERVAL = 0.1
_HEADER_KEY = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_SUBJECT = re.compile(r"[\s]|^\.|\.$|\.\.")


def publish_headers(
    headers: Optional[Dict[str, str]],
    msg_id: Optional[str],
    expected_stream: Optional[str],
    expected_last_seq: Optional[int],
    expected_last_subject_seq: Optional[int],
    expected_last_msg_id: Optional[str],
) -> Optional[Dict[str, str]]:
    """User headers plus the ``Nats-Msg-Id`` / ``Nats-Expected-*`` ones."""
    extra = {
        "Nats-Msg-Id": msg_id,
        "Nats-Expected-Stream": expected_stream,
        "Nats-Expected-Last-Sequence": expected_last_seq,
        "Nats-Expected-Last-Subject-Sequence": expected_last_subject_seq,
        "Nats-Expected-Last-Msg-Id": expected_last_msg_id,
    }
    out = dict(headers) if headers else {}
    for key, value in extra.items():
        if value is None:
            continue
        if isinstance(value, int) and (isinstance(value, bool) or value < 0):
            raise errors.InvalidOptionError(f"{key} must be a sequence number >= 0, got {value!r}")
        out[key] = str(value)
    return out or None


_PLAIN_ACK = re.compile(rb'\{"stream":"([^"\\]+)",\s*"seq":(\d+)\}\s*')


def parse_puback(data: bytes) -> PubAck:
    plain = _PLAIN_ACK.fullmatch(data)
    if plain is not None:  # the usual reply, without a JSON parse
        return PubAck(plain.group(1).decode(), int(plain.group(2)))
    try:
        resp = json.loads(data)
    except ValueError:
        raise errors.JetStreamError(f"invalid publish acknowledgement: {data[:100]!r}") from None
    if "error" in resp:
        raise errors.APIError.from_error(resp["error"])
    return PubAck.from_response(resp)


def _is_no_responders(msg: Any) -> bool:
    hdrs = msg.headers
    return bool(hdrs) and hdrs.get("Status") == "503" and not msg.data


async def publish_with_retry(
    client: "Client", subject: str, data: bytes, headers: Optional[Dict[str, str]], timeout: float
) -> PubAck:
    """One JetStream publish as request/reply, retried on 503 (ADR-22)."""
    nc = client._nc
    for attempt in range(RETRY_ATTEMPTS + 1):
        try:
            msg = await nc.request(subject, data, timeout=timeout, headers=headers)
        except _nerr.NoRespondersError:
            if attempt == RETRY_ATTEMPTS:
                raise errors.NoRespondersError(f"no stream answered a publish to {subject!r}") from None
            await asyncio.sleep(RETRY_WAIT)
            continue
        except _nerr.TimeoutError:
            raise errors.TimeoutError(f"no publish acknowledgement for {subject!r} within {timeout}s") from None
        except _nerr.Error as exc:
            raise translate(exc) from None
        return parse_puback(msg.data)
    raise AssertionError("unreachable")  # pragma: no cover


class _Pending:
    __slots__ = ("subject", "data", "headers", "future", "deadline", "attempt")

    def __init__(self, subject: str, data: bytes, headers: Optional[Dict[str, str]], future: Any, deadline: float):
        self.subject = subject
        self.data = data
        self.headers = headers
        self.future = future
        self.deadline = deadline
        self.attempt = 0


_COND_LOCK = threading.Lock()
_PENDING, _FINISHED = _futures_base.PENDING, _futures_base.FINISHED


class PubAckFuture(concurrent.futures.Future):  # type: ignore[type-arg]
    """A ``concurrent.futures.Future`` of a PubAck.

    Its condition variable is made only when something waits on it (most
    results are read after they are set), and asking for the result sends
    queued publishes at once instead of at the next batch or tick.
    """

    def __init__(self, publisher: "AsyncPublisher") -> None:
        # Future.__init__ minus the Condition, which _condition makes on demand.
        self._cond: Optional[threading.Condition] = None
        self._state = _PENDING
        self._result = None
        self._exception: Optional[BaseException] = None
        self._waiters: list = []
        self._done_callbacks: list = []
        self._publisher = publisher

    @property  # type: ignore[override]
    def _condition(self) -> threading.Condition:
        cond = self._cond
        if cond is None:
            with _COND_LOCK:
                cond = self._cond
                if cond is None:
                    cond = self._cond = threading.Condition()
        return cond

    def _finish_unwatched(self, result: Any, exception: Optional[BaseException]) -> bool:
        """Resolve without the Condition if nobody has asked for it yet."""
        if self._cond is not None:
            return False
        with _COND_LOCK:
            if self._cond is not None:
                return False
            if self._state != _PENDING:  # pragma: no cover - cancel() makes the Condition
                raise concurrent.futures.InvalidStateError(f"{self._state}: {self!r}")
            self._result = result
            self._exception = exception
            self._state = _FINISHED
        self._invoke_callbacks()
        return True

    def set_result(self, result: Any) -> None:
        if not self._finish_unwatched(result, None):
            super().set_result(result)

    def set_exception(self, exception: Optional[BaseException]) -> None:
        if not self._finish_unwatched(None, exception):
            super().set_exception(exception)

    def result(self, timeout: Optional[float] = None) -> PubAck:
        if self._state == _FINISHED:
            if self._exception is not None:
                raise self._exception
            return self._result  # type: ignore[return-value]
        self._publisher.kick()
        return super().result(timeout)  # type: ignore[no-any-return]

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        if self._state == _FINISHED:
            return self._exception
        self._publisher.kick()
        return super().exception(timeout)


class AsyncPublisher(Batcher):
    """Pipelined JetStream publishes with a bounded window.

    User threads queue publishes (blocking only while ``max_pending`` are in
    flight). The loop thread is not woken per call: queued publishes go out
    per ``BATCH``, when a caller waits (a result, the window, completion),
    or after ``DELAY`` seconds. They are sent with replies on one wildcard
    inbox, and each Future is resolved with its PubAck.
    """

    BATCH = 64
    DELAY = 0.002

    def __init__(self, client: "Client", max_pending: int = DEFAULT_MAX_PENDING) -> None:
        if max_pending < 1:
            raise errors.InvalidOptionError("max_pending must be >= 1")
        super().__init__(client._lt)
        self._client = client
        client._batchers.add(self)
        self._max = max_pending
        # Wake blocked publishers once half the window is free, not per ack.
        self._low_water = max_pending // 2
        self._inflight: Dict[bytes, _Pending] = {}
        self._prefix = b""
        self._sub: Any = None
        self._sweeper: Optional["asyncio.Task[None]"] = None
        self._next_id = 0
        # submitted is written by user threads (under _lock), completed only by
        # the loop thread; their difference is what is in flight.
        self._lock = threading.Lock()
        self._submitted = 0
        self._completed = 0
        self._cond = threading.Condition()
        self._waiters = 0
        self._setup_lock = threading.Lock()
        client._add_listener("closed", self._on_closed)

    @property
    def pending(self) -> int:
        """Publishes queued or awaiting their PubAck."""
        return self._submitted - self._completed

    def publish(
        self, subject: str, data: bytes, headers: Optional[Dict[str, str]], timeout: float
    ) -> "concurrent.futures.Future[PubAck]":
        client = self._client
        client._check_open()
        if self._sub is None:
            self._setup()
        with self._lock:
            if self._submitted - self._completed >= self._max:
                self.kick()
                if not self._wait(lambda: self._submitted - self._completed < self._max, timeout):
                    raise errors.TimeoutError(f"publish_async window full for {timeout}s: acks are not coming back")
            self._submitted += 1
        future = PubAckFuture(self)
        self._queue.append(_Pending(subject, data, headers, future, time.monotonic() + timeout))
        try:
            self.queued()
        except errors.JetStreamError as exc:  # the loop is gone: fail it here
            self._fail(self._queue.pop(), exc)
        return future

    def wait_complete(self, timeout: Optional[float]) -> bool:
        self.kick()
        return self._wait(lambda: self._submitted == self._completed, timeout)

    def _wait(self, predicate: Any, timeout: Optional[float]) -> bool:
        with self._cond:
            self._waiters += 1
            try:
                return self._cond.wait_for(predicate, timeout)
            finally:
                self._waiters -= 1

    def _setup(self) -> None:
        """The reply subscription and the timeout sweeper, on first use."""
        with self._setup_lock:
            if self._sub is None:
                self._client._run(self._asetup(), 10.0)

    async def _asetup(self) -> None:
        client = self._client
        nc = client._nc
        prefix = nc.new_inbox() + "."
        if client._wire:
            sub = await nc.subscribe(prefix + "*")
            client._dispatcher.register(sub._id, self._on_reply_raw)
        else:
            sub = await nc.subscribe(prefix + "*", cb=self._on_reply)
        self._prefix = prefix.encode()
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        self._sub = sub

    # -- loop side ------------------------------------------------------------

    def _send(self, queue: Deque[_Pending]) -> None:
        client = self._client
        if not client._wire:
            client._lt.loop.create_task(self._publish_each()).add_done_callback(_log_failure)
            return
        parts = []
        sent = []
        prefix = self._prefix
        inflight = self._inflight
        while queue:
            entry = queue.popleft()
            token = self._track(entry)
            sent.append(token)
            parts.append(_command(entry, prefix + token))
        if not send_raw(client._nc, b"".join(parts)):
            exc = errors.ConnectionClosedError("cannot publish: the connection is closed or its buffer is full")
            for token in sent:
                entry = inflight.pop(token, None)
                if entry is not None:
                    self._fail(entry, exc)

    def _track(self, entry: _Pending) -> bytes:
        """A reply token for ``entry``, awaiting its PubAck."""
        self._next_id += 1
        token = b"%d" % self._next_id
        self._inflight[token] = entry
        return token

    async def send_queued(self) -> None:
        if self._client._wire:
            self._send_now()
        else:
            await self._publish_each()

    async def _publish_each(self) -> None:
        """Without the fast paths: one nats-py publish per message."""
        nc = self._client._nc
        queue = self._queue
        while queue:
            entry = queue.popleft()
            token = self._track(entry)
            try:
                await nc.publish(entry.subject, entry.data, reply=(self._prefix + token).decode(), headers=entry.headers)
            except Exception as exc:
                if self._inflight.pop(token, None) is not None:
                    self._fail(entry, translate(exc))

    def _on_reply_raw(self, subject: bytes, reply: bytes, data: bytes, headers: Optional[bytes]) -> None:
        entry = self._inflight.pop(subject[len(self._prefix) :], None)
        if entry is None:
            return  # timed out already
        if not data and headers is not None and headers.startswith(b"NATS/1.0 503"):
            self._no_responders(entry)
            return
        self._resolve(entry, data)

    async def _on_reply(self, msg: Any) -> None:
        entry = self._inflight.pop(msg.subject[len(self._prefix) :].encode(), None)
        if entry is None:
            return
        if _is_no_responders(msg):
            self._no_responders(entry)
            return
        self._resolve(entry, msg.data)

    def _resolve(self, entry: _Pending, data: bytes) -> None:
        try:
            ack = parse_puback(data)
        except errors.JetStreamError as exc:
            self._fail(entry, exc)
        else:
            self._done(entry, ack, None)

    def _no_responders(self, entry: _Pending) -> None:
        if entry.attempt < RETRY_ATTEMPTS:  # ADR-22: try again shortly
            entry.attempt += 1
            asyncio.get_running_loop().call_later(RETRY_WAIT, self._resend, entry)
            return
        self._fail(entry, errors.NoRespondersError(f"no stream answered a publish to {entry.subject!r}"))

    def _resend(self, entry: _Pending) -> None:
        self._queue.appendleft(entry)
        self.kick()

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(_SWEEP_INTERVAL)
            now = time.monotonic()
            expired = [t for t, e in self._inflight.items() if e.deadline <= now]
            for token in expired:
                entry = self._inflight.pop(token)
                self._fail(entry, errors.TimeoutError(f"no publish acknowledgement for {entry.subject!r}"))

    def _on_closed(self) -> None:
        exc = errors.ConnectionClosedError("connection closed before the publish was acknowledged")
        pending = list(self._inflight.values()) + list(self._queue)
        self._inflight.clear()
        self._queue.clear()
        for entry in pending:
            self._fail(entry, exc)
        if self._sweeper is not None:
            self._sweeper.cancel()

    def _fail(self, entry: _Pending, exc: BaseException) -> None:
        self._done(entry, None, exc)

    def _done(self, entry: _Pending, ack: Optional[PubAck], exc: Optional[BaseException]) -> None:
        future = entry.future
        try:
            if exc is not None:
                future.set_exception(exc)
            else:
                future.set_result(ack)
        except concurrent.futures.InvalidStateError:  # cancelled by the user meanwhile
            pass
        self._completed += 1
        if self._waiters and self._submitted - self._completed <= self._low_water:
            with self._cond:
                self._cond.notify_all()


def _command(entry: _Pending, reply: bytes) -> bytes:
    """The PUB (or HPUB) line of a queued publish."""
    subject, data = entry.subject.encode(), entry.data
    if entry.headers is None:
        return b"PUB %s %s %d\r\n%s\r\n" % (subject, reply, len(data), data)
    hdr = header_block(entry.headers)
    return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, reply, len(hdr), len(hdr) + len(data), hdr, data)


def header_block(headers: Dict[str, str]) -> bytes:
    """``NATS/1.0`` header block; keys and values checked as nats-py does."""
    lines = [b"NATS/1.0\r\n"]
    for key, value in headers.items():
        key = key.strip()
        if not key:
            continue
        if not _HEADER_KEY.fullmatch(key):
            raise errors.InvalidOptionError(f"invalid header name {key!r}")
        lines.append(b"%s: %s\r\n" % (key.encode(), value.strip().replace("\r", " ").replace("\n", " ").encode()))
    lines.append(b"\r\n")
    return b"".join(lines)


def check_subject(subject: Any) -> str:
    """A publishable subject (checked here because raw sends skip nats-py's check)."""
    if not isinstance(subject, str) or not subject or _BAD_SUBJECT.search(subject):
        raise errors.InvalidOptionError(f"invalid subject {subject!r}")
    return subject


def _log_failure(task: "asyncio.Task[None]") -> None:
    if not task.cancelled() and task.exception() is not None:
        logging.getLogger("jetstream_sync").error("publish_async sender failed", exc_info=task.exception())
