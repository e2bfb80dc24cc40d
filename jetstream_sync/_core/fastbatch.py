"""Fast-ingest batch publishing (ADR-50 "Fast-ingest", server 2.14+).

The batch's state travels in each message's reply subject,
``<inbox>.<flow>.<gap>.<batch seq>.<op>.$FI``; the server answers on that
inbox: a flow ack ``{"type":"ack","seq":n,"msgs":flow}`` every ``flow``
messages (the first message always gets one), ``{"type":"gap",...}`` and
``{"type":"err",...}`` notices, and the final PubAck (``batch``, ``count``)
to the commit. The user thread publishes through the connection's outbox and
waits on a condition for the acks, which the loop thread's handler records.

What a failed batch stored: in gap mode "fail" the stream holds messages 1 to
k of the batch, in order. The server says k in the PubAck that ends a batch
(a refused message); a flow ack says only that k >= its ``seq``. A server
that restarted (or dropped the batch) answers "batch publish ID unknown"
with no count, and a batch cut off by a timeout or a closed connection gets
no answer: then ``stored`` is what the flow acks confirmed and k is at most
the messages sent (``sent``).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from .. import errors, options
from ..models import FastPubAck, PubAck
from . import otel
from .connection import Connection
from .publish import check_publish

_START, _APPEND, _COMMIT, _COMMIT_EOB, _PING = range(5)
_BATCH_UNKNOWN = errors.ErrorCode.BATCH_PUBLISH_ID_UNKNOWN  # the answer to messages of a batch that ended


class FastBatch:
    """One fast-ingest batch. Use it from one thread at a time.

    :meth:`add` publishes a message and returns a :class:`FastPubAck`; it
    waits (at most ``ack_timeout`` seconds) for the server's first flow ack,
    and later whenever ``max_outstanding_acks`` acks are outstanding.
    :meth:`commit` publishes the last message and returns the batch's
    PubAck (``batch_id``, ``batch_size``); :meth:`close` ends the batch
    without another message. A refused message (gap mode "fail") ends the
    batch with :class:`FastBatchError`, which says how many were stored.
    As a context manager, leaving the block without a commit closes it.
    """

    def __init__(self, conn: Connection, opts: options.FastBatchOptions, batch_id: str) -> None:
        self._conn = conn
        self._opts = opts
        self.batch_id = batch_id
        self._inbox = f"_INBOX.{batch_id}"
        gap = "ok" if opts.continue_on_gap else "fail"
        self._reply_prefix = f"{self._inbox}.{opts.flow}.{gap}."  # the initial flow stays in every reply
        self._sid: Optional[int] = None
        self._first_subject = ""
        self._seq = 0  # batch sequences used (user thread only)
        self._eob = False
        self._closed = False
        # Shared with the loop thread's handler; guarded by _cond.
        self._cond = threading.Condition()
        self._ack_seq = 0
        self._flow = opts.flow
        self._final: Optional[Dict[str, Any]] = None
        self._refused: Optional[Tuple[int, errors.APIError]] = None  # the first "err" notice
        self._notices: List[BaseException] = []  # for the error handler, called in the user thread
        self._conn_closed = False  # the connection closed while the batch was open
        self._unlisten: Optional[Callable[[], None]] = None
        self.flow_acks = 0  # flow acks received (observability, tests)
        # Tracing (user thread only): the batch's send span, from the first message to the PubAck.
        self._tracing: Optional[otel.Instrumentation] = None
        self._span: Any = None
        self._span_subject = ""
        self._trace_headers: Dict[str, str] = {}

    # -- the loop thread's side ---------------------------------------------------------

    def _on_reply(self, subject: bytes, reply: bytes, data: bytes, headers: Optional[bytes]) -> None:
        """Loop thread: record one answer of the server and wake the user thread."""
        if not data and headers is not None and headers.startswith(b"NATS/1.0 503"):
            body: Dict[str, Any] = {"error": {"code": 503, "description": "no stream on the batch's subject"}}
        else:
            try:
                body = json.loads(data)
            except ValueError:
                return
        tokens = subject.split(b".")  # <inbox>.<flow>.<gap>.<batch seq>.<op>.$FI
        seq, op = (int(tokens[-3]), int(tokens[-2])) if len(tokens) > 3 and tokens[-3].isdigit() else (0, _APPEND)
        with self._cond:
            self._record(body, seq, op)
            self._cond.notify_all()

    def _record(self, body: Dict[str, Any], seq: int, op: int) -> None:
        """Holding _cond: one answer for batch sequence ``seq`` (sent with operation ``op``)."""
        kind = body.get("type")
        if kind == "ack":
            self._ack_seq = max(self._ack_seq, int(body.get("seq") or 0))
            self._flow = int(body.get("msgs") or self._flow)
            self.flow_acks += 1
        elif kind == "gap":
            lost = f"{body.get('last_seq')} to {int(body.get('seq') or 0) - 1}"
            self._notices.append(errors.JetStreamError(f"fast batch {self.batch_id}: messages {lost} were lost"))
        elif kind == "err" or (
            body.get("error") and "batch" not in body and self.flow_acks and op in (_START, _APPEND)
            and (body["error"].get("err_code") != _BATCH_UNKNOWN)
        ):  # a refused message: the batch goes on (gap "ok") or the server ends it (gap "fail")
            err = errors.APIError.from_error(body.get("error") or {})
            self._notices.append(err)
            if self._refused is None:
                self._refused = (int(body.get("seq") or 0) if kind == "err" else seq, err)
        elif self._final is None:  # the batch's PubAck, or the error that ended (or never began) it
            self._final = body

    def _on_closed(self) -> None:
        """Loop thread: the connection closed; a waiting add() or commit() stops waiting."""
        with self._cond:
            self._conn_closed = True
            self._cond.notify_all()

    # -- the user thread's side ---------------------------------------------------------

    def add(self, subject: str, data: Union[bytes, str] = b"", *, headers: Optional[Dict[str, str]] = None) -> FastPubAck:
        """Publish one message of the batch (headers checked first)."""
        payload, headers, hdr = self._prepare(subject, data, headers)
        seq = self._seq + 1
        try:
            if seq == 1:
                self._subscribe()
                self._first_subject = subject
                self._start(subject, payload, headers, hdr)
            else:
                self._send(subject, payload, headers, hdr, seq, _APPEND)
                self._wait(lambda: self._ack_seq + self._flow * self._opts.max_outstanding_acks > seq, "a flow ack")
            self._report_notices()
            if self._refused is not None and not self._opts.continue_on_gap:
                self._fail_now()
        except errors.FastBatchError as exc:  # the batch ended
            self._span_ended(None, exc)
            raise
        return FastPubAck(seq, self._ack_seq)

    def commit(self, subject: str, data: Union[bytes, str] = b"", *, headers: Optional[Dict[str, str]] = None) -> PubAck:
        """Publish the last message and end the batch: the batch's PubAck
        (``batch_id``, ``batch_size`` = messages stored, ``seq`` of the last)."""
        payload, headers, hdr = self._prepare(subject, data, headers)
        if self._seq == 0:
            self._subscribe()
        return self._end(subject, payload, headers, hdr, _COMMIT)

    def close(self) -> Optional[PubAck]:
        """End the batch without another message (None if nothing was added,
        or it had ended already): the batch's PubAck."""
        if self._closed or self._seq == 0:
            self._closed = True
            return None
        return self._end(self._first_subject, b"", None, b"", _COMMIT_EOB)

    @property
    def closed(self) -> bool:
        """True after commit, close or a failure."""
        return self._closed

    @property
    def size(self) -> int:
        """Messages published in this batch so far."""
        return self._seq - self._eob

    def __enter__(self) -> "FastBatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._closed:
            try:
                self.close()
            except errors.JetStreamError:
                if exc[0] is None:
                    raise

    def _prepare(
        self, subject: str, data: Union[bytes, str], headers: Optional[Dict[str, str]]
    ) -> Tuple[bytes, Optional[Dict[str, str]], bytes]:
        """(payload, headers, header block) of a message, checked; with the
        batch's trace context in the headers while it is traced."""
        if self._closed:
            raise errors.BatchClosedError(f"fast batch {self.batch_id} is closed")
        conn = self._conn
        try:
            conn.check()
        except errors.ConnectionClosedError as exc:
            if not self._seq:
                raise  # nothing sent: no batch to report on
            err = self._closed_error()
            self._span_ended(None, err)
            raise err from exc
        conn.loop_thread.check_usable()
        payload = options.as_bytes(data)
        hdr = check_publish(conn, subject, payload, headers)
        if self._span is None:
            if (tr := otel.active) is None:
                return payload, headers, hdr
            # traced: one send span for the whole batch (it spans several calls), started by its first message
            self._tracing, self._span_subject = tr, subject
            self._span, self._trace_headers = tr.start_stream_batch(subject, self.batch_id)
        headers = {**(headers or {}), **self._trace_headers}
        return payload, headers, check_publish(conn, subject, payload, headers)

    def _span_ended(self, ack: Optional[PubAck], exc: Optional[BaseException]) -> None:
        """End the batch's span (if traced) with its PubAck or the error that ended it."""
        span, self._span = self._span, None
        if span is not None and self._tracing is not None:
            self._tracing.stream_batch_ended(span, ack, exc, self._span_subject)

    def _subscribe(self) -> None:
        conn = self._conn
        self._sid = conn.run(conn.subscribe(self._inbox + ".>", self._on_reply), self._opts.ack_timeout)
        self._unlisten = conn.add_listener("closed", self._on_closed)

    def _send(self, subject: str, payload: bytes, headers: Optional[Dict[str, str]], hdr: bytes, seq: int, op: int) -> None:
        try:
            self._conn.outbox.publish(
                subject, payload, f"{self._reply_prefix}{seq}.{op}.$FI", headers, hdr, self._opts.ack_timeout
            )
        except errors.ConnectionClosedError as exc:
            if self._seq:
                raise self._closed_error() from exc
            raise
        self._seq = seq

    def _end(self, subject: str, payload: bytes, headers: Optional[Dict[str, str]], hdr: bytes, op: int) -> PubAck:
        self._eob = op == _COMMIT_EOB  # the end-of-batch marker takes a sequence but stores nothing
        try:
            self._send(subject, payload, headers, hdr, self._seq + 1, op)
            self._wait(lambda: False, "the batch's PubAck")
            self._report_notices()
            self._finish()
            ack = self._final_ack()
        except BaseException as exc:
            self._span_ended(None, exc)
            raise
        self._span_ended(ack, None)
        return ack

    def _start(self, subject: str, payload: bytes, headers: Optional[Dict[str, str]], hdr: bytes) -> None:
        """Send the first message and wait for its flow ack (it acks "seq 0"
        with the flow to use). "No responders" (a stream just made, its leader
        moving) is tried again as a publish is (the options' ``retry``), within ack_timeout."""
        retry = self._opts.retry
        deadline = time.monotonic() + self._opts.ack_timeout
        tried = 0
        while True:
            self._send(subject, payload, headers, hdr, 1, _START)
            again = options.may_retry(retry, tried, deadline)
            if self._wait(lambda: self.flow_acks >= 1, "its first flow ack", unanswered_again=again):
                return
            tried += 1
            time.sleep(retry[1])

    def _wait(self, ready: Any, what: str, unanswered_again: bool = False) -> bool:
        """Wait until ``ready()`` or the batch ended, pinging every third of
        ``ack_timeout`` for lost acks; FastBatchError after ``ack_timeout``.
        ``unanswered_again``: the first message met "no responders": return
        False (to send it again) instead of failing. True otherwise."""
        timeout = self._opts.ack_timeout
        deadline = time.monotonic() + timeout
        with self._cond:
            done = ready() or self._final is not None or self._conn_closed
        self._conn.check_wait(what, ready=done)  # only the loop thread records acks
        self._conn.outbox.kick()
        while True:
            with self._cond:
                left = deadline - time.monotonic()
                if ready() or self._final is not None or self._conn_closed or left <= 0:
                    break
                if self._cond.wait(min(left, timeout / 3)):
                    continue
            self._ping()  # not holding _cond: the publish may wait for room, and the loop needs _cond to record acks
        with self._cond:
            final = self._final
            if unanswered_again and final is not None and not self.flow_acks and (final.get("error") or {}).get("code") == 503:
                self._final = None
                return False
        if self._final is None and not ready():
            if self._conn_closed:
                raise self._closed_error() from errors.ConnectionClosedError("the connection closed")
            self._finish()
            raise errors.FastBatchError(
                f"fast batch {self.batch_id}: no answer from the server within {timeout}s waiting for {what}"
                f"{self._conn.timeout_note()}; {self._unconfirmed()}",
                self.batch_id, self._ack_seq, sent=self.size,
            )  # fmt: skip
        if self._final is not None and what != "the batch's PubAck":
            self._finish()
            self._final_ack()  # raises: the server ended the batch early
            stored = max(int(self._final.get("count") or 0), self._ack_seq)
            raise errors.FastBatchError(
                f"fast batch {self.batch_id} was ended by the server; {stored} of {self.size} messages stored",
                self.batch_id, stored, sent=self.size,
            )  # fmt: skip
        return True

    def _unconfirmed(self) -> str:
        """What is known stored when the server did not say: what the flow acks confirmed."""
        acked, sent = self._ack_seq, self.size
        text = f"{acked} of {sent} messages confirmed stored"
        if sent > acked:
            more = f"message {sent}" if sent == acked + 1 else f"messages {acked + 1} to {sent}"
            text += f" ({more} may be stored too)"
        return text

    def _closed_error(self) -> errors.FastBatchError:
        """The batch ends because its connection closed: what the flow acks confirmed."""
        self._finish()
        return errors.FastBatchError(
            f"fast batch {self.batch_id}: the connection closed; {self._unconfirmed()}",
            self.batch_id, self._ack_seq, sent=self.size,
        )  # fmt: skip

    def _ping(self) -> None:
        """Ask the server to resend its last flow ack (and report gaps)."""
        if self._first_subject:
            reply = f"{self._reply_prefix}{self._seq}.{_PING}.$FI"
            self._conn.outbox.publish(self._first_subject, b"", reply, None, b"", self._opts.ack_timeout)
            self._conn.outbox.kick()

    def _final_ack(self) -> PubAck:
        """The batch's PubAck; FastBatchError if it ended with an error or a refused message."""
        final: Dict[str, Any] = self._final or {}
        err = final.get("error")
        refused = None if self._opts.continue_on_gap else self._refused  # with gaps allowed, a notice only
        if not err and refused is None:
            return PubAck.from_response(final)
        cause = refused[1] if refused is not None else errors.APIError.from_error(final["error"])
        if cause.err_code == errors.ErrorCode.BATCH_PUBLISH_DISABLED:
            cause = cause.with_hint("the stream needs allow_batched=True")
        failed = refused[0] if refused is not None else None
        if cause.err_code == _BATCH_UNKNOWN or cause.code == 503:  # restarted, dropped, moving: it cannot say
            if cause.code == 503:
                what = f"no stream answered message {failed} (the server is restarting or the stream's leader moved)"
            else:
                what = "the server no longer knows the batch (it restarted or dropped it)"
            what += f"; {self._unconfirmed()}"
            raise errors.FastBatchError(
                f"fast batch {self.batch_id} failed: {what}", self.batch_id, self._ack_seq, sent=self.size
            ) from cause
        count = int(final.get("count") or 0)  # the server's count: messages 1 to count are stored
        stored = max(count, self._ack_seq)
        last = final.get("seq") if count and count == stored else None
        raise errors.FastBatchError(
            f"fast batch {self.batch_id} failed{f' at message {failed}' if failed else ''}: {cause}; "
            f"{stored} of {self.size} messages stored" + (f", the last at stream sequence {last}" if last else ""),
            self.batch_id, stored, last, failed, sent=self.size,
        ) from cause  # fmt: skip

    def _fail_now(self) -> None:
        """A message was refused in gap mode "fail": the server ends the batch; wait for its PubAck."""
        self._wait(lambda: False, "the batch's PubAck")
        self._finish()
        self._final_ack()

    def _report_notices(self) -> None:
        with self._cond:
            notices, self._notices = self._notices, []
        handler = self._opts.error_handler
        for notice in notices:
            if handler is not None:
                handler(notice)

    def _finish(self) -> None:
        """Closed from now on; interest in the inbox removed (the server stops answering)."""
        self._closed = True
        unlisten, self._unlisten = self._unlisten, None
        if unlisten is not None:
            unlisten()
        sid, self._sid = self._sid, None
        if sid is not None and not self._conn.is_closed:
            try:
                self._conn.run(self._conn.unsubscribe(sid), self._opts.ack_timeout)
            except errors.JetStreamError:
                pass  # closing anyway; the connection's own close removes it
