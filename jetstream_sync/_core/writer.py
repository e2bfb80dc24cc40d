"""The write side of the connection: protocol lines formatted here, written
into nats-py's buffers (and how full they are), and the Batcher that sends
queued work from the loop thread in bursts."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import socket
import sys
import threading
import time
from typing import Any, Deque, Dict, Optional

from nats.aio.client import Client as _NatsClient

from .loop import gevent_patched

__all__ = [
    "Batcher",
    "SocketWriter",
    "encoded",
    "pub_command",
    "pub_line",
    "reconnect_buffer_size",
    "send_raw",
    "wait_writable",
    "write_backlog",
]


_SUBJECTS: Dict[str, bytes] = {}  # encoded subjects, for the few a program publishes to


def encoded(subject: str) -> bytes:
    """``subject`` as UTF-8, cached for the first 1024 subjects seen."""
    raw = _SUBJECTS.get(subject)
    if raw is None:
        raw = subject.encode()
        if len(_SUBJECTS) < 1024:
            _SUBJECTS[subject] = raw
    return raw


def pub_line(subject: bytes, reply: bytes, hdr: bytes, payload: bytes) -> bytes:
    """A ``PUB`` (or, with a header block, ``HPUB``) protocol line with its payload."""
    if hdr:
        size = len(hdr) + len(payload)
        if reply:
            return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, reply, len(hdr), size, hdr, payload)
        return b"HPUB %s %d %d\r\n%s%s\r\n" % (subject, len(hdr), size, hdr, payload)
    if reply:
        return b"PUB %s %s %d\r\n%s\r\n" % (subject, reply, len(payload), payload)
    return b"PUB %s %d\r\n%s\r\n" % (subject, len(payload), payload)


def pub_command(subject: str, reply: str, payload: bytes) -> bytes:
    """A ``PUB`` protocol line with its payload."""
    return pub_line(encoded(subject), reply.encode(), b"", payload)


def reconnect_buffer_size(nc: _NatsClient) -> int:
    """The connection's ``pending_size``: nats-py's reconnect buffer, and the
    bound on publishes waiting to be written."""
    return int(nc._max_pending_size)


def write_backlog(nc: _NatsClient) -> int:
    """Bytes handed to the connection and not yet written to its socket."""
    backlog = int(nc._pending_data_size)
    writer = getattr(nc._transport, "_io_writer", None)  # TCP and TLS; websockets have none
    if writer is not None:
        backlog += writer.transport.get_write_buffer_size()
    return backlog


async def wait_writable(nc: _NatsClient) -> None:
    """Return once the socket has written its backlog down (asyncio's low
    water mark); raises if the connection breaks meanwhile."""
    transport = nc._transport
    if transport is not None:
        await transport.drain()  # type: ignore[no-untyped-call]  # nats-py's transport is untyped


def send_raw(nc: _NatsClient, data: bytes, msgs: int, size: int) -> bool:
    """Loop thread: queue protocol bytes carrying ``msgs`` messages of
    ``size`` payload bytes in all for the socket, and wake nats-py's flusher.
    They are counted in nats-py's ``out_msgs``/``out_bytes``, which only the
    loop thread changes (so no update is lost).

    Returns False when they cannot be sent: the connection is closed, or it
    is reconnecting and nats-py's reconnect buffer is full.
    """
    if nc.is_closed:
        return False
    if not nc.is_connected and nc._pending_data_size + len(data) > nc._max_pending_size:
        return False
    stats = nc.stats
    stats["out_msgs"] += msgs
    stats["out_bytes"] += size
    if not nc._pending and nc.is_connected:
        # Nothing queued before it: write now, one loop iteration sooner than
        # nats-py's flusher task would (the latency of a blocking publish).
        assert nc._transport is not None  # set while connected
        nc._transport.write(data)
        return True
    nc._pending.append(data)
    nc._pending_data_size += len(data)
    if not nc.is_connected:
        return True  # nats-py sends its buffer once reconnected
    flusher = getattr(nc, "_flusher_task", None)
    if flusher is None or flusher.done():
        # No flusher (nats-py then writes inline, so do we).
        assert nc._transport is not None  # set while connected
        nc._transport.writelines(nc._pending[:])
        nc._pending = []
        nc._pending_data_size = 0
        return True
    queue = nc._flush_queue
    if queue is not None and queue.empty():
        queue.put_nowait(asyncio.get_running_loop().create_future())
    return True


class SocketWriter:
    """Lets a user thread write a protocol line straight to the socket when
    nothing waits to be written ahead of it: a blocking request or JetStream
    publish then costs no wake-up of the loop thread to send it (the loop
    still reads the reply).

    Plain TCP only. At each (re)connect the loop wraps the asyncio
    transport's ``write``/``writelines`` so that every loop-side write holds
    ``lock``. Under the lock a user thread finds the transport's buffer empty
    (all that was handed to it is in the kernel, in order) or does not write.
    What a partial send leaves is the ``_tail``, which the loop writes before
    anything else.
    """

    def __init__(self, loop_thread: Any) -> None:
        # Under gevent a user thread is a greenlet, and a patched lock taken by the
        # loop's OS thread strands it: no direct writes, and the lock is a no-op.
        self._green = "gevent" in sys.modules and gevent_patched()
        self.lock: Any = contextlib.nullcontext() if self._green else threading.RLock()  # re-entered by the loop
        self._lt = loop_thread
        self._transport: Any = None  # the wrapped transport; None: no direct writes
        self._sock: Optional[socket.socket] = None
        self._write: Any = None  # the transport's own write
        self._tail: Optional[bytes] = None
        # Messages and payload bytes user threads wrote themselves, changed only
        # under ``lock``; nats-py's counters are the loop thread's alone.
        self._direct_msgs = self._direct_bytes = 0

    @property
    def usable(self) -> bool:
        """A cheap check before building a line (the lock decides)."""
        return self._transport is not None

    def attach(self, nc: _NatsClient) -> None:
        """Loop thread, at every (re)connect: wrap the new transport."""
        if self._green:
            return
        writer = getattr(nc._transport, "_io_writer", None)  # TCP and TLS; websockets have none
        transport = writer.transport if writer is not None else None
        sock = getattr(transport, "_sock", None)  # asyncio's plain socket transport only (not TLS)
        with self.lock:
            self._transport = self._sock = self._write = None
            self._tail = None  # a tail for a dead socket: its request times out like any lost one
            if transport is None or not isinstance(sock, socket.socket):
                return
            wrapped = vars(transport).get("write")
            if not isinstance(wrapped, _LockedWrite):  # else attached before (a connect reported twice)
                wrapped = _LockedWrite(self, transport.write)
                transport.write = wrapped
                transport.writelines = lambda lines: wrapped(b"".join(lines))
            own_write = wrapped.own
            self._transport, self._sock, self._write = transport, sock, own_write

    def try_send(self, nc: _NatsClient, data: bytes, payload_size: int) -> bool:
        """User thread holding ``lock``: write ``data`` (one message whose
        payload is ``payload_size`` bytes, counted in the client's stats) now
        if nothing is waiting to be written before it; False: nothing was written."""
        transport = self._transport
        sock = self._sock
        if (transport is None or sock is None or self._tail is not None or nc._pending
                or not nc.is_connected or transport.get_write_buffer_size() or transport.is_closing()):
            return False
        try:
            sent = sock.send(data)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return False  # broken: the loop finds out when it reads, and this goes the usual way
        if sent < len(data):
            self._tail = data[sent:]
            self._lt.call_soon(self._send_tail)
        self._direct_msgs += 1
        self._direct_bytes += payload_size
        return True

    def add_direct_sends(self, stats: Dict[str, int]) -> Dict[str, int]:
        """Any thread: ``stats`` (a copy of nats-py's counters, or {} before
        the connect) with what user threads wrote themselves added."""
        if "out_msgs" in stats:
            with self.lock:
                stats["out_msgs"] += self._direct_msgs
                stats["out_bytes"] += self._direct_bytes
        return stats

    def _send_tail(self) -> None:
        with self.lock:
            tail, self._tail = self._tail, None
            if tail is not None and self._write is not None:
                self._write(tail)

    def write_through(self, own_write: Any, data: Any) -> None:
        """The loop's write to a wrapped transport: under the lock, a partial
        direct send's rest first."""
        with self.lock:
            if self._tail is not None and self._write is own_write:
                tail, self._tail = self._tail, None
                own_write(tail)
            own_write(data)


class _LockedWrite:
    """A transport's ``write``, replaced by one through its SocketWriter."""

    __slots__ = ("writer", "own")

    def __init__(self, writer: SocketWriter, own: Any) -> None:
        self.writer = writer
        self.own = own

    def __call__(self, data: Any) -> None:
        self.writer.write_through(self.own, data)


class Batcher:
    """A queue of sends that the loop thread takes in bursts.

    Callers append from any thread and call :meth:`queued`; the loop is woken
    once ``BATCH`` items wait, when someone is about to wait for the result
    (:meth:`kick`), and otherwise ``DELAY`` seconds after the first item, not
    per item. Subclasses send the whole queue in :meth:`_send` (the fast
    paths) or one by one through nats-py in :meth:`_publish_each`.
    """

    BATCH = 64
    DELAY = 0.005

    def __init__(self, conn: Any) -> None:
        self.conn = conn  # the Connection: its loop thread, and whether the fast paths are on
        self._lt = conn.loop_thread
        self._queue: Deque[Any] = collections.deque()
        self._scheduled = False  # a send is scheduled on the loop
        self._timer = False  # a delayed send is armed
        self.sent_at = 0.0  # monotonic time of the last send (loop thread)
        self._turn: Optional[asyncio.Lock] = None  # without the fast paths: one drainer at a time

    def queued(self) -> None:
        """After an append: schedule a send if one is due."""
        if self._scheduled:
            return
        if len(self._queue) >= self.BATCH:
            self.kick()
        elif not self._timer:
            self._timer = True
            self._lt.call_soon(self._arm_timer)

    def kick(self) -> None:
        """Send what is queued now, without waiting for the batch or the timer."""
        if self._queue and not self._scheduled:
            self._scheduled = True
            self._lt.call_soon(self._send_now)

    def _arm_timer(self) -> None:
        self._lt.loop.call_later(self.DELAY, self._timer_fired)

    def _timer_fired(self) -> None:
        self._timer = False
        self._send_now()

    def _send_now(self) -> None:
        # Reset first: an append after this line schedules anew.
        self._scheduled = False
        if self._queue:
            self.sent_at = time.monotonic()
            if self.conn.fast:
                # Held from taking the queue to writing it: a user thread writing
                # directly (SocketWriter) sees this queue's items either queued or sent.
                with self.conn.direct.lock:
                    self._send(self._queue)
            else:
                self._lt.loop.create_task(self._publish_in_turn())

    async def _publish_in_turn(self) -> None:
        """Without the fast paths each send is a task, and nats-py's publish
        may yield: one drainer at a time, or a later one overtakes."""
        if self._turn is None:
            self._turn = asyncio.Lock()
        async with self._turn:
            await self._publish_each()

    def _send(self, queue: Deque[Any]) -> None:
        raise NotImplementedError

    async def _publish_each(self) -> None:
        raise NotImplementedError

    def send_now(self) -> None:
        """Loop thread: send what is queued now (before a later send that must follow it)."""
        if self._queue:
            self._send_now()

    async def send_queued(self) -> None:
        """Send what is queued now, on the loop thread (flush, drain, close)."""
        if self.conn.fast:
            self._send_now()
        else:
            await self._publish_in_turn()
