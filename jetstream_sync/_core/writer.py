"""The write side of the connection: protocol lines formatted here, written
into nats-py's buffers (and how full they are), and the Batcher that sends
queued work from the loop thread in bursts."""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any, Deque, Dict, Optional

from nats.aio.client import Client as _NatsClient

__all__ = [
    "Batcher",
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


def send_raw(nc: _NatsClient, data: bytes) -> bool:
    """Queue protocol bytes for the socket and wake nats-py's flusher.

    Returns False when they cannot be sent: the connection is closed, or it
    is reconnecting and nats-py's reconnect buffer is full.
    """
    if nc.is_closed:
        return False
    if not nc.is_connected and nc._pending_data_size + len(data) > nc._max_pending_size:
        return False
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
