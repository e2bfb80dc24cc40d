"""JetStream publish: headers, PubAck parsing, ADR-22 retries, and the
windowed asynchronous publisher behind ``JetStream.publish_async``."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Deque, Dict, Optional

import nats.errors as _nerr

from . import errors
from .client import translate
from .models import PubAck

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

# ADR-22: retry a publish that met "no responders" (stream leader moving,
# server restarting) a couple of times before failing.
RETRY_ATTEMPTS = 2
RETRY_WAIT = 0.25
DEFAULT_MAX_PENDING = 4000
_SWEEP_INTERVAL = 0.1


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


def parse_puback(data: bytes) -> PubAck:
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


class AsyncPublisher:
    """Pipelined JetStream publishes with a bounded window.

    User threads queue publishes (blocking only while ``max_pending`` are in
    flight); the loop thread sends them with replies on one wildcard inbox and
    resolves each ``concurrent.futures.Future`` with its PubAck.
    """

    def __init__(self, client: "Client", max_pending: int = DEFAULT_MAX_PENDING) -> None:
        if max_pending < 1:
            raise errors.InvalidOptionError("max_pending must be >= 1")
        self._client = client
        self._max = max_pending
        # Wake blocked publishers once half the window is free, not per ack.
        self._low_water = max_pending // 2
        self._queue: Deque[_Pending] = collections.deque()
        self._scheduled = False
        self._inflight: Dict[str, _Pending] = {}
        self._prefix = ""
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
        client._add_listener("closed", self._on_closed)

    @property
    def pending(self) -> int:
        """Publishes queued or awaiting their PubAck."""
        return self._submitted - self._completed

    def publish(
        self, subject: str, data: bytes, headers: Optional[Dict[str, str]], timeout: float
    ) -> "concurrent.futures.Future[PubAck]":
        self._client._check_open()
        with self._lock:
            if self._submitted - self._completed >= self._max:
                if not self._wait(lambda: self._submitted - self._completed < self._max, timeout):
                    raise errors.TimeoutError(f"publish_async window full for {timeout}s: acks are not coming back")
            self._submitted += 1
        future: "concurrent.futures.Future[PubAck]" = concurrent.futures.Future()
        self._queue.append(_Pending(subject, data, headers, future, time.monotonic() + timeout))
        if not self._scheduled:
            self._scheduled = True
            try:
                self._client._lt.call_soon(self._kick)
            except errors.JetStreamError as exc:
                self._scheduled = False
                self._fail(self._queue.pop(), exc)
        return future

    def wait_complete(self, timeout: Optional[float]) -> bool:
        return self._wait(lambda: self._submitted == self._completed, timeout)

    def _wait(self, predicate: Any, timeout: Optional[float]) -> bool:
        with self._cond:
            self._waiters += 1
            try:
                return self._cond.wait_for(predicate, timeout)
            finally:
                self._waiters -= 1

    # -- loop side ------------------------------------------------------------

    def _kick(self) -> None:
        task = self._client._lt.loop.create_task(self._drain())
        task.add_done_callback(_log_failure)

    async def _drain(self) -> None:
        self._scheduled = False
        nc = self._client._nc
        if self._sub is None:  # first use: one reply subscription for all publishes
            self._prefix = nc.new_inbox() + "."
            self._sub = asyncio.ensure_future(nc.subscribe(self._prefix + "*", cb=self._on_reply))
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        try:
            await self._sub
        except Exception as exc:
            self._sub = None
            while self._queue:
                self._fail(self._queue.popleft(), translate(exc))
            return
        queue = self._queue
        while queue:
            entry = queue.popleft()
            self._next_id += 1
            token = str(self._next_id)
            self._inflight[token] = entry
            try:
                # Does not suspend unless nats-py's pending buffer is full.
                await nc.publish(entry.subject, entry.data, reply=self._prefix + token, headers=entry.headers)
            except Exception as exc:
                if self._inflight.pop(token, None) is not None:
                    self._fail(entry, translate(exc))

    async def _on_reply(self, msg: Any) -> None:
        token = msg.subject[len(self._prefix) :]
        entry = self._inflight.pop(token, None)
        if entry is None:
            return  # timed out already
        if _is_no_responders(msg):
            if entry.attempt < RETRY_ATTEMPTS:
                entry.attempt += 1
                asyncio.get_running_loop().call_later(RETRY_WAIT, self._resend, entry)
                return
            self._fail(entry, errors.NoRespondersError(f"no stream answered a publish to {entry.subject!r}"))
            return
        try:
            ack = parse_puback(msg.data)
        except errors.JetStreamError as exc:
            self._fail(entry, exc)
        else:
            self._done(entry, ack, None)

    def _resend(self, entry: _Pending) -> None:
        self._queue.appendleft(entry)
        if not self._scheduled:
            self._scheduled = True
            self._kick()

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
        if not future.done():
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


def _log_failure(task: "asyncio.Task[None]") -> None:
    if not task.cancelled() and task.exception() is not None:
        logging.getLogger("jetstream_sync").error("publish_async sender failed", exc_info=task.exception())
