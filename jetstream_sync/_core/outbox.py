"""The ack outbox: acks (and NAKs of unread buffers) queued by any thread,
published by the loop thread in bursts. One per connection."""

from __future__ import annotations

import logging
from typing import Any, Deque, Dict, List, Optional, Protocol, Sequence, Tuple, Union

from .. import errors
from .wire import Batcher


class OutboxConnection(Protocol):
    """What the outbox uses of its connection (which owns the outbox: a
    Protocol here keeps the import pointing one way)."""

    in_child: bool
    nc: Any  # nats-py's client, None before the connect

    def check_fork(self) -> None: ...

    def send_commands(self, data: bytes, msgs: int, size: int) -> bool: ...


__all__ = ["AckOutbox"]

_log = logging.getLogger("jetstream_sync._outbox")  # the logger name users configure, kept from before the move

# An ack subject as received (bytes) or as a str; both are sent alike.
Subject = Union[str, bytes]


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


class AckOutbox(Batcher):
    """Publishes queued (subject, payload) pairs from the loop thread.

    Any thread may :meth:`put`. The loop is not woken per ack: queued acks go
    out when ``BATCH`` have gathered, when a thread is about to block waiting
    for messages (:meth:`kick`), on flush/close, and otherwise within
    ``DELAY`` seconds of the first one.
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

    def _take_back(self, item: Tuple[Subject, bytes]) -> bool:
        """True if ``item`` was still queued (and is removed now); False if the
        closing sender already took it (sent, or counted as not sent)."""
        try:
            self._queue.remove(item)  # atomic under the GIL, as the sender's popleft
        except ValueError:
            return False
        return True

    def seal(self) -> None:
        """Loop thread, closing: refuse acks from now on (what is queued is sent next)."""
        self._sealed = True

    def take_all(self) -> List[Tuple[Subject, bytes]]:
        """Loop thread: everything queued, removed from the queue."""
        queue = self._queue
        items = []
        while queue:
            items.append(queue.popleft())
        return items

    def put_many(self, items: Sequence[Tuple[Subject, bytes]]) -> None:
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

    def _send(self, queue: Deque[Tuple[Subject, bytes]]) -> None:
        """Publish everything queued (loop thread, fast paths)."""
        parts = []
        tails = _TAILS
        size = 0
        while queue:
            subject, payload = queue.popleft()
            size += len(payload)
            parts.append(
                b"PUB " + (subject if isinstance(subject, bytes) else subject.encode()) + (tails.get(payload) or _tail(payload))
            )
        self.last_sent = (subject, payload)
        if not self.conn.send_commands(b"".join(parts), len(parts), size):
            self._lost(len(parts), "the connection is closed or its reconnect buffer is full")

    def drop_unsent(self) -> None:
        """After the loop stopped: count (and log) what could not be sent."""
        self._sealed = True
        left = 0
        while self._queue:
            try:
                self._queue.popleft()
            except IndexError:  # a racing put() took its item back
                break
            left += 1
        if left:
            self._lost(left, "the client closed before they could be sent")

    def _lost(self, count: int, why: str) -> None:
        # The server redelivers after AckWait; say so rather than drop silently.
        self.errors += count
        _log.warning("%d ack(s) not sent: %s", count, why)

    async def _publish_each(self) -> None:
        """Without the fast paths: nats-py's publish, one by one. Popping and
        nats-py's append to its buffer happen without a yield between them,
        so concurrent drainers keep the queue's order."""
        nc = self.conn.nc
        queue = self._queue
        while queue:
            subject, payload = queue.popleft()
            self.last_sent = (subject, payload)
            try:
                if nc is None:
                    raise errors.ConnectionClosedError("not connected")
                await nc.publish(subject_str(subject), payload)
            except Exception as exc:
                self._lost(1, repr(exc))
