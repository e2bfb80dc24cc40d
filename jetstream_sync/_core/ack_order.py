"""Acks before the next call: what makes ``msg.nak(); cons.fetch(1)`` get
the redelivery and ``msg.ack(); cons.info()`` count the ack.

A call made through ``Connection.run()`` first sends what was queued (acks,
``publish_async``). Pulls and JetStream API requests go further: the last
queued ack of each consumer is sent as a request and its reply awaited (the
server processes a consumer's acks in order, so all earlier ones are
processed too); acks sent in the last :data:`RECENT_ACKS` seconds are
settled by a round trip. Loop thread only; ``Connection.run()`` picks the
wrapper.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Coroutine, Dict, Optional, Protocol, TypeVar

from nats.aio.client import Client as _NatsClient

from .outbox import AckOutbox, is_publish, subject_str
from .logfields import log_fields


class OrderedConnection(Protocol):
    """What the ordering of acks before a call uses of the connection (which
    calls these functions: a Protocol here keeps the import pointing one way)."""

    outbox: AckOutbox

    def nats_client(self) -> _NatsClient: ...

    async def round_trip(self, timeout: float) -> bool: ...

    async def send_batched(self) -> None: ...

__all__ = ["ACK_CONFIRM_TIMEOUT", "RECENT_ACKS", "after_queued", "after_acks", "send_acks_confirmed"]

T = TypeVar("T")
_log = logging.getLogger("jetstream_sync._connection")  # the logger name users configure, kept from before the move

ACK_CONFIRM_TIMEOUT = 2.0  # at most this long for the server to confirm queued acks
RECENT_ACKS = 0.5  # acks sent this recently are settled by a round trip before a pull or API call


async def after_queued(conn: OrderedConnection, coro: Coroutine[Any, Any, T]) -> T:
    """``coro`` after what is queued was sent."""
    await conn.send_batched()
    return await coro


async def after_acks(conn: OrderedConnection, coro: Coroutine[Any, Any, T], timeout: Optional[float]) -> T:
    """``coro`` after the server processed the acks queued or sent just before
    (bounded by ``timeout`` and :data:`ACK_CONFIRM_TIMEOUT`)."""
    bound = min(timeout or ACK_CONFIRM_TIMEOUT, ACK_CONFIRM_TIMEOUT)
    outbox = conn.outbox
    if outbox.has_queued():
        await send_acks_confirmed(conn, bound)
    elif time.monotonic() - outbox.sent_at < RECENT_ACKS:
        # Sent moments ago without confirmation. A settled ack sent again
        # as a request is a no-op whose reply comes once the server has
        # processed it (and its consumer's earlier acks); otherwise a round
        # trip lets the server take them in before this call.
        last = outbox.last_sent
        if last is not None and (last[1] == b"+ACK" or last[1].startswith(b"+TERM")):
            try:
                await conn.nats_client().request(subject_str(last[0]), last[1], timeout=bound)
            except Exception as exc:
                _log.debug("ack confirmation: %r", exc, extra=log_fields())
        else:
            await conn.round_trip(bound)
    await conn.send_batched()
    return await coro


async def send_acks_confirmed(conn: OrderedConnection, timeout: float) -> None:
    """Send the queued acks; the last one of each consumer goes as a request,
    and its reply (sent once the server processed it, and so every earlier
    ack of that consumer) is awaited, bounded."""
    outbox = conn.outbox
    items = outbox.take_all()
    if not items:
        return
    last: Dict[str, int] = {}
    for i, item in enumerate(items):
        if not is_publish(item):  # core publishes queued among the acks go as they are
            last[_consumer_of(subject_str(item[0]))] = i
    confirm = set(last.values())
    plain = [item for i, item in enumerate(items) if i not in confirm]
    if plain:
        outbox.put_many(plain)
        # Sent before the requests below, in both modes: without the fast paths
        # send_now() only starts a task, and the last ack's request overtook it.
        await outbox.send_queued()
    nc = conn.nats_client()
    requests = [nc.request(subject_str(items[i][0]), bytes(items[i][1]), timeout=timeout)  # acks: bytes already
                for i in sorted(confirm)]
    for outcome in await asyncio.gather(*requests, return_exceptions=True):
        if isinstance(outcome, BaseException):
            _log.debug("ack confirmation: %r", outcome, extra=log_fields())


def _consumer_of(ack_subject: str) -> str:
    """The stream.consumer part of a ``$JS.ACK`` subject (v1 or v2)."""
    tokens = ack_subject.split(".")
    return ".".join(tokens[2:4] if len(tokens) == 9 else tokens[4:6])
