"""Msg, JetStream ack-subject metadata, and the ack outbox.

Acks never block the user thread: :meth:`Msg.ack` appends to the client's
:class:`AckOutbox` and the loop thread is woken once per burst to publish
everything queued (see DESIGN.md §1). :meth:`Msg.ack_sync` is the confirmed
variant that waits for the server's reply.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import TYPE_CHECKING, Any, Deque, Dict, List, Optional, Tuple

from nats.aio.client import Client as _NatsClient
from nats.aio.msg import Msg as _NatsMsg

from . import errors
from ._wire import Batcher, send_raw

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

__all__ = ["Msg", "Metadata", "SequencePair", "parse_metadata", "AckOutbox"]

_log = logging.getLogger("jetstream_sync")

# nats-py's frozen dataclasses carry exactly the fields ADR-15 defines.
Metadata = _NatsMsg.Metadata
SequencePair = _NatsMsg.Metadata.SequencePair

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_HDR_LINE = len(b"NATS/1.0\r\n")

ACK = b"+ACK"
NAK = b"-NAK"
WPI = b"+WPI"
TERM = b"+TERM"


def parse_metadata(reply: Optional[str]) -> Metadata:
    """Parse a ``$JS.ACK`` reply subject (ADR-15).

    v1 has 9 tokens ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``;
    v2 has 11 or more: ``$JS.ACK.<domain>.<acc hash>.<stream>…`` with domain
    ``_`` meaning none. Anything else raises :class:`NotJSMessageError`.
    """
    if not reply:
        raise errors.NotJSMessageError("message has no reply subject")
    tokens = reply.split(".")
    n = len(tokens)
    if n < 9 or n == 10 or tokens[0] != "$JS" or tokens[1] != "ACK":
        raise errors.NotJSMessageError(f"not a JetStream ack subject: {reply!r}")
    if n == 9:
        domain: Optional[str] = None
        base = 2
    else:
        domain = tokens[2] if tokens[2] not in ("_", "") else None
        base = 4
    try:
        delivered, sseq, cseq, ts_ns, pending = (int(t) for t in tokens[base + 2 : base + 7])
    except ValueError:
        raise errors.NotJSMessageError(f"malformed JetStream ack subject: {reply!r}") from None
    return Metadata(
        sequence=SequencePair(consumer=cseq, stream=sseq),
        num_pending=pending,
        num_delivered=delivered,
        # Integer arithmetic: a float of nanoseconds loses microseconds.
        timestamp=_EPOCH + datetime.timedelta(microseconds=ts_ns // 1000),
        stream=tokens[base],
        consumer=tokens[base + 1],
        domain=domain,
    )


def parse_header_block(raw: bytes) -> Optional[Dict[str, str]]:
    """Headers of a ``NATS/1.0 …`` block (the status line is skipped)."""
    start = raw.find(b"\r\n")
    return _NatsClient._parse_header_lines(raw[start + 2 :]) or None if start >= 0 else None


def headers_size(headers: Optional[Dict[str, str]]) -> int:
    """Bytes of a header block as the server counts them (``NATS/1.0`` line included)."""
    if not headers:
        return 0
    return _HDR_LINE + sum(len(k) + len(v.encode()) + 4 for k, v in headers.items()) + 2


class Msg:
    """A message received from NATS, with JetStream acks.

    ``size`` is subject + reply + header bytes + payload, the quantity the
    server charges against a pull's ``max_bytes``.
    """

    __slots__ = ("subject", "reply", "data", "_headers", "_hdr_raw", "_client", "_acked", "_meta")

    def __init__(
        self,
        subject: str,
        reply: str,
        data: bytes,
        headers: Optional[Dict[str, str]] = None,
        client: Optional["Client"] = None,
        hdr_raw: Optional[bytes] = None,
    ) -> None:
        self.subject = subject
        self.reply = reply
        self.data = data
        self._headers = headers
        self._hdr_raw = hdr_raw  # the header block as received; parsed on first use
        self._client = client
        self._acked = False
        self._meta: Optional[Metadata] = None

    def __repr__(self) -> str:
        return f"<Msg subject={self.subject!r} reply={self.reply!r} data={self.data[:32]!r}{'…' if len(self.data) > 32 else ''}>"

    @property
    def headers(self) -> Optional[Dict[str, str]]:
        if self._headers is None and self._hdr_raw:
            self._headers = parse_header_block(self._hdr_raw)
        return self._headers

    @property
    def size(self) -> int:
        raw = self._hdr_raw
        hdr = len(raw) if raw is not None else headers_size(self._headers)
        return len(self.subject) + len(self.reply) + hdr + len(self.data)

    @property
    def metadata(self) -> Metadata:
        """Parsed ack-subject metadata; raises NotJSMessageError for a non-JetStream message."""
        meta = self._meta
        if meta is None:
            meta = self._meta = parse_metadata(self.reply)
        return meta

    @property
    def is_acked(self) -> bool:
        """True once a terminal ack (ack, nak, term) was sent or queued."""
        return self._acked

    # -- acks ---------------------------------------------------------------

    def ack(self) -> None:
        """Acknowledge (``+ACK``). Never blocks: queued and sent by the loop thread."""
        self._terminal(ACK)

    def nak(self, delay: Optional[float] = None) -> None:
        """Negative ack: redeliver now, or after ``delay`` seconds (``-NAK {"delay": ns}``)."""
        if delay is None:
            self._terminal(NAK)
            return
        if not isinstance(delay, (int, float)) or delay < 0:
            raise errors.InvalidOptionError(f"nak delay must be a number of seconds >= 0, got {delay!r}")
        self._terminal(NAK + b" " + json.dumps({"delay": int(delay * 1e9)}).encode())

    def in_progress(self) -> None:
        """Tell the server work is ongoing (``+WPI``), resetting AckWait. Repeatable."""
        self._check_reply()
        self._outbox().put(self.reply, WPI)

    def term(self, reason: Optional[str] = None) -> None:
        """Terminate: never redeliver (``+TERM`` or ``+TERM <reason>``)."""
        self._terminal(TERM + (b" " + reason.encode() if reason else b""))

    def ack_sync(self, timeout: float = 5.0) -> None:
        """Acknowledge and wait until the server confirms it (a "double ack").

        Raises :class:`jetstream_sync.TimeoutError` if no confirmation came in
        ``timeout`` seconds; the message then counts as not acked.
        """
        self._check_reply()
        self._check_not_acked()
        self._outbox()  # bound to a client?
        self._client.request(self.reply, ACK, timeout=timeout)  # type: ignore[union-attr]
        self._acked = True

    def _terminal(self, payload: bytes) -> None:
        # The hot path of every ack: checks inline, one call into the outbox.
        if self._acked:
            raise errors.MsgAlreadyAckedError(f"message {self.reply} was already acknowledged")
        if not self.reply:
            raise errors.NotJSMessageError("message has no reply subject to ack")
        self._outbox().put(self.reply, payload)
        self._acked = True

    def _check_reply(self) -> None:
        if not self.reply:
            raise errors.NotJSMessageError("message has no reply subject to ack")

    def _check_not_acked(self) -> None:
        if self._acked:
            raise errors.MsgAlreadyAckedError(f"message {self.reply} was already acknowledged")

    def _outbox(self) -> "AckOutbox":
        client = self._client
        if client is None:
            raise errors.NotJSMessageError("message is not bound to a client")
        return client._outbox


class AckOutbox(Batcher):
    """Publishes queued (subject, payload) pairs from the loop thread.

    Any thread may :meth:`put`. The loop is not woken per ack: queued acks go
    out when ``BATCH`` have gathered, when a thread is about to block waiting
    for messages (:meth:`kick`), on flush/close, and otherwise within
    ``DELAY`` seconds of the first one.
    """

    BATCH = 256
    DELAY = 0.005

    def __init__(self, client: "Client") -> None:
        super().__init__(client._lt)
        self._client = client
        self.errors = 0
        client._batchers.add(self)

    def __len__(self) -> int:
        return len(self._queue)

    def put(self, subject: str, payload: bytes) -> None:
        if self._client._closed:
            raise errors.ConnectionClosedError("cannot ack: the client is closed")
        self._queue.append((subject, payload))
        self.queued()

    def put_many(self, items: List[Tuple[str, bytes]]) -> None:
        """Queue several publishes and send them now (used to NAK a buffer)."""
        if items:
            self._queue.extend(items)
            self.kick()

    def _send(self, queue: Deque[Tuple[str, bytes]]) -> None:
        """Publish everything queued (loop thread)."""
        if not self._client._wire:
            self._client._lt.loop.create_task(self._publish_each()).add_done_callback(_ignore_result)
            return
        parts = []
        while queue:
            subject, payload = queue.popleft()
            parts.append(b"PUB %s %d\r\n%s\r\n" % (subject.encode(), len(payload), payload))
        if not send_raw(self._client._nc, b"".join(parts)):
            self._lost(len(parts), "the connection is closed or its reconnect buffer is full")

    async def _publish_each(self) -> None:
        nc = self._client._nc
        queue = self._queue
        while queue:
            subject, payload = queue.popleft()
            try:
                await nc.publish(subject, payload)
            except Exception as exc:
                self._lost(1, repr(exc))

    def _lost(self, count: int, why: str) -> None:
        # The server redelivers after AckWait; say so rather than drop silently.
        self.errors += count
        _log.warning("jetstream_sync: %d ack(s) not sent: %s", count, why)

    async def send_queued(self) -> None:
        if self._client._wire:
            self._send_now()
        else:
            await self._publish_each()


def _ignore_result(task: Any) -> None:
    if not task.cancelled():
        task.exception()
