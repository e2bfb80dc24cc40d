"""Publishing to JetStream: acknowledged, asynchronous, atomic batches and
counters. The base of the public JetStream context and of
:class:`~jetstream_sync._core.jsapi.JsApi` (what handles and buckets publish with)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from .. import errors, options
from ..models import PubAck
from ..options import DEFAULT, DefaultType, as_bytes
from .connection import Connection
from .fastbatch import FastBatch
from . import otel
from .features import require
from .nats_errors import translate
from .nuid import next_nuid
from .publish import check_publish, known_subject
from .writer import encoded, pub_line

BatchItem = Union[Tuple[str, Union[bytes, str]], Tuple[str, Union[bytes, str], Optional[Dict[str, str]]]]


class JsPublisher:
    """Publishing on one connection, with ``timeout`` (seconds) as the
    default bound of each acknowledged publish."""

    def __init__(self, conn: Connection, timeout: float) -> None:
        self._conn = conn
        self._timeout = timeout

    @property
    def timeout(self) -> float:
        """Seconds each API request and acknowledged publish waits by default."""
        return self._timeout

    def publish(
        self,
        subject: str,
        data: Union[bytes, str] = b"",
        *,
        headers: Optional[Dict[str, str]] = None,
        msg_id: Optional[str] = None,
        expected_stream: Optional[str] = None,
        expected_last_seq: Optional[int] = None,
        expected_last_subject_seq: Optional[int] = None,
        expected_last_msg_id: Optional[str] = None,
        expected_last_subject_seq_subject: Optional[str] = None,
        msg_ttl: Optional[float] = None,
        timeout: Union[float, DefaultType] = DEFAULT,
        retry_attempts: Optional[int] = None,
        retry_wait: Optional[float] = None,
    ) -> PubAck:
        """Publish to a stream and wait for its acknowledgement.

        ``msg_id`` sets ``Nats-Msg-Id`` (a repeat within the stream's duplicate
        window returns a PubAck with ``duplicate=True``); the ``expected_*``
        arguments set the ``Nats-Expected-*`` headers, and a mismatch raises
        APIError (``expected_last_subject_seq_subject`` checks the last
        sequence of another subject, wildcards allowed). ``msg_ttl`` (seconds,
        at least 1; the stream needs ``allow_msg_ttl``) removes the message
        after that long (ADR-43).

        "No responders" (no stream took the subject: it was just created, its
        leader is moving, its server restarts) is tried again ``retry_attempts``
        times (default 2; -1: until ``timeout``), ``retry_wait`` seconds apart
        (default 0.25), within ``timeout``; then NoRespondersError. A retry is
        the same message, ``Nats-Msg-Id`` included.
        """
        conn = self._conn
        conn.loop_thread.check_usable()  # a blocking call: never on the loop thread
        retry = options.publish_retry(retry_attempts, retry_wait)
        t, payload, hdrs, hdr = self._prepare(
            subject, data, timeout, headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq,
            expected_last_msg_id, expected_last_subject_seq_subject, msg_ttl,
        )  # fmt: skip
        if (tr := otel.active) is not None:  # traced: through the headers path, the span ends with the PubAck
            with tr.send(subject, payload, hdrs, conn.max_payload) as (span, hdrs, hdr):
                ack = conn.publisher().publish_and_wait(subject, payload, hdrs, hdr, t, retry)
            tr.puback(span, ack)
            return ack  # type: ignore[no-any-return]
        # The same wire path as publish_async (no task per call).
        return conn.publisher().publish_and_wait(subject, payload, hdrs, hdr, t, retry)  # type: ignore[no-any-return]

    def publish_async(
        self,
        subject: str,
        data: Union[bytes, str] = b"",
        *,
        headers: Optional[Dict[str, str]] = None,
        msg_id: Optional[str] = None,
        expected_stream: Optional[str] = None,
        expected_last_seq: Optional[int] = None,
        expected_last_subject_seq: Optional[int] = None,
        expected_last_msg_id: Optional[str] = None,
        expected_last_subject_seq_subject: Optional[str] = None,
        msg_ttl: Optional[float] = None,
        timeout: Union[float, DefaultType] = DEFAULT,
        retry_attempts: Optional[int] = None,
        retry_wait: Optional[float] = None,
    ) -> "concurrent.futures.Future[PubAck]":
        """Publish without waiting; the Future resolves to the PubAck.

        At most ``max_pending`` publishes (see :meth:`set_publish_async_max_pending`,
        default 4000) are in flight; beyond that this call blocks until acks
        come back (or raises TimeoutError after ``timeout``). A thread that
        queues faster than the loop thread can send (it needs the GIL too) also
        pauses now and then until the loop has sent: at most 50 ms per 1,024
        queued publishes. Use :meth:`publish_async_complete` to wait for all of them.
        ``timeout`` bounds each publish until its PubAck; "no responders" is
        tried again as by :meth:`publish` (``retry_attempts``, ``retry_wait``).
        """
        if (
            type(data) is bytes
            and type(subject) is str
            and headers is None
            and msg_id is None
            and expected_stream is None
            and expected_last_seq is None
            and expected_last_subject_seq is None
            and expected_last_msg_id is None
            and expected_last_subject_seq_subject is None
            and msg_ttl is None
            and timeout is DEFAULT
            and retry_attempts is None
            and retry_wait is None
            and known_subject(subject)
            and otel.active is None
        ):  # the usual call: a subject already checked, bytes, no options (_prepare's checks, in short)
            conn = self._conn
            conn.check()
            if len(data) <= conn.max_payload:
                return conn.publisher().publish(subject, data, None, b"", self.timeout)
        retry = options.publish_retry(retry_attempts, retry_wait)
        t, payload, hdrs, hdr = self._prepare(
            subject, data, timeout, headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq,
            expected_last_msg_id, expected_last_subject_seq_subject, msg_ttl,
        )  # fmt: skip
        if (tr := otel.active) is not None:  # traced: the span ends when the Future resolves (PubAck or error)
            with tr.send(subject, payload, hdrs, self._conn.max_payload) as (span, hdrs, hdr):
                fut = self._conn.publisher().publish(subject, payload, hdrs, hdr, t, retry=retry)
            tr.puback_future(span, fut)
            return fut
        return self._conn.publisher().publish(subject, payload, hdrs, hdr, t, retry=retry)

    def _prepare(
        self, subject: str, data: Union[bytes, str], timeout: Union[float, DefaultType], headers: Optional[Dict[str, str]],
        *expectations: Any,
    ) -> Tuple[float, bytes, Optional[Dict[str, str]], bytes]:
        """Checks in the calling thread: (timeout, payload, headers, header block)."""
        conn = self._conn
        conn.check()
        t = options.timeout_or_default("timeout", timeout, self.timeout)
        # No headers and no expectations (the common case): skip building them.
        hdrs = None if headers is None and expectations.count(None) == len(expectations) else options.publish_headers(headers, *expectations)
        payload = data if type(data) is bytes else as_bytes(data)
        return t, payload, hdrs, check_publish(conn, subject, payload, hdrs)

    def publish_batch(
        self, messages: Iterable[BatchItem], *, timeout: Union[float, DefaultType] = DEFAULT,
        retry_attempts: Optional[int] = None, retry_wait: Optional[float] = None,
    ) -> PubAck:
        """Atomic batch publish (ADR-50; the stream needs ``allow_atomic``,
        server 2.12+): every message is stored, or none.

        ``messages`` are ``(subject, data)`` or ``(subject, data, headers)``
        tuples, 1 to 1000 of them (the server's limit), all checked before
        anything is sent. Returns the PubAck of the commit (``batch_id``,
        ``batch_size``); a refused batch raises APIError. A commit that met
        "no responders" stored nothing: the whole batch is sent again, under a
        new batch id, as :meth:`publish` retries (``retry_attempts``, ``retry_wait``).
        """
        conn = self._conn
        conn.check()
        conn.loop_thread.check_usable()
        t = options.timeout_or_default("timeout", timeout, self.timeout)
        retry = options.publish_retry(retry_attempts, retry_wait) or (options.RETRY_ATTEMPTS, options.RETRY_WAIT)
        items = options.batch_items(messages)
        batch_id = next_nuid()
        prepared = []
        blocks = []  # the header blocks, as checked
        for seq, item in enumerate(items, 1):
            subject, data, extra = options.batch_item(seq, item)
            hdrs = dict(extra or {})
            hdrs.update({"Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(seq)})
            if seq == len(items):
                hdrs["Nats-Batch-Commit"] = "1"
            payload = as_bytes(data)
            blocks.append(check_publish(conn, subject, payload, hdrs))
            prepared.append((subject, payload, hdrs))
        if (tr := otel.active) is None:
            return self._send_batch(prepared, batch_id, t, retry, blocks)
        # traced: one send span for the batch, whose context every message carries
        with tr.send_batch([subject for subject, _, _ in prepared], batch_id) as (span, trace_headers):
            for subject, payload, hdrs in prepared:
                hdrs.update(trace_headers)
                check_publish(conn, subject, payload, hdrs)  # still within max_payload
            ack = self._send_batch(prepared, batch_id, t, retry)
        tr.puback(span, ack)
        return ack

    def _send_batch(
        self, prepared: List[Tuple[str, bytes, Dict[str, str]]], batch_id: str, t: float, retry: Tuple[int, float],
        blocks: Optional[List[bytes]] = None,
    ) -> PubAck:
        # Every message but the commit as protocol lines, formatted here in the
        # calling thread: the loop writes them at once (fast paths only).
        lines = _pub_lines(prepared[:-1], blocks) if self._conn.fast else None
        size = sum(len(payload) for _, payload, _ in prepared[:-1]) if lines is not None else 0
        try:
            resp = self._conn.run(self._apublish_batch(prepared, t, retry, lines, size), t + 1.0)
        except errors.TimeoutError as exc:
            raise self._conn.timed_out(
                f"atomic batch {batch_id} of {len(prepared)} messages: no answer to its commit within {t}s"
            ) from exc
        return PubAck.from_response(resp)

    async def _apublish_batch(
        self, prepared: List[Tuple[str, bytes, Dict[str, str]]], timeout: float, retry: Tuple[int, float],
        lines: Optional[bytes] = None, size: int = 0,
    ) -> Dict[str, Any]:
        """``lines``: the messages but the commit as protocol lines, of
        ``size`` payload bytes in all (fast paths only)."""
        conn = self._conn
        deadline = time.monotonic() + timeout
        tried = 0
        while True:
            if lines is not None and conn.fast:
                if lines and not conn.send_commands(lines, len(prepared) - 1, size):
                    raise errors.ConnectionClosedError("cannot publish: the connection is closed or its buffer is full")
            else:
                for subject, payload, hdrs in prepared[:-1]:
                    await conn.apublish(subject, payload, headers=hdrs)
            subject, payload, hdrs = prepared[-1]
            try:
                msg = await conn.request(subject, payload, max(deadline - time.monotonic(), 0.001), headers=hdrs)
                break
            except Exception as exc:
                if not isinstance(translate(exc), errors.NoRespondersError):
                    raise
                if not options.may_retry(retry, tried, deadline):
                    raise
            tried += 1
            await asyncio.sleep(retry[1])
            batch_id = next_nuid()  # a batch the stream may have begun, missing its start, is left to expire
            for _, _, hdrs in prepared:
                hdrs["Nats-Batch-Id"] = batch_id
            if lines is not None:
                lines = _pub_lines(prepared[:-1])
        resp: Dict[str, Any] = json.loads(msg.data)
        if resp.get("error"):
            raise errors.APIError.from_error(resp["error"])
        return resp

    def publish_schedule(
        self,
        subject: str,
        data: Union[bytes, str] = b"",
        *,
        schedule: Any,
        target: str,
        ttl: Optional[float] = None,
        time_zone: Optional[str] = None,
        source: Optional[str] = None,
        rollup: bool = False,
        headers: Optional[Dict[str, str]] = None,
        msg_ttl: Optional[float] = None,
        timeout: Union[float, DefaultType] = DEFAULT,
    ) -> PubAck:
        """Store a message schedule on ``subject`` (ADR-51; the stream needs
        ``allow_msg_schedules``): the stream publishes ``data`` (and
        ``headers``) to ``target``, a subject of the same stream, on the
        schedule. One schedule per subject: a new one replaces the last.

        ``schedule`` is an aware datetime (once, at that time: ``@at``) or a
        str: ``"@at 2030-01-02T03:04:05Z"``, ``"@every 30s"`` (a Go duration,
        at least 1 s), ``"@hourly"`` / ``"@daily"`` / ``"@weekly"`` /
        ``"@monthly"`` / ``"@yearly"``, or a 6-field cron line
        (``"0 30 9 * * mon-fri"``, seconds first), UTC unless ``time_zone``
        (an IANA name, cron only). ``ttl`` (seconds, at least 1; the stream
        needs ``allow_msg_ttl``) is the TTL of each message produced;
        ``source`` publishes the last message of that subject instead of
        ``data``; ``rollup`` makes each produced message a subject rollup;
        ``msg_ttl`` (seconds) removes the schedule itself after that long.
        Everything is checked before anything is sent; a server older than
        2.12 (2.14 for repeating schedules, ``time_zone``, ``rollup``)
        raises FeatureNotSupportedError.
        """
        hdrs = dict(options.mapping("headers", headers) or {})
        hdrs.update(options.schedule_headers(subject, schedule, target, ttl, time_zone, source, rollup))
        repeating = options.is_repeating(hdrs["Nats-Schedule"]) or time_zone is not None or rollup
        require(self._conn, "repeating message schedules" if repeating else "message schedules",
                options.REPEATING_SCHEDULES_SINCE if repeating else options.SCHEDULES_SINCE)  # fmt: skip
        try:
            return self.publish(subject, data, headers=hdrs, msg_ttl=msg_ttl, timeout=timeout)
        except errors.APIError as exc:
            if exc.err_code == errors.ErrorCode.MESSAGE_SCHEDULES_DISABLED:
                raise exc.with_hint("the stream needs allow_msg_schedules=True") from exc
            raise

    def fast_batch(
        self,
        *,
        flow: int = options.DEFAULT_FAST_FLOW,
        max_outstanding_acks: int = options.DEFAULT_MAX_OUTSTANDING_ACKS,
        ack_timeout: Union[float, DefaultType] = DEFAULT,
        continue_on_gap: bool = False,
        error_handler: Optional[Callable[[BaseException], Any]] = None,
        retry_attempts: Optional[int] = None,
        retry_wait: Optional[float] = None,
    ) -> FastBatch:
        """A fast-ingest batch (ADR-50; the stream needs ``allow_batched``,
        server 2.14+): any number of messages, flow-controlled by the
        server, one PubAck for the batch. Nothing is sent until the first
        ``add()``.

        ``flow`` (1 to 65535, default 100) asks for a flow ack every that
        many messages (the server may ask for acks more often); ``add()`` waits once
        ``max_outstanding_acks`` (1 to 3, default 2) are due, at most
        ``ack_timeout`` seconds (default: the context's timeout) per wait.
        ``continue_on_gap=False`` (gap mode "fail") stores messages in order
        without gaps and ends the batch at the first refused message with
        FastBatchError; ``True`` goes on past lost or refused messages.
        ``error_handler`` (called in the publishing thread) gets the
        server's gap and error notices. The first message is tried again
        after "no responders" as :meth:`publish` does (``retry_attempts``,
        ``retry_wait``), within ``ack_timeout``.
        """
        t = options.timeout_or_default("ack_timeout", ack_timeout, self.timeout)
        opts = options.fast_batch_options(
            flow, max_outstanding_acks, t, continue_on_gap, error_handler, retry_attempts, retry_wait
        )
        self._conn.check()
        require(self._conn, "fast-ingest batch publish", options.FAST_BATCH_SINCE)
        return FastBatch(self._conn, opts, next_nuid())

    def publish_fast_batch(self, messages: Iterable[BatchItem], **batch_options: Any) -> PubAck:
        """Publish ``messages`` — ``(subject, data)`` or ``(subject, data,
        headers)`` tuples, any number, all checked before anything is sent;
        the last one commits — as one fast batch (options as
        :meth:`fast_batch`). Returns the batch's PubAck (``batch_size``
        messages stored); FastBatchError says what was stored when the
        server refused one."""
        items = options.fast_batch_items(messages)
        prepared = []
        for seq, item in enumerate(items, 1):
            subject, data, extra = options.batch_item(seq, item)
            payload, hdrs = as_bytes(data), dict(extra) if extra else None
            check_publish(self._conn, subject, payload, hdrs)
            prepared.append((subject, payload, hdrs))
        with self.fast_batch(**batch_options) as batch:
            for subject, payload, hdrs in prepared[:-1]:
                batch.add(subject, payload, headers=hdrs)
            subject, payload, hdrs = prepared[-1]
            return batch.commit(subject, payload, headers=hdrs)

    def counter_add(self, subject: str, delta: int = 1, *, timeout: Union[float, DefaultType] = DEFAULT) -> int:
        """Add ``delta`` (any size, may be negative) to the counter on
        ``subject`` and return its new value (ADR-49; the stream needs
        ``allow_msg_counter``, server 2.12+)."""
        options.integer("delta", delta)
        ack = self.publish(subject, b"", headers={"Nats-Incr": f"{delta:+d}"}, timeout=timeout)
        if ack.val is None:
            raise errors.JetStreamError(f"stream {ack.stream!r} did not answer with a counter value")
        return int(ack.val)

    def set_publish_async_max_pending(self, max_pending: int) -> None:
        """Size of the publish_async window, shared by every JetStream
        context of this Client (one publisher per connection)."""
        self._conn.publisher().set_max_pending(max_pending)

    @property
    def publish_async_pending(self) -> int:
        """publish_async calls of this Client not yet acknowledged."""
        conn = self._conn
        return conn.publisher().pending if conn.has_publisher else 0

    def publish_async_complete(self, timeout: Optional[float] = None) -> bool:
        """Block until every publish_async of this Client is resolved; False on timeout."""
        t = options.optional_timeout("timeout", timeout)
        conn = self._conn
        conn.check_wait("publish acknowledgements", ready=not conn.has_publisher or not conn.publisher().pending)
        if not conn.has_publisher:
            return True
        return conn.publisher().wait_complete(t)


def _pub_lines(prepared: List[Tuple[str, bytes, Dict[str, str]]], blocks: Optional[List[bytes]] = None) -> bytes:
    """HPUB protocol lines of ``(subject, payload, headers)`` messages, no
    reply; ``blocks``: their header blocks, if already made."""
    if blocks is None:
        blocks = [options.header_block(hdrs) for _, _, hdrs in prepared]
    return b"".join(pub_line(encoded(subject), b"", hdr, payload) for (subject, payload, _), hdr in zip(prepared, blocks))
