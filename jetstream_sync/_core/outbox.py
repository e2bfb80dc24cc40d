"""The outbox: acks (and NAKs of unread buffers) and core publishes queued by
any thread, published by the loop thread in bursts. One per connection: one
queue, so a thread's acks and publishes leave in the order it made them."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, Deque, Dict, List, Optional, Protocol, Sequence, Tuple, Union

from .. import errors
from .logfields import log_fields
from .wire import load_speedups
from .writer import (
    Batcher, SocketWriter, encoded, pub_line, reconnect_buffer_size, wait_writable, write_backlog,
)


class OutboxConnection(Protocol):
    """What the outbox uses of its connection (which owns the outbox: a
    Protocol here keeps the import pointing one way)."""

    in_child: bool
    fast: bool  # the fast paths through nats-py internals are on
    direct: SocketWriter
    nc: Any  # nats-py's client, None before the connect

    def check_fork(self) -> None: ...

    def send_commands(self, data: bytes, msgs: int, size: int) -> bool: ...

    def spawn(self, coro: Any) -> None: ...


__all__ = ["AckOutbox", "is_publish"]

_log = logging.getLogger("jetstream_sync._outbox")  # the logger name users configure, kept from before the move

# An ack subject as received (bytes) or as a str; both are sent alike.
Subject = Union[str, bytes]
# A queued item: an ack is (subject, payload bytes). A core publish is
# (command, int): with the fast paths its PUB/HPUB line and payload bytes (the
# line's length is its share of pending_size); without them nats-py's
# arguments and that share, about the bytes of its protocol line.
Item = Tuple[Any, Union[bytes, int]]

DEFAULT_PENDING_SIZE = 2 * 1024 * 1024  # nats-py's pending_size default, until connected


def is_publish(item: Item) -> bool:
    return item[1].__class__ is int


def subject_str(subject: Subject) -> str:
    return subject.decode() if isinstance(subject, bytes) else subject


_TAILS: Dict[bytes, bytes] = {}  # payload -> b" <len>\r\n<payload>\r\n" for the few ack payloads


def _tail(payload: bytes) -> bytes:
    tail = _TAILS.get(payload)
    if tail is None:
        tail = b" %d\r\n%s\r\n" % (len(payload), payload)
        if len(_TAILS) < 64:
            _TAILS[payload] = tail
    return tail


def ack_batch(queue: Deque[Item]) -> Tuple[bytes, int, int, int, Optional[Tuple[Subject, bytes]]]:
    """Everything on ``queue``, in order, as one bytes object of commands:
    ``(commands, count, size, published, last)`` as ``_speedups.ack_batch``
    makes it (its comment says what each is); this is the same without the
    accelerator."""
    parts = []
    tails = _TAILS
    size = published = 0
    last = None
    while queue:
        item = queue.popleft()
        subject, payload = item
        if payload.__class__ is int:  # a core publish, formatted by its caller
            parts.append(subject)
            published += len(subject)  # its share of pending_size
            size += payload
            continue
        size += len(payload)  # type: ignore[arg-type]
        parts.append(
            b"PUB " + (subject if isinstance(subject, bytes) else subject.encode()) + (tails.get(payload) or _tail(payload))  # type: ignore[arg-type]
        )
        last = item
    return b"".join(parts), len(parts), size, published, last  # type: ignore[return-value]


class AckOutbox(Batcher):
    """Publishes queued acks and core publishes from the loop thread.

    Any thread may :meth:`put` an ack or :meth:`put_publish` a publish. The
    loop is not woken per item: they go out when ``BATCH`` have gathered,
    when a thread is about to block waiting for messages (:meth:`kick`), on
    flush/close and before any other call, and otherwise within ``DELAY``
    seconds of the first one.

    Publishes are bounded: a publisher waits for room while the publishes
    queued here plus what the connection has not yet written (the socket's
    backlog, or nats-py's reconnect buffer while reconnecting) reach the
    connection's ``pending_size``. The loop itself never holds anything back,
    so nothing can overtake what was queued before it.
    """

    BATCH = 256
    DELAY = 0.005

    def __init__(self, conn: OutboxConnection) -> None:
        super().__init__(conn)
        self.errors = 0
        # Set by close() before its last send: later acks are refused. put()
        # looks again after its append (see there), so none is left behind.
        self._sealed = False
        self.last_nak = 0.0  # monotonic time of the last nak() (any thread)
        # The last ack sent (loop thread): a settled ack (+ACK, +TERM) can be
        # sent again as a request, a no-op whose reply proves it was processed.
        self.last_sent: Optional[Tuple[Subject, bytes]] = None
        # Bytes of publishes queued here; waits for room, and the loop's
        # sends, meet on this condition.
        self._room_lock = threading.Lock()  # entered directly on the hot path (C-level, unlike the Condition)
        self._room = threading.Condition(self._room_lock)
        self.pub_bytes = 0
        self.limit = DEFAULT_PENDING_SIZE
        self.publish_errors = 0
        self.max_payload = 1024 * 1024  # the server's, once connected
        self.backlog = 0  # bytes the connection had not written at the last look (loop thread writes)
        self._watching = False  # loop thread: a task waits for the socket to write its backlog down
        speedups = load_speedups()
        # getattr: a build of the accelerator older than ack_batch still loads.
        self._ack_batch = getattr(speedups, "ack_batch", ack_batch)

    def connected(self, nc: Any) -> None:
        """Loop thread, on every (re)connect: the bound, the socket user
        threads may write to, and what nats-py buffered while reconnecting
        is being written now."""
        if self.conn.fast:
            self.conn.direct.attach(nc)
        self.limit = reconnect_buffer_size(nc)
        self.max_payload = int(nc.max_payload)  # this server's; read by publish_plain without a property call
        self.send_now()
        self._look_at_backlog(nc)

    def _look_at_backlog(self, nc: Any) -> None:
        """Loop thread, after a send: note the connection's unwritten bytes;
        past half the bound, watch them drain so waiting publishers wake."""
        self.backlog = backlog = write_backlog(nc)
        if backlog > self.limit // 2 and not self._watching and nc.is_connected:
            self._watching = True
            self.conn.spawn(self._watch_backlog(nc))

    async def _watch_backlog(self, nc: Any) -> None:
        try:
            while nc.is_connected and write_backlog(nc) > self.limit // 2:
                await wait_writable(nc)  # the socket's buffer below asyncio's low-water mark
                await asyncio.sleep(0.001)  # and nats-py's flusher had its turn
        except Exception as exc:  # the connection broke: connected() looks again
            _log.debug("waiting for the socket: %r", exc, extra=log_fields())
        finally:
            self._watching = False
            self.backlog = write_backlog(nc)
            with self._room:
                self._room.notify_all()

    def __len__(self) -> int:
        return len(self._queue)

    def has_queued(self) -> bool:
        return bool(self._queue)

    def put(self, subject: Subject, payload: bytes) -> None:
        if self.conn.in_child:
            self.conn.check_fork()
        if self._sealed:
            raise errors.ConnectionClosedError("cannot ack: the client is closed")
        item = (subject, payload)
        queue = self._queue
        queue.append(item)
        if self._sealed and self._take_back(item):
            # Sealed between the check and the append, and close() had not
            # taken it yet: refuse it rather than leave it unsent.
            raise errors.ConnectionClosedError("cannot ack: the client is closed")
        if not self._scheduled and (not self._timer or len(queue) >= self.BATCH):
            self.queued()  # else a send is already due: nothing to schedule

    def publish(
        self, subject: str, payload: bytes, reply: str, headers: Optional[Dict[str, str]], hdr: bytes, timeout: float
    ) -> None:
        """Calling thread: queue one core publish, checked by the caller
        (``hdr``: its header block, b"" if none)."""
        if self.conn.fast:  # formatted here, so the loop only joins the lines
            command: Any = pub_line(encoded(subject), reply.encode() if reply else b"", hdr, payload)
            self.put_publish(command, len(command), len(payload), timeout)
        else:
            command = (subject, payload, reply, headers)
            size = len(hdr) + len(payload) + len(subject) + len(reply) + 32  # about its protocol line
            self.put_publish(command, size, size, timeout)

    def publish_now(
        self, subject: str, payload: bytes, reply: str, headers: Optional[Dict[str, str]], hdr: bytes, timeout: float
    ) -> None:
        """Calling thread: ``publish()`` of a message someone waits for (a
        reply, a request made by hand), so not held for a batch: written by
        this thread when the socket is idle and nothing is queued before it,
        else queued with the loop woken at once."""
        conn = self.conn
        if conn.fast:
            # Not encoded()'s cache: reply subjects are inboxes, each seen once.
            line = pub_line(subject.encode(), reply.encode(), hdr, payload)
            direct, nc = conn.direct, conn.nc
            if direct.usable and nc is not None:
                with direct.lock:
                    if not self._queue and direct.try_send(nc, line, len(payload)):
                        return
            self.put_publish(line, len(line), len(payload), timeout)
        else:
            self.publish(subject, payload, reply, headers, hdr, timeout)
        self.kick()

    def publish_plain(self, subject: str, payload: bytes) -> None:
        """Calling thread: ``publish()``'s common case, a subject checked
        before, bytes within ``max_payload``, no reply, no headers, the
        default wait for room (5 s)."""
        if self.conn.fast:
            command = b"PUB %s %d\r\n%s\r\n" % (encoded(subject), len(payload), payload)
            self.put_publish(command, len(command), len(payload), 5.0)
        else:  # not a hot path: the general one serves
            self.publish(subject, payload, "", None, b"", 5.0)

    def put_publish(self, command: Any, size: int, kept: int, timeout: float) -> None:
        """Queue one core publish of ``size`` bytes on the wire (checked by
        the caller), waiting up to ``timeout`` seconds for room when
        ``pending_size`` bytes of publishes are already waiting. ``kept`` is
        the int queued with it (see Item): its payload bytes with the fast
        paths, else ``size``."""
        if self.conn.in_child:
            self.conn.check_fork()
        queue = self._queue
        with self._room_lock:
            if self.pub_bytes + self.backlog + size > self.limit and (self.pub_bytes or self.backlog):
                self._wait_for_room(size, timeout)
            if self._sealed:
                raise errors.ConnectionClosedError("cannot publish: the client is closed")
            self.pub_bytes += size
            queue.append((command, kept))
        if not self._scheduled and (not self._timer or len(queue) >= self.BATCH):
            self.queued()

    def _wait_for_room(self, size: int, timeout: float) -> None:
        """Calling thread, holding the room lock."""
        if self._lt.in_loop_thread():  # only the loop makes room: waiting there would never end
            raise errors.DeadlockError(
                f"publish from the client's event-loop thread while {self.pub_bytes} bytes of publishes wait"
                " to be sent would deadlock"
            )
        self.kick()
        deadline = time.monotonic() + timeout
        while (self.pub_bytes or self.backlog) and self.pub_bytes + self.backlog + size > self.limit:
            if self._sealed:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.TimeoutError(
                    f"publish not queued: {self.pub_bytes + self.backlog} bytes have waited to be written for"
                    f" {timeout}s (pending_size {self.limit}); the server is not reading them or the client"
                    " is reconnecting"
                )
            self._room.wait(min(left, 0.05))  # nats-py's flusher also makes room, unannounced

    def _released(self, size: int) -> None:
        """Loop thread: ``size`` bytes of publishes left the queue."""
        with self._room:
            self.pub_bytes -= size
            self._room.notify_all()

    def _take_back(self, item: Tuple[Subject, bytes]) -> bool:
        """True if ``item`` was still queued (and is removed now); False if the
        closing sender already took it (sent, or counted as not sent)."""
        try:
            self._queue.remove(item)  # atomic under the GIL, as the sender's popleft
        except ValueError:
            return False
        return True

    def seal(self) -> None:
        """Loop thread, closing: refuse acks and publishes from now on (what
        is queued is sent next, held back no more)."""
        with self._room:
            self._sealed = True
            self._room.notify_all()

    def take_all(self) -> List[Item]:
        """Loop thread: everything queued, removed from the queue."""
        queue = self._queue
        items = []
        while queue:
            items.append(queue.popleft())
        return items

    def put_many(self, items: Sequence[Item]) -> None:
        """Queue several publishes and send them now (used to NAK a buffer)."""
        if items:
            if self._sealed:
                self._lost(len(items), "the client is closed")
                return
            self._queue.extend(items)  # a NAK left behind by a racing close only waits out AckWait
            try:
                self.kick()
            except errors.JetStreamError:
                pass  # no loop any more: close() sends or counts what is queued

    def _send(self, queue: Deque[Item]) -> None:
        """Publish everything queued (loop thread, fast paths)."""
        nc = self.conn.nc
        commands, count, size, published, last = self._ack_batch(queue)
        if last is not None:
            self.last_sent = last
        if not self.conn.send_commands(commands, count, size):
            self._lost(count, "the connection is closed or its reconnect buffer is full")
        if published:
            self._released(published)
            if nc is not None:
                self._look_at_backlog(nc)

    def drop_unsent(self) -> None:
        """After the loop stopped: count (and log) what could not be sent."""
        self._sealed = True
        left = published = 0
        while self._queue:
            try:
                item = self._queue.popleft()
            except IndexError:  # a racing put() took its item back
                break
            if is_publish(item):
                published += 1
            else:
                left += 1
        if left:
            self._lost(left, "the client closed before they could be sent")
        if published:
            self.publish_errors += published
            _log.error("%d publish(es) not sent: the client closed before they could be sent", published,
                       extra=log_fields())
        with self._room:
            self.pub_bytes = 0
            self._room.notify_all()

    def _lost(self, count: int, why: str) -> None:
        # The server redelivers after AckWait; say so rather than drop silently.
        self.errors += count
        _log.warning("%d ack(s) or publish(es) not sent: %s", count, why, extra=log_fields())

    async def _publish_each(self) -> None:
        """Without the fast paths: nats-py's publish, one by one. Popping and
        nats-py's append to its buffer happen without a yield between them,
        so concurrent drainers keep the queue's order."""
        nc = self.conn.nc
        queue = self._queue
        while queue:
            item = queue.popleft()
            subject, payload = item
            try:
                if nc is None:
                    raise errors.ConnectionClosedError("not connected")
                if payload.__class__ is int:
                    self._released(payload)
                    await nc.publish(*subject)
                else:
                    self.last_sent = item
                    await nc.publish(subject_str(subject), payload)
            except Exception as exc:
                self._lost(1, repr(exc))
        if nc is not None:
            self._look_at_backlog(nc)
