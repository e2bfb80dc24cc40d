"""Fast paths through nats-py for the hot loops (loop thread only).

nats-py turns every received message into a ``Msg`` object, queues it, and
hands it to a per-subscription task; every publish validates and formats on
its own. That costs several microseconds per message. For the subscriptions
of the pull engine and for acks this module instead

- dispatches received messages straight to a plain function, with the raw
  header bytes (so ``Msg.size`` is exact) — installed by wrapping the
  client's ``_process_msg``;
- appends pre-formatted ``PUB`` commands to nats-py's outgoing buffer and
  kicks its flusher once per burst.

This module is the one place that touches nats-py's private names. The fast
paths need ``_REQUIRED`` (checked by :func:`supported`, and enabled only for
the nats-py releases in ``TESTED_VERSIONS``; otherwise the public API is
used). Besides: ``Subscription._id`` (the protocol sid), the static
``Client._parse_header_lines``, ``_flusher_task`` (read with getattr),
``_server_info`` (the TLS check, read with getattr) and, for the late-PONG
workaround, ``_process_pong``/``_pongs``/``_pongs_received``/
``_pings_outstanding`` where they exist; for the PING-order workaround
``_send_ping``/``_pending``/``_pending_data_size``/``_transport``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Callable, Dict, List, Optional, Protocol, TypeVar

from nats.aio.client import Client as _NatsClient
from nats.errors import ProtocolError
from nats.protocol.parser import AWAITING_CONTROL_LINE, Parser

from .logfields import log_fields

__all__ = [
    "supported",
    "Dispatcher",
    "Sink",
    "deliver_one",
    "is_status",
    "FastParser",
    "sid_of",
    "fix_late_pong",
    "subscription_matches",
    "fix_ping_order",
    "parse_header_lines",
    "REPLY_INBOX",
    "server_info",
    "load_speedups",
    "built_in_place",
]

_log = logging.getLogger("jetstream_sync._wire")  # the logger name users configure, kept from before the move
_T = TypeVar("_T", bound=type)

# handler(subject: bytes, reply: bytes, data: bytes, headers: Optional[bytes])
Handler = Callable[[bytes, bytes, bytes, Optional[bytes]], None]


class Sink(Protocol):
    """Where the parser puts the messages of one subscription in bulk: every
    message of a socket read at once, made by ``make`` (no call per message)."""

    @property
    def conn(self) -> Any: ...  # passed to make

    def make(self, subject: bytes, reply: bytes, data: bytes, conn: Any, hdr_raw: Optional[bytes]) -> Any: ...

    def on_msgs(self, msgs: List[Any]) -> None: ...

    def on_status(self, hdr_raw: bytes) -> None: ...


def is_status(reply: bytes, data: bytes, hdrs: Optional[bytes]) -> bool:
    """A status message (heartbeat, 404, 408, 409 …): headers only, no reply."""
    return hdrs is not None and not reply and not data and hdrs.startswith(b"NATS/1.0 ")


def deliver_one(sink: Sink, subject: bytes, reply: bytes, data: bytes, hdrs: Optional[bytes]) -> None:
    """One message to a sink (paths other than the bulk parser)."""
    if is_status(reply, data, hdrs):
        assert hdrs is not None
        sink.on_status(hdrs)
    else:
        sink.on_msgs([sink.make(subject, reply, data, sink.conn, hdrs)])

# The nats-py private names the fast paths use; all must exist, else the
# public nats-py API is used instead (see supported()).
_REQUIRED = (
    "_ps",
    "_process_msg",
    "_process_ping",
    "_process_pong",
    "_pending",
    "_pending_data_size",
    "_flush_queue",
    "_max_pending_size",
    "_transport",
    "stats",
)
# nats-py releases the fast paths were tested with (nats-py's own version string).
TESTED_VERSIONS = ("2.16.",)


def _nats_version() -> str:
    try:
        from nats.aio.client import __version__ as version
    except ImportError:  # pragma: no cover
        return ""
    return str(version)


def supported(nc: _NatsClient) -> bool:
    """True when this nats-py is a tested release and has every internal used."""
    return _nats_version().startswith(TESTED_VERSIONS) and all(hasattr(nc, name) for name in _REQUIRED)


def sid_of(sub: Any) -> int:
    """The protocol id of a nats-py subscription."""
    return int(sub._id)


class _Done:
    """An awaitable that is already complete (cheaper than a coroutine)."""

    __slots__ = ()

    def __await__(self) -> Any:
        return iter(())


_DONE = _Done()


SPEEDUPS_ENV = "JETSTREAM_SYNC_SPEEDUPS"


def load_speedups() -> Any:
    """The C accelerator (``_speedups.c``), or None: not built, or turned off
    with JETSTREAM_SYNC_SPEEDUPS=0. Looked up by each parser and publisher."""
    if os.environ.get(SPEEDUPS_ENV, "1") == "0":
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    return _speedups


_built_in_place: Optional[type] = None


def built_in_place(cls: _T) -> _T:
    """Class decorator: the accelerator may build instances of ``cls`` (a
    sink's ``make``) without running ``__init__``, setting its slots as
    WireMsg's ``__init__`` does (``_speedups.c`` names them)."""
    global _built_in_place
    _built_in_place = cls
    return cls


def _handler_failed(exc: BaseException) -> None:
    _log.error("message handler failed", exc_info=exc, extra=log_fields())


_MAX_CONTROL = 4096  # a bound for finding a control line's end (longer ones are still found)
_SPLIT_BELOW = 4096  # payload size below which a read is split at once


class FastParser(Parser):
    """nats-py's protocol parser with a fast path for MSG and HMSG.

    Small messages: one bytes copy of the read, split on CRLF once. Large
    ones (the read's first payload is 4 KiB or more): control lines found one
    by one, each payload copied once out of the buffer. No regular expression,
    no per-message buffer edits either way. Messages of a sink's
    subscription are made and collected per read and handed over in one call
    (statuses in order between them); other registered handlers are called
    per message. Anything else (INFO, -ERR, +OK) and any state left by the
    generic parser goes to nats-py's parser as is.
    """

    def __init__(self, nc: _NatsClient, handlers: Dict[int, Handler], sinks: Dict[int, Sink]) -> None:
        super().__init__(nc)
        self._handlers = handlers
        self._sinks = sinks
        speedups = load_speedups()
        self._scan = speedups.scan if speedups is not None else None
        # Bytes the buffer must hold before a message split over reads is
        # complete: until then a read is only appended, so a large message
        # costs one copy, not one copy of the whole buffer per read.
        self._need = 0

    def reset(self) -> None:
        super().reset()
        self._need = 0

    async def parse(self, data: bytes = b"") -> None:
        # Long: the hot loop over each message of a read, kept flat: a helper call per message would slow the parser.
        if self.state != AWAITING_CONTROL_LINE:
            await super().parse(data)
            return
        buf = self.buf
        buf.extend(data)
        if len(buf) < self._need:
            return
        self._need = 0
        n = len(buf)
        find = buf.find
        i = pos = 0
        # Small messages: one split per read, a control line is one piece and
        # a payload without CRLF (the usual case) is exactly the next one; else
        # the payload is sliced from b and its pieces skipped. Large ones: the
        # split would scan every payload byte (~1 ns each), so control lines
        # are found one by one with a bounded search instead.
        scan = self._scan
        if scan is None:
            first = buf[: max(find(b"\r\n", 0, _MAX_CONTROL), 0)]
            size0 = first[first.rfind(b" ") + 1 :]  # the first message's size
            split = size0.isdigit() and int(size0) < _SPLIT_BELOW
        else:
            split = False  # the accelerator reads the buffer in place; Python takes what it leaves
        # Small messages work on one bytes copy of the read; large ones slice
        # each payload straight out of the buffer (one copy, not two).
        b: Any = bytes(buf) if split else memoryview(buf)
        lines = b.split(b"\r\n") if split else []
        last = len(lines) - 1 if split else 1 << 62  # lines[last] is what follows the last CRLF
        handlers, sinks = self._handlers, self._sinks
        nc = self.nc
        count = size_in = 0
        batches: Dict[Sink, List[Any]] = {}
        cur_sid = b""
        sink: Optional[Sink] = None
        batch: List[Any] = []
        make: Any = None
        conn: Any = None
        handler: Optional[Handler] = None
        try:
            while i < last and pos < n:
                if scan is not None:
                    pos, scanned, scanned_size = scan(buf, pos, sinks, handlers, batches, _built_in_place, _handler_failed)
                    count += scanned
                    size_in += scanned_size
                    if pos >= n:
                        break
                    cur_sid = b""  # its batches may be new lists
                if split:
                    line = lines[i]
                else:
                    eol = find(b"\r\n", pos, pos + _MAX_CONTROL)
                    if eol < 0:
                        eol = find(b"\r\n", pos)  # a longer line than any server sends by default
                        if eol < 0:
                            break
                    line = bytes(b[pos:eol])
                args = line.split()
                nargs = len(args)
                if nargs == 5 and args[0] == b"MSG":
                    _, subject, sid, reply, size = args
                    hsize = 0
                elif nargs == 4 and args[0] == b"MSG":
                    _, subject, sid, size = args
                    reply = b""
                    hsize = 0
                elif nargs == 6 and args[0] == b"HMSG":
                    _, subject, sid, reply, hdr, size = args
                    hsize = int(hdr)
                elif nargs == 5 and args[0] == b"HMSG":
                    _, subject, sid, hdr, size = args
                    reply = b""
                    hsize = int(hdr)
                elif line == b"PING" or line == b"PONG":
                    i += 1
                    pos += 6
                    self._hand_over(batches)  # what came before it is delivered before it
                    cur_sid = b""
                    await (nc._process_ping() if line == b"PING" else nc._process_pong())
                    continue
                elif nargs and (args[0] == b"MSG" or args[0] == b"HMSG"):
                    raise ProtocolError("nats: malformed " + args[0].decode())
                else:
                    break  # INFO, -ERR, +OK: the generic parser takes it
                start = pos + len(line) + 2
                size = int(size)
                end = start + size
                if end + 2 > n:
                    self._need = end + 2 - pos  # after the consumed prefix is dropped below
                    break  # incomplete: the control line is parsed again with more bytes
                if not split:
                    payload = bytes(b[start:end])
                elif hsize or len(lines[i + 1]) != size:
                    payload = b[start:end]
                    i += 2 + payload.count(b"\r\n")  # the pieces the CRLFs in it made
                else:
                    payload = lines[i + 1]
                    i += 2
                pos = end + 2
                count += 1
                size_in += size - hsize  # payload bytes, as nats-py counts them
                if sid != cur_sid:
                    cur_sid = sid
                    isid = int(sid)
                    sink = sinks.get(isid)
                    if sink is not None:
                        batch = batches.get(sink)  # type: ignore[assignment]
                        if batch is None:
                            batch = batches[sink] = []
                        make, conn = sink.make, sink.conn
                    else:
                        handler = handlers.get(isid)
                if sink is not None:
                    if not hsize:
                        batch.append(make(subject, reply, payload, conn, None))
                    elif reply or size > hsize or not payload.startswith(b"NATS/1.0 "):  # not is_status(), inline
                        batch.append(make(subject, reply, payload[hsize:], conn, payload[:hsize]))
                    else:  # a status: after the messages before it
                        self._hand_over(batches)
                        cur_sid = b""
                        try:
                            sink.on_status(payload)
                        except Exception:  # never let a sink end the read loop
                            _log.exception("status handler failed", extra=log_fields())
                    continue
                if hsize:
                    headers: Optional[bytes] = payload[:hsize]
                    payload = payload[hsize:]
                else:
                    headers = None
                if handler is None:  # nats-py's own subscription: it counts the message itself
                    count -= 1
                    size_in -= size - hsize
                    await nc._process_msg(isid, subject, reply, payload, headers)
                    cur_sid = b""  # it may have (un)registered sids
                    continue
                try:
                    handler(subject, reply, payload, headers)
                except Exception:  # never let a handler end the read loop
                    _log.exception("message handler failed", extra=log_fields())
        finally:
            self._hand_over(batches)
            if not split:
                b.release()  # the buffer can be resized again
        del buf[:pos]
        if count:
            nc.stats["in_msgs"] += count
            nc.stats["in_bytes"] += size_in
        if buf and not buf.startswith((b"MSG ", b"HMSG ")):
            await super().parse()

    @staticmethod
    def _hand_over(batches: Dict[Sink, List[Any]]) -> None:
        for sink, msgs in batches.items():
            if msgs:
                batches[sink] = []
                try:
                    sink.on_msgs(msgs)
                except Exception:  # never let a sink end the read loop
                    _log.exception("message handler failed", extra=log_fields())


def fix_late_pong(nc: _NatsClient) -> bool:
    """Work around a nats-py bug, with or without the fast paths: a flush that
    timed out leaves a cancelled future, and the late PONG then fails
    nats-py's read loop (InvalidStateError), dropping the connection. The
    replacement consumes that PONG quietly. Applied only where the names exist."""
    if not all(hasattr(nc, name) for name in ("_process_pong", "_pongs", "_pongs_received", "_pings_outstanding")):
        return False

    async def process_pong() -> None:
        if nc._pongs:
            future = nc._pongs.pop(0)
            if not future.done():
                future.set_result(True)
            nc._pongs_received += 1
            nc._pings_outstanding = 0

    nc._process_pong = process_pong  # type: ignore[method-assign]
    return True


def fix_ping_order(nc: _NatsClient) -> bool:
    """Work around a nats-py bug, with or without the fast paths: its PING
    (``flush()``, ``Subscription.drain()``) is written to the socket at once,
    ahead of the commands still queued for its flusher task. Its PONG then
    says nothing about them: ``Subscription.drain()`` sends ``PING`` before
    its own ``UNSUB``, removes the subscription on the PONG, and drops what
    the server sent until it processed the UNSUB (an open pull's messages,
    which then wait out AckWait). The replacement writes the queue first.
    Applied only where the names exist."""
    if not all(hasattr(nc, name) for name in ("_send_ping", "_pending", "_pending_data_size", "_transport")):
        return False
    send_ping = nc._send_ping

    async def send_ping_after_queued(future: Optional["asyncio.Future[Any]"] = None) -> None:
        # Only while connected: during a reconnect the queue waits for the new
        # connection's CONNECT (nats-py sends it once connected).
        if nc._pending and nc.is_connected and nc._transport is not None:
            nc._transport.writelines(nc._pending[:])
            nc._pending = []
            nc._pending_data_size = 0
        await send_ping(future)

    nc._send_ping = send_ping_after_queued  # type: ignore[method-assign]
    return True


class Dispatcher:
    """Routes messages of registered subscription ids straight to plain
    handlers or bulk sinks; everything else goes to nats-py as before."""

    def __init__(self, nc: _NatsClient) -> None:
        self._handlers: Dict[int, Handler] = {}
        self._sinks: Dict[int, Sink] = {}
        self.enabled = supported(nc)
        if self.enabled:
            nc._ps = FastParser(nc, self._handlers, self._sinks)
            # The generic parser (after an INFO, say) must reach our handlers too.
            self._fallback = nc._process_msg
            nc._process_msg = self._process_msg  # type: ignore[method-assign]

    def _process_msg(self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: Optional[bytes]) -> Any:
        sink = self._sinks.get(sid)
        if sink is not None:
            deliver_one(sink, subject, reply, data, headers)
            return _DONE
        handler = self._handlers.get(sid)
        if handler is None:
            # nats-py annotates headers as bytes, yet its parser passes None without them.
            return self._fallback(sid, subject, reply, data, headers)  # type: ignore[arg-type]
        handler(subject, reply, data, headers)
        return _DONE

    def register(self, sid: int, handler: Handler) -> None:
        self._handlers[sid] = handler

    def register_sink(self, sid: int, sink: Sink) -> None:
        self._sinks[sid] = sink

    def unregister(self, sid: int) -> None:
        self._handlers.pop(sid, None)
        self._sinks.pop(sid, None)


# -- the boundary with nats-py: subjects, headers, INFO -----------------------------


REPLY_INBOX = "\0reply-inbox"  # watch key: a denied subscription on the request inbox (lower case)


def subscription_matches(pattern: str, subject: str) -> bool:
    """True when subscription ``pattern`` covers ``subject`` (or is the request inbox)."""
    if subject == REPLY_INBOX:
        return pattern.lower().startswith("_inbox.")
    p, s = pattern.split("."), subject.split(".")
    for i, tok in enumerate(p):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(p) == len(s)


def parse_header_lines(raw: bytes) -> Dict[str, str]:
    """``Name: Value`` lines of a header block (after its status line), by nats-py's parser."""
    return _NatsClient._parse_header_lines(raw)


def server_info(nc: _NatsClient) -> Optional[Dict[str, Any]]:
    """The server's INFO as nats-py keeps it, or None where it cannot be read."""
    info = getattr(nc, "_server_info", None)
    return info if isinstance(info, dict) else None
