"""Msg, JetStream ack-subject metadata, and the ack outbox.

Acks never block the user thread: :meth:`Msg.ack` appends to the
connection's ack outbox (``_outbox.py``) and the loop thread is woken once
per burst to publish everything queued. :meth:`Msg.ack_sync` is the
confirmed variant that waits for the server's reply.
"""

from __future__ import annotations

import datetime
import json
import logging
import time
from typing import TYPE_CHECKING, Dict, Optional, Tuple

from nats.aio.msg import Msg as _NatsMsg

from .. import errors, options
from .wire import built_in_place, parse_header_lines
from . import otel

if TYPE_CHECKING:  # pragma: no cover
    from .connection import Connection
    from .outbox import AckOutbox

__all__ = ["Msg", "Metadata", "SequencePair", "parse_metadata", "consumer_sequence"]

_log = logging.getLogger("jetstream_sync.message")  # the logger name users configure, kept from before the move

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
    # No empty tokens (names, numbers, domain, account hash).
    if ".." in reply or reply[-1] == ".":
        raise errors.NotJSMessageError(f"malformed JetStream ack subject: {reply!r}")
    if n == 9:
        domain: Optional[str] = None
        base = 2
    else:
        domain = tokens[2] if tokens[2] != "_" else None
        base = 4
    nums = tokens[base + 2 : base + 7]
    # Plain ASCII digits only: int() also takes signs, "_", spaces and non-ASCII digits.
    # Empty tokens were rejected above, so checking the concatenation is enough.
    digits = "".join(nums)
    if not (digits.isascii() and digits.isdigit()):
        raise errors.NotJSMessageError(f"malformed JetStream ack subject: {reply!r}")
    try:
        delivered, sseq, cseq, ts_ns, pending = map(int, nums)
        # Integer arithmetic: a float of nanoseconds loses microseconds.
        timestamp = _EPOCH + datetime.timedelta(microseconds=ts_ns // 1000)
    except (ValueError, OverflowError):  # over int()'s digit limit, or past datetime.max
        raise errors.NotJSMessageError(f"malformed JetStream ack subject: {reply!r}") from None
    return Metadata(
        sequence=SequencePair(consumer=cseq, stream=sseq),
        num_pending=pending,
        num_delivered=delivered,
        timestamp=timestamp,
        stream=tokens[base],
        consumer=tokens[base + 1],
        domain=domain,
    )


def ack_sequences(reply: bytes) -> Optional[Tuple[bytes, int, int]]:
    """(consumer name, stream sequence, consumer sequence) of a ``$JS.ACK``
    reply subject (v1 or v2) without parsing the rest; None when it is not one."""
    tokens = reply.split(b".", 9)  # v1: 9 tokens; v2: 11 or more, the rest in the last
    n = len(tokens)
    if n < 9 or tokens[1] != b"ACK":
        return None
    base = 2 if n == 9 else 4
    sseq, cseq = tokens[base + 3], tokens[base + 4]
    if not (sseq.isdigit() and cseq.isdigit()):
        return None
    return tokens[base + 1], int(sseq), int(cseq)


def consumer_sequence(reply: bytes) -> int:
    """The consumer sequence of a ``$JS.ACK`` reply subject; 0 when it has none."""
    seqs = ack_sequences(reply)
    return seqs[2] if seqs is not None else 0


def parse_header_block(raw: bytes) -> Optional[Dict[str, str]]:
    """Headers of a ``NATS/1.0 …`` block (the status line is skipped)."""
    start = raw.find(b"\r\n")
    return parse_header_lines(raw[start + 2 :]) or None if start >= 0 else None


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

    # Subject and reply are kept as received (bytes) and decoded on access:
    # most messages are only read and acked, and an ack sends the bytes.
    __slots__ = ("_subject", "_reply", "data", "_headers", "_hdr_raw", "_conn", "_acked", "_meta")

    def __init__(
        self,
        subject: str,
        reply: str,
        data: bytes,
        headers: Optional[Dict[str, str]] = None,
        conn: Optional["Connection"] = None,
        hdr_raw: Optional[bytes] = None,
    ) -> None:
        self._subject = subject.encode()
        self._reply = reply.encode()
        self.data = data
        self._headers = headers
        self._hdr_raw = hdr_raw  # the header block as received; parsed on first use
        self._conn = conn
        self._acked = False
        self._meta: Optional[Metadata] = None

    @property
    def subject(self) -> str:
        return self._subject.decode()

    @property
    def reply(self) -> str:
        return self._reply.decode()

    def __repr__(self) -> str:
        return f"<Msg subject={self.subject!r} reply={self.reply!r} data={self.data[:32]!r}{'…' if len(self.data) > 32 else ''}>"

    @property
    def headers(self) -> Optional[Dict[str, str]]:
        if self._headers is None and self._hdr_raw:
            self._headers = parse_header_block(self._hdr_raw)
        return self._headers

    @property
    def header(self) -> Optional[Dict[str, str]]:
        """The headers, by nats-py's name for them (see :attr:`headers`)."""
        return self.headers

    @property
    def size(self) -> int:
        raw = self._hdr_raw
        hdr = len(raw) if raw is not None else headers_size(self._headers)
        return len(self._subject) + len(self._reply) + hdr + len(self.data)

    @property
    def metadata(self) -> Metadata:
        """Parsed ack-subject metadata; raises NotJSMessageError for a non-JetStream message."""
        meta = self._meta
        if meta is None:
            meta = self._meta = parse_metadata(self._reply.decode())
        return meta

    @property
    def is_acked(self) -> bool:
        """True once a terminal ack (ack, nak, term) was sent or queued."""
        return self._acked

    # -- acks ---------------------------------------------------------------

    def ack(self) -> None:
        """Acknowledge (``+ACK``). Never blocks: queued and sent by the loop thread."""
        # _terminal(ACK) inlined: this runs once per message.
        if self._acked:
            raise errors.MsgAlreadyAckedError(f"message {self.reply} was already acknowledged")
        conn = self._conn
        if conn is None or not self._reply.startswith(b"$JS.ACK."):
            self._outbox()  # raises the specific error
        conn.outbox.put(self._reply, ACK)  # type: ignore[union-attr]
        self._acked = True
        if (tr := otel.active) is not None:
            tr.settled(self, False)

    def nak(self, delay: Optional[float] = None) -> None:
        """Negative ack: redeliver now, or after ``delay`` seconds (``-NAK {"delay": ns}``)."""
        if delay is None:
            self._terminal(NAK)
        else:
            d = options.duration("delay", delay, allow_zero=True)
            self._terminal(NAK + b" " + json.dumps({"delay": int(d * 1e9)}).encode())
        if self._conn is not None:  # a later fetch waits until the server took it in
            self._conn.outbox.last_nak = time.monotonic()
        if (tr := otel.active) is not None:
            tr.settled(self, True)

    def in_progress(self) -> None:
        """Tell the server work is ongoing (``+WPI``), resetting AckWait. Repeatable."""
        self._outbox().put(self._reply, WPI)

    def term(self, reason: Optional[str] = None) -> None:
        """Terminate: never redeliver (``+TERM`` or ``+TERM <reason>``)."""
        if reason is None:
            self._terminal(TERM)
            return
        conn = self._conn
        self._terminal(options.term_reason(reason, conn.max_payload if conn is not None else 1024 * 1024))

    def respond(self, data: bytes = b"", headers: Optional[Dict[str, str]] = None) -> None:
        """Publish ``data`` to this message's reply subject (a request's
        answer), as nats-py's ``msg.respond()``. Written at once (by this
        thread when the connection's socket is idle, else by the loop thread
        woken for it), after this thread's earlier publishes and acks and
        ahead of its later calls; a full buffer waits as :meth:`Client.publish`.

        Raises :class:`RespondError` without a reply subject, and for a
        JetStream message: its reply subject is the ack subject, so a
        response would ack it; use :meth:`ack` (or ``nak``/``term``).
        """
        if not self._reply:
            raise errors.RespondError(f"cannot respond to a message on {self.subject!r}: it has no reply subject")
        if self._reply.startswith(b"$JS.ACK."):
            raise errors.RespondError(
                "cannot respond to a JetStream message: its reply subject is the ack subject; use msg.ack()"
            )
        conn = self._conn
        if conn is None:
            raise errors.RespondError("cannot respond: the message is not bound to a client")
        conn.check()
        payload = options.as_bytes(data)
        reply = self.reply
        hdr = options.header_block(headers) if headers else b""
        options.control_line(reply)
        options.payload_size(len(hdr) + len(payload), conn.max_payload)
        conn.outbox.publish_now(reply, payload, "", headers, hdr, 5.0)

    def ack_sync(self, timeout: float = 5.0) -> None:
        """Acknowledge and wait until the server confirms it (a "double ack").

        Raises :class:`jetstream_sync.TimeoutError` if no confirmation came in
        ``timeout`` seconds; the message then counts as not acked.
        """
        t = options.duration("timeout", timeout)
        outbox = self._outbox()
        if self._acked:
            raise errors.MsgAlreadyAckedError(f"message {self.reply} was already acknowledged")
        conn = outbox.conn
        conn.run(conn.request(self._reply.decode(), ACK, t), t + 1.0)
        self._acked = True
        if (tr := otel.active) is not None:
            tr.settled(self, False)

    def _terminal(self, payload: bytes) -> None:
        # The hot path of every ack: checks inline, one call into the outbox.
        if self._acked:
            raise errors.MsgAlreadyAckedError(f"message {self.reply} was already acknowledged")
        conn = self._conn
        if conn is not None and self._reply.startswith(b"$JS.ACK."):
            conn.outbox.put(self._reply, payload)
        else:
            self._outbox()  # raises the specific error
        self._acked = True

    def _outbox(self) -> "AckOutbox":
        """The outbox to ack through; only JetStream messages can be acked."""
        conn = self._conn
        if conn is None:
            raise errors.NotJSMessageError("message is not bound to a client")
        if not self._reply.startswith(b"$JS.ACK."):
            raise errors.NotJSMessageError(f"not a JetStream message: reply subject {self.reply!r} is not an ack subject")
        return conn.outbox


_PIN_HEADER = b"\r\nNats-Pin-Id: "


def pin_id(msg: Msg) -> str:
    """The ``Nats-Pin-Id`` header of a message ("" if none): one search of the
    raw header block, no parsing (it runs once per socket read)."""
    raw = msg._hdr_raw
    if not raw:
        return ""
    start = raw.rfind(_PIN_HEADER)  # the server appends it last
    if start < 0:
        return ""
    start += len(_PIN_HEADER)
    end = raw.find(b"\r\n", start)
    return raw[start : end if end >= 0 else None].decode(errors="replace").strip()


def status_code(msg: Msg) -> str:
    """The status of a status message (``NATS/1.0 503`` -> "503"), "" for
    any other message: a status carries headers only, no payload."""
    raw = msg._hdr_raw
    if not raw or msg.data or not raw.startswith(b"NATS/1.0 "):
        return ""
    return raw[9:12].decode(errors="replace")


def reply_bytes(msg: Msg) -> bytes:
    """The reply (ack) subject as received, for the engine's NAKs and +WPIs."""
    return msg._reply


@built_in_place
class WireMsg(Msg):
    """A Msg made by the protocol parser: subject and reply as received.
    The C accelerator builds it without calling ``__init__``: a slot added
    here must be added to ``_speedups.c`` too (a unit test compares them)."""

    __slots__ = ()

    def __init__(
        self, subject: bytes, reply: bytes, data: bytes, conn: Optional["Connection"], hdr_raw: Optional[bytes]
    ) -> None:
        self._subject = subject
        self._reply = reply
        self.data = data
        self._hdr_raw = hdr_raw
        self._conn = conn
        self._headers = None
        self._acked = False
        self._meta = None
