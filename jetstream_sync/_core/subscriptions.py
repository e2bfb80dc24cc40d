"""The core subscriptions of one connection: sid -> nats-py subscription,
the routing of their messages to raw handlers or bulk sinks (through the
fast paths' dispatcher when they are on, else through a nats-py callback),
and the permission watch of each.

Loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any, Callable, Coroutine, Dict, Optional, Union, cast

from nats.aio.client import Client as _NatsClient

from .permissions import PermissionWatchers, Watcher
from .wire import Dispatcher, Handler, Sink, deliver_one, sid_of
from .logfields import log_fields

__all__ = ["Subscriptions", "header_block_of"]

_log = logging.getLogger("jetstream_sync._connection")  # the logger name users configure, kept from before the move


class Subscriptions:
    """The subscriptions made on ``nc``; ``dispatcher`` when the fast paths are on."""

    def __init__(
        self,
        nc: _NatsClient,
        dispatcher: Optional[Dispatcher],
        permissions: PermissionWatchers,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self._nc = nc
        self._dispatcher = dispatcher
        self._permissions = permissions
        self._spawn = spawn  # runs a coroutine in the background, referenced until done
        self._subs: Dict[int, Any] = {}  # sid -> nats-py subscription
        self._unwatch: Dict[int, Callable[[], None]] = {}  # sid -> remover of its permission watcher

    async def subscribe(
        self, subject: str, handler: Union[Handler, Sink], queue: str, limits: Optional[Dict[str, int]],
        denied: Optional[Watcher], requests_to: Optional[str] = None,
    ) -> int:
        """As :meth:`Connection.subscribe` (which gives every argument)."""
        if denied is None:
            return await self._open(subject, handler, queue, limits)
        told = denied
        sid: Optional[int] = None

        def on_denied(err: BaseException) -> None:
            if sid is not None:  # the server holds no such subscription; nats-py would resend it at reconnect
                self._spawn(self.unsubscribe(sid))
            told(err)

        removers = [self._permissions.watch(subject, on_denied, queue)]  # before the SUB is written
        if requests_to is not None:  # and before the request is: a refused one gets no reply, ever
            removers.append(self._permissions.watch(requests_to, on_denied))

        def remove() -> None:
            for remover in removers:
                remover()

        try:
            sid = await self._open(subject, handler, queue, limits)
        except BaseException:
            remove()
            raise
        self._unwatch[sid] = remove
        return sid

    async def _open(
        self, subject: str, handler: Union[Handler, Sink], queue: str, limits: Optional[Dict[str, int]]
    ) -> int:
        nc = self._nc
        lim = limits if limits is not None else {"pending_msgs_limit": 0, "pending_bytes_limit": 0}
        msgs_limit, bytes_limit = lim["pending_msgs_limit"], lim["pending_bytes_limit"]
        # A Sink is told apart by its bulk entry point (Protocols are not checked at runtime).
        sink = cast(Sink, handler) if hasattr(handler, "on_msgs") else None
        plain = cast(Handler, handler)  # used only when it is not a Sink
        if self._dispatcher is not None:
            # No callback: the dispatcher hands messages over as parsed.
            sub = await nc.subscribe(
                subject, queue=queue, pending_msgs_limit=msgs_limit, pending_bytes_limit=bytes_limit
            )
            if sink is not None:
                self._dispatcher.register_sink(sid_of(sub), sink)
            else:
                self._dispatcher.register(sid_of(sub), plain)
        else:
            deliver: Handler = partial(deliver_one, sink) if sink is not None else plain

            async def cb(m: Any) -> None:
                deliver(m.subject.encode(), m.reply.encode(), m.data, header_block_of(m))

            sub = await nc.subscribe(
                subject, queue=queue, cb=cb, pending_msgs_limit=msgs_limit, pending_bytes_limit=bytes_limit
            )
        sid = sid_of(sub)
        self._subs[sid] = sub
        return sid

    def backlog(self, sid: int) -> int:
        """Messages received for ``sid`` and not yet given to its handler
        (only without the fast paths, where nats-py queues them)."""
        sub = self._subs.get(sid)
        return sub.pending_msgs if sub is not None and self._dispatcher is None else 0

    async def unsubscribe(self, sid: int, drain: bool = False, timeout: float = 5.0) -> None:
        """As :meth:`Connection.unsubscribe`."""
        sub = self._subs.pop(sid, None)
        remove_watch = self._unwatch.pop(sid, None)
        if remove_watch is not None:
            remove_watch()
        try:
            if sub is None or self._nc.is_closed:
                return
            if drain:
                # No wait_for: its extra task would let later publishes overtake the UNSUB.
                async with asyncio.timeout(timeout):
                    await sub.drain()
            else:
                await sub.unsubscribe()
        except Exception as exc:  # connection going away: nothing more will arrive
            _log.debug("unsubscribe: %r", exc, extra=log_fields())
        finally:
            if self._dispatcher is not None:
                self._dispatcher.unregister(sid)


def header_block_of(m: Any) -> Optional[bytes]:
    """The NATS/1.0 header block of a nats-py Msg (status line included),
    for handlers that take raw headers when the fast paths are off."""
    hdrs = m.headers
    if not hdrs:
        return None
    status = hdrs.get("Status")
    first = b"NATS/1.0"
    if status:
        desc = hdrs.get("Description", "").split("\n", 1)[0].strip()
        first += b" " + status.encode() + (b" " + desc.encode() if desc else b"")
    lines = [first + b"\r\n"]
    for k, v in hdrs.items():
        if k in ("Status", "Description") and status:
            continue
        lines.append(b"%s: %s\r\n" % (k.encode(), v.encode()))
    lines.append(b"\r\n")
    return b"".join(lines)
