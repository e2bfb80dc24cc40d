"""Core NATS from user threads: CoreClient (publish, request, subscribe,
flush, drain, close) and Subscription. Client (``client.py``) adds the
JetStream context on top; the JetStream context refers back to this part."""

from __future__ import annotations

import collections
import inspect
import logging
import threading
from typing import (
    Any, Awaitable, Callable, Deque, Dict, Iterator, Optional, TypeVar, Union,
)

from . import errors, options
from .options import as_bytes
from ._core import NatsClient as _NatsClient
from ._core.connection import Connection, Resource
from ._core.drain import drain_and_close
from ._core.nats_errors import slow_consumer_error
from ._core.message import Msg, WireMsg
from ._core import otel
from ._core.publish import check_publish, known_subject
from .replies import Replies
from ._core.logfields import log_fields

__all__ = ["CoreClient", "Subscription"]

T = TypeVar("T")
_log = logging.getLogger("jetstream_sync.client")  # the logger name users configure, kept from before the split

# nats-py's defaults for a subscription's unread backlog.
DEFAULT_PENDING_MSGS_LIMIT = 512 * 1024
DEFAULT_PENDING_BYTES_LIMIT = 128 * 1024 * 1024


class CoreClient:
    """A NATS connection usable from any number of threads: everything of
    :class:`~jetstream_sync.Client` but its JetStream context.

    Every method blocks the calling thread only; the connection itself is
    driven by a background loop thread.
    """

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else ("connected" if self.is_connected else "disconnected")
        return f"<jetstream_sync.Client {state} {self.connected_url or ''}>".replace(" >", ">")

    # -- state ----------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self._conn.is_connected

    @property
    def is_closed(self) -> bool:
        return self._conn.is_closed

    @property
    def is_reconnecting(self) -> bool:
        return self._conn.is_reconnecting

    @property
    def is_draining(self) -> bool:
        """True from the start of :meth:`drain` until the client closed; new
        subscriptions (contexts, fetches, watches, endpoints) are refused with
        ConnectionDrainingError meanwhile."""
        return self._conn.is_draining

    @property
    def connected_url(self) -> Optional[str]:
        """The server URL connected to, without any password."""
        return self._conn.connected_url

    @property
    def max_payload(self) -> int:
        return self._conn.max_payload

    @property
    def stats(self) -> Dict[str, int]:
        """The connection's counters, a snapshot (a new dict each read), as
        nats-py defines them and the same with or without the fast paths:

        - ``out_msgs``: messages published (PUB/HPUB): core publishes,
          requests and replies, JetStream publishes and API requests, acks,
          NAKs and pull requests; ``out_bytes``: their payload bytes.
        - ``in_msgs``: messages received (MSG/HMSG) on any of the client's
          subscriptions: replies, PubAcks, consumer messages and status
          messages (heartbeats, 408/409) included; ``in_bytes``: their
          payload bytes.
        - ``reconnects``; ``errors_received``, nats-py's, which it leaves at 0;
          ``ack_errors``: acks (and core publishes sent with them) that could
          not be sent, for example while disconnected.

        Headers are not payload bytes; protocol lines (SUB, UNSUB, PING, PONG,
        INFO) are not counted. Each message is counted once, from however
        many threads.
        """
        return self._conn.stats

    @property
    def async_client(self) -> _NatsClient:
        """The underlying nats-py client; only touch it on the loop thread."""
        nc = self._conn.nc
        if nc is None:
            raise errors.ConnectionClosedError("not connected")
        return nc

    # -- calls --------------------------------------------------------------

    def publish(
        self,
        subject: str,
        data: bytes = b"",
        *,
        reply: str = "",
        headers: Optional[Dict[str, str]] = None,
        timeout: float = 5.0,
    ) -> None:
        """Publish a core NATS message (no JetStream acknowledgement).

        Returns once the message is queued, in order with this thread's
        acks and publishes and ahead of its later calls (``request()``,
        ``flush()``, JetStream calls); the loop thread writes queued messages
        in bursts. ``flush()`` confirms the server has them; ``close()`` and
        ``drain()`` send what is queued first. At most the connection's
        ``pending_size`` bytes (nats-py's option, 2 MiB by default) wait to be
        written; beyond that this call waits up to ``timeout`` seconds (5 by
        default) for room, then raises :class:`TimeoutError` and queues nothing.
        Bad arguments raise here, before anything is queued. A publish with
        a ``reply`` subject (a request made by hand) is written at once.
        """
        conn = self._conn
        outbox = conn.outbox
        if (data.__class__ is bytes and not reply and headers is None and timeout == 5.0
                and subject.__class__ is str and known_subject(subject) and len(data) <= outbox.max_payload
                and otel.active is None):
            outbox.publish_plain(subject, data)  # the common case: every check already holds
            return
        conn.check()
        payload = as_bytes(data)
        hdr = check_publish(conn, subject, payload, headers)
        if reply:
            options.subject(reply, what="reply subject")
            options.control_line(subject, reply)
        if timeout != 5.0:
            options.duration("timeout", timeout)
        # A request made by hand: its sender waits for the answer, so no batching delay.
        send = conn.outbox.publish_now if reply else conn.outbox.publish
        if (tr := otel.active) is not None:  # traced: through the headers path
            with tr.send(subject, payload, headers, conn.max_payload) as (span, hdrs, block):
                send(subject, payload, reply, hdrs, block, timeout)
            span.end()
            return
        send(subject, payload, reply, headers, hdr, timeout)

    def request(
        self,
        subject: str,
        data: bytes = b"",
        *,
        timeout: float = 1.0,
        headers: Optional[Dict[str, str]] = None,
    ) -> Msg:
        """Send a request and block up to ``timeout`` seconds for the reply.

        Raises :class:`TimeoutError` when no reply came,
        :class:`NoRespondersError` when nobody is subscribed and
        :class:`PermissionDeniedError` when the server refuses the subject.
        """
        conn = self._conn
        conn.check()
        conn.loop_thread.check_usable()  # a blocking call: never on the loop thread
        t = options.duration("timeout", timeout)
        payload = as_bytes(data)
        options.subject(subject)
        hdr = options.header_block(headers) if headers else b""
        options.control_line(subject, reply_room=conn.reply_room)
        options.payload_size(len(hdr) + len(payload), conn.max_payload)
        if (tr := otel.active) is not None:  # traced: a CLIENT span around the round trip
            with tr.send(subject, payload, headers, conn.max_payload, client=True) as (span, hdrs, block):
                msg = conn.requester(WireMsg).publish_and_wait(subject, payload, hdrs, block, t)
            span.end()
            return msg  # type: ignore[no-any-return]
        # Pipelined like publish_async: one shared reply inbox, no task per call.
        return conn.requester(WireMsg).publish_and_wait(subject, payload, headers, hdr, t)  # type: ignore[no-any-return]

    def request_many(
        self,
        subject: str,
        data: bytes = b"",
        *,
        headers: Optional[Dict[str, str]] = None,
        max_messages: Optional[int] = None,
        max_wait: float = options.DEFAULT_MAX_WAIT,
        stall: Optional[float] = None,
        sentinel: Union[None, bool, Callable[[Msg], bool]] = None,
    ) -> Replies:
        """Send one request and iterate over the replies, from any number of
        responders (scatter-gather, streamed answers), as orbit.go's
        ``natsext.RequestMany``.

        Iteration ends, without an exception, at the first bound reached:
        ``max_messages`` replies (None: no count); ``max_wait`` seconds after
        the request was sent (default 2.0, always finite); ``stall`` seconds
        without a reply once one came (None: no stall bound); a *sentinel*
        reply, which is not handed out: ``sentinel=True`` ends at a reply with
        an empty payload, a function ``sentinel(msg) -> bool`` at the first
        reply it returns True for.

        Arguments are checked before anything is sent. The result is a
        :class:`Replies` iterator and context manager; its inbox is
        unsubscribed when iteration ends, on ``close()``, on leaving
        ``with`` and on ``break``. Iterating raises
        :class:`NoRespondersError` when nobody listens on ``subject``, and
        :class:`PermissionDeniedError` as soon as the server refuses the request.
        """
        conn = self._conn
        conn.check()
        conn.loop_thread.check_usable()  # iterating blocks: never on the loop thread
        opts = options.request_many_options(max_messages, max_wait, stall, sentinel)
        payload = as_bytes(data)
        options.subject(subject)
        hdr = options.header_block(headers) if headers else b""
        options.control_line(subject, reply_room=conn.reply_room)
        options.payload_size(len(hdr) + len(payload), conn.max_payload)
        inbox = self._subscribe(self.new_inbox(), "", None, DEFAULT_PENDING_MSGS_LIMIT, DEFAULT_PENDING_BYTES_LIMIT,
                                requests_to=subject)  # a refused request ends the replies at once
        replies = Replies(inbox, opts, subject)
        try:
            self.publish(subject, payload, reply=inbox.subject, headers=headers)
        except BaseException:
            replies.close()
            raise
        return replies

    def subscribe(
        self,
        subject: str,
        queue: str = "",
        cb: Optional[Callable[[Msg], Any]] = None,
        *,
        pending_msgs_limit: int = DEFAULT_PENDING_MSGS_LIMIT,
        pending_bytes_limit: int = DEFAULT_PENDING_BYTES_LIMIT,
    ) -> "Subscription":
        """Subscribe to a core NATS subject; read with ``next_msg()`` or iterate,
        or pass ``cb``.

        ``cb(msg)`` runs on a worker thread of this subscription, one message
        at a time in order, so it may block and call this API (``msg.respond()``
        included). An exception it raises is logged with its traceback and
        passed to the connection's ``error_cb``; the next message still comes.
        ``unsubscribe()`` stops it after the current message, ``drain()``
        (the subscription's or the client's) after the messages already
        received. ``async def`` callbacks are refused: use ``run_async`` or
        nats-py for those.

        At most ``pending_msgs_limit`` messages / ``pending_bytes_limit``
        bytes wait unread (nats-py's defaults); beyond that messages are
        dropped, counted in :attr:`Subscription.dropped` and reported to the
        connection's ``error_cb`` as :class:`SlowConsumerError`.

        A subscription the server refuses (permissions) ends at once:
        ``next_msg()`` and iteration raise :class:`PermissionDeniedError`, a
        callback is no longer called (logged), and ``error_cb`` gets the error.
        """
        return self._subscribe(subject, queue, cb, pending_msgs_limit, pending_bytes_limit)

    def _subscribe(
        self, subject: str, queue: str, cb: Optional[Callable[[Msg], Any]], pending_msgs_limit: int,
        pending_bytes_limit: int, requests_to: Optional[str] = None,
    ) -> "Subscription":
        """:meth:`subscribe`; with ``requests_to`` (for a reply inbox), a
        refused publish to that subject ends the subscription as a refused
        subscription does (a refused request gets no reply, only an -ERR)."""
        conn = self._conn
        conn.check()
        options.subject(subject, wildcards=True)
        if queue:
            options.name("queue group", queue)
        options.control_line(subject, queue)  # SUB <subject> <queue> <sid>
        options.handler("cb", cb, optional=True)
        sub = Subscription(conn, subject, options.pending_limit("pending_msgs_limit", pending_msgs_limit),
                           options.pending_limit("pending_bytes_limit", pending_bytes_limit))
        conn.register(sub)
        try:
            sub._sid = conn.run(conn.subscribe(subject, sub._on_msg, queue, denied=sub._end, requests_to=requests_to), 10.0)
        except BaseException:
            conn.unregister(sub)
            raise
        if cb is not None:
            sub._start_callback(cb)
        return sub

    def run_async(self, fn: Callable[[_NatsClient], Awaitable[T]], timeout: Optional[float] = 30.0) -> T:
        """The escape hatch to nats-py: ``await fn(nats_py_client)`` on the
        loop thread and return its result, within ``timeout`` seconds (None:
        no limit; on timeout the work is cancelled and TimeoutError raised).

        For what this API lacks, e.g.
        ``nc.run_async(lambda c: c.subscribe("x", cb=on_msg))``. ``fn`` runs
        on the loop thread: it must not block, nor call this blocking API
        (that raises DeadlockError); nats-py errors are translated as
        everywhere else (the original is ``__cause__``).
        """
        conn = self._conn
        conn.check()
        t = options.optional_timeout("timeout", timeout)
        options.any_callable("fn", fn)
        nc = self.async_client

        async def call() -> T:
            result = fn(nc)
            if not inspect.isawaitable(result):
                raise errors.InvalidOptionError("fn(client) must return a coroutine (use an async def or a lambda)")
            return await result

        return conn.run(call(), t)

    def new_inbox(self) -> str:
        """A unique inbox subject (``_INBOX.<nuid>``, or the connection's inbox prefix)."""
        return self._conn.new_inbox()

    def flush(self, timeout: float = 5.0) -> None:
        """Send everything queued (acks included) and wait for the server's PONG."""
        conn = self._conn
        conn.check()
        t = options.duration("timeout", timeout)
        conn.run(conn.aflush(t), t + 1.0)

    # -- shutdown -------------------------------------------------------------

    def drain(self, timeout: float = 30.0) -> None:
        """End gracefully, then close, within ``timeout`` seconds (default 30).

        First what was received is finished, as each one's own ``drain()``
        does: services answer every request they received, subscription
        callbacks and ``consume()`` handlers handle every message that
        arrived, ``messages()`` iterators hand out their buffer (a loop over
        one ends by itself). Meanwhile the client works as usual, so a handler
        may publish or request. Then queued messages and acks are sent and
        the connection is closed. What is not finished when 80% of
        ``timeout`` has passed ends as by :meth:`close`: a service answers
        its queued requests with a 503 service error, buffered messages are
        NAK'd. Called from a handler, it does not wait for that handler. A
        ``messages()`` context that no other thread iterates holds the drain
        that long: stop it (or leave its ``with`` block) first.
        """
        drain_and_close([self._conn], options.duration("timeout", timeout))

    def close(self, timeout: float = 5.0) -> None:
        """Stop every context (unread buffers NAK'd), send queued acks and
        publishes, close the connection and stop the loop thread. Idempotent."""
        self._conn.close(options.duration("timeout", timeout))

    def __enter__(self) -> "CoreClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Subscription(Resource):
    """A core NATS subscription read from user threads.

    Any thread may read; close/drain of the client ends iteration and
    releases ``next_msg`` within moments.
    """

    def __init__(self, conn: Connection, subject: str, max_msgs: int, max_bytes: int) -> None:
        self._conn = conn
        self.subject = subject
        self._sid: Optional[int] = None
        self._max_msgs = max_msgs
        self._max_bytes = max_bytes
        # Filled by the loop thread, emptied by readers; under _cond.
        self._cond = threading.Condition(threading.Lock())
        self._items: Deque[Msg] = collections.deque()
        self._bytes = 0
        self._ended: Optional[BaseException] = None
        self._slow = False  # in a slow-consumer episode (report once per episode)
        self.dropped = 0
        self._cb_thread: Optional[threading.Thread] = None  # set once, before any message is read
        self._cb_done = threading.Event()  # the callback thread has ended

    def _start_callback(self, cb: Callable[[Msg], Any]) -> None:
        self._cb_thread = threading.Thread(
            target=self._run_callback, args=(cb,), name=f"jetstream-sync-sub-{self.subject}", daemon=True
        )
        self._cb_thread.start()

    def _run_callback(self, cb: Callable[[Msg], Any]) -> None:
        """The callback thread: one message at a time, until the subscription ends."""
        try:
            self._call_each(cb)
        finally:
            self._cb_done.set()

    def _call_each(self, cb: Callable[[Msg], Any]) -> None:
        while True:
            try:
                msg = self._take(None)
            except errors.PermissionDeniedError as exc:  # error_cb has it; say why the callback stopped
                _log.warning("subscription on %r ended: %s", self.subject, exc, extra=log_fields(subject=self.subject))
                return
            except errors.JetStreamError:
                return
            try:
                if (tr := otel.active) is None:
                    cb(msg)
                else:
                    with tr.process(msg):  # a CONSUMER span around the callback, child of the publisher's
                        cb(msg)
            except Exception as exc:
                _log.warning("subscription callback raised for %s", msg.subject, exc_info=exc,
                             extra=log_fields(subject=msg.subject))
                self._conn.report_error(exc, log=False)

    def __repr__(self) -> str:
        return f"<jetstream_sync.Subscription {self.subject!r}>"

    def _on_msg(self, subject: bytes, reply: bytes, data: bytes, hdrs: Optional[bytes]) -> None:
        """Loop thread: queue one message, within the pending limits."""
        msg = WireMsg(subject, reply, data, self._conn, hdrs)
        size = len(data)
        with self._cond:
            full = (self._max_msgs and len(self._items) >= self._max_msgs) or (
                self._max_bytes and self._bytes + size > self._max_bytes
            )
            if full:
                self.dropped += 1
                report = not self._slow
                self._slow = True
            else:
                report = False
                self._slow = False
                self._items.append(msg)
                self._bytes += size
                self._cond.notify()
        if report:
            self._conn.report_error(slow_consumer_error(self.subject), subject=self.subject)

    def next_msg(self, timeout: Optional[float] = 1.0) -> Msg:
        """The next message; raises TimeoutError after ``timeout`` seconds
        (None: no limit), PermissionDeniedError if the server refused the
        subscription and ConnectionClosedError once it ended otherwise."""
        self._conn.check_fork()
        t = options.optional_timeout("timeout", timeout)
        if self._cb_thread is not None:
            raise errors.InvalidOptionError("this subscription has a callback: its messages go to it")
        msg = self._take(t)
        if (tr := otel.active) is not None:
            tr.received(msg)  # a receive span linked to the publisher's
        return msg

    def _take(self, t: Optional[float]) -> Msg:
        with self._cond:
            if t != 0 and not self._items and self._ended is None:
                self._conn.check_wait("a message")  # the loop thread is the one that delivers it
            if not self._cond.wait_for(lambda: self._items or self._ended is not None, t):
                assert t is not None  # only a bounded wait times out
                raise self._conn.timed_out("no message within %.3fs" % t)
            if self._items:
                msg = self._items.popleft()
                self._bytes -= len(msg.data)
                return msg
            if isinstance(self._ended, errors.PermissionDeniedError):
                raise self._ended
            raise errors.ConnectionClosedError("subscription is closed") from self._ended

    def pending(self) -> int:
        """Messages received and not yet read."""
        return len(self._items)

    def __iter__(self) -> Iterator[Msg]:
        while True:
            try:
                yield self.next_msg(timeout=None)
            except errors.ConnectionClosedError:
                return

    def _end(self, error: BaseException, discard: bool = False) -> None:
        with self._cond:
            if self._ended is None:
                self._ended = error
            if discard and self._cb_thread is not None:  # a callback gets nothing more
                self._items.clear()
                self._bytes = 0
            self._cond.notify_all()

    def unsubscribe(self) -> None:
        """Remove interest; messages already received stay readable (with a
        callback: it stops after the message in hand). Idempotent, never
        waits on the loop thread; in a forked child it touches nothing."""
        if self._conn.inherited:
            return
        self._remove_interest(drain=False, timeout=5.0)
        self._end(errors.ConnectionClosedError("unsubscribed"), discard=True)

    def drain(self, timeout: float = 5.0) -> bool:
        """Remove interest once what the server already sent has arrived; a
        callback handles all of it, and this waits (up to ``timeout``) until
        it did. True when everything was handled in time."""
        t = options.duration("timeout", timeout)
        if self._conn.inherited:
            return True  # a forked child: the parent's subscription is the parent's
        thread = self._cb_thread
        self._conn.check_wait("the subscription's callback", ready=thread is None or not thread.is_alive())
        self._remove_interest(drain=True, timeout=t)
        self._end(errors.ConnectionClosedError("drained"))
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(t)
        return not thread.is_alive()

    def _remove_interest(self, drain: bool, timeout: float) -> None:
        if self._ended is not None:
            return
        self._unsubscribe(drain, timeout)
        self._conn.unregister(self)

    def _unsubscribe(self, drain: bool, timeout: float) -> None:
        conn = self._conn
        if self._sid is not None and not conn.closing and conn.loop_thread.in_loop_thread():
            conn.spawn(conn.unsubscribe(self._sid, drain=drain, timeout=timeout))  # an asyncio callback: never wait
        elif self._sid is not None and not conn.closing:
            try:
                conn.run(conn.unsubscribe(self._sid, drain=drain, timeout=timeout), timeout + 1.0)
            except errors.ConnectionClosedError:
                pass

    def drain_for_shutdown(self, timeout: float) -> Optional[threading.Event]:
        """The client drains: a callback handles what was received; readers
        keep it readable anyway (the close drains nats-py's subscriptions)."""
        thread = self._cb_thread
        if thread is None:
            return None
        if self._ended is None:
            try:
                self._unsubscribe(drain=True, timeout=timeout)
            except errors.JetStreamError as exc:  # the close still ends it
                _log.debug("draining the subscription on %r: %r", self.subject, exc, extra=log_fields(subject=self.subject))
            self._end(errors.ConnectionClosedError("drained"))
        return None if thread is threading.current_thread() else self._cb_done

    def connection_closing(self, error: BaseException) -> None:
        self._end(error, discard=True)
