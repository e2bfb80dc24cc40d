"""connect() and Client: the public face of one connection core."""

from __future__ import annotations

import collections
import threading
from typing import TYPE_CHECKING, Any, Deque, Dict, Iterator, List, Optional, Union

from nats.aio.client import Client as _NatsClient

from . import errors, options
from ._connection import Connection, Resource
from .message import Msg, WireMsg

if TYPE_CHECKING:  # pragma: no cover
    from .jetstream import JetStream

__all__ = ["connect", "Client", "Subscription"]

# nats-py's defaults for a subscription's unread backlog.
DEFAULT_PENDING_MSGS_LIMIT = 512 * 1024
DEFAULT_PENDING_BYTES_LIMIT = 128 * 1024 * 1024


def connect(servers: Union[str, List[str]] = "nats://127.0.0.1:4222", **options: Any) -> "Client":
    """Connect to NATS and return a :class:`Client`.

    Every nats-py ``connect`` option passes through (``name``, ``user``,
    ``password``, ``token``, ``tls``, ``user_credentials``, ``nkeys_seed``,
    ``max_reconnect_attempts``, ``reconnect_time_wait``, ``connect_timeout``
    …). Callbacks (``error_cb``, ``disconnected_cb``, ``reconnected_cb``,
    ``closed_cb``, ``discovered_server_cb``) may be plain functions — they run
    on a dedicated callback thread, so they may call this API — or coroutine
    functions, which run on the loop thread.

    Unless ``retry_on_failed_connect=True``, the first connection attempt
    gives up after one pass over ``servers`` (``connect_timeout`` each, 2 s by
    default) and raises :class:`NoServersError` saying why (connection
    refused, name not resolved, a TLS error; :class:`AuthorizationError` for
    rejected credentials). Passwords in URLs never appear in messages.
    """
    conn = Connection("jetstream-sync")
    conn.connect(servers, options)
    return Client(conn)


class Client:
    """A NATS connection usable from any number of threads.

    Create it with :func:`connect`. Every method blocks the calling thread
    only; the connection itself is driven by a background loop thread.
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
    def connected_url(self) -> Optional[str]:
        """The server URL connected to, without any password."""
        return self._conn.connected_url

    @property
    def max_payload(self) -> int:
        return self._conn.max_payload

    @property
    def stats(self) -> Dict[str, int]:
        """nats-py connection counters plus ``ack_errors`` (acks that could not be sent)."""
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
    ) -> None:
        """Publish a core NATS message (no JetStream acknowledgement)."""
        conn = self._conn
        conn.check()
        payload = as_bytes(data)
        options.subject(subject)
        if reply:
            options.subject(reply, what="reply subject")
        hdr = options.header_block(headers) if headers else b""
        options.control_line(subject, reply)
        options.payload_size(len(hdr) + len(payload), conn.max_payload)
        conn.run(conn.apublish(subject, payload, reply, headers), 30.0)


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
        options.control_line(subject, "_INBOX." + "x" * 44)
        options.payload_size(len(hdr) + len(payload), conn.max_payload)
        # Pipelined like publish_async: one shared reply inbox, no task per call.
        return conn.requester(WireMsg).publish_and_wait(subject, payload, headers, hdr, t)  # type: ignore[no-any-return]

    def subscribe(
        self,
        subject: str,
        queue: str = "",
        *,
        pending_msgs_limit: int = DEFAULT_PENDING_MSGS_LIMIT,
        pending_bytes_limit: int = DEFAULT_PENDING_BYTES_LIMIT,
    ) -> "Subscription":
        """Subscribe to a core NATS subject; read with ``next_msg()`` or iterate.

        At most ``pending_msgs_limit`` messages / ``pending_bytes_limit``
        bytes wait unread (nats-py's defaults); beyond that messages are
        dropped, counted in :attr:`Subscription.dropped` and reported to the
        connection's ``error_cb`` as :class:`SlowConsumerError`.
        """
        conn = self._conn
        conn.check()
        options.subject(subject, wildcards=True)
        if queue:
            options.name("queue group", queue)
        sub = Subscription(conn, subject, _limit("pending_msgs_limit", pending_msgs_limit),
                           _limit("pending_bytes_limit", pending_bytes_limit))
        conn.register(sub)
        try:
            sub._sid = conn.run(conn.subscribe(subject, sub._on_msg, queue), 10.0)
        except BaseException:
            conn.unregister(sub)
            raise
        return sub

    def new_inbox(self) -> str:
        """A unique inbox subject (``_INBOX.<nuid>``, or the connection's inbox prefix)."""
        return self._conn.new_inbox()

    def flush(self, timeout: float = 5.0) -> None:
        """Send everything queued (acks included) and wait for the server's PONG."""
        conn = self._conn
        conn.check()
        t = options.duration("timeout", timeout)
        conn.run(conn.aflush(t), t + 1.0)

    def jetstream(
        self, *, domain: Optional[str] = None, api_prefix: Optional[str] = None, timeout: float = 5.0
    ) -> "JetStream":
        """A :class:`JetStream` context on this connection."""
        from .jetstream import JetStream

        return JetStream(self._conn, client=self, domain=domain, api_prefix=api_prefix, timeout=timeout)

    # -- shutdown -------------------------------------------------------------

    def drain(self, timeout: float = 30.0) -> None:
        """Stop every context (unread buffers NAK'd) and subscription, send
        everything queued, drain the connection, then close. Bounded by ``timeout``."""
        self._conn.close(options.duration("timeout", timeout), drain=True)

    def close(self, timeout: float = 5.0) -> None:
        """Stop every context (unread buffers NAK'd), send queued acks and
        publishes, close the connection and stop the loop thread. Idempotent."""
        self._conn.close(options.duration("timeout", timeout))

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _limit(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise errors.InvalidOptionError(f"{name} must be an integer >= 0 (0: no limit), got {value!r}")
    return value


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
            self._conn.report_error(
                errors.SlowConsumerError(f"slow consumer on {self.subject!r}: pending limit reached, dropping messages")
            )

    def next_msg(self, timeout: Optional[float] = 1.0) -> Msg:
        """The next message; raises TimeoutError after ``timeout`` seconds
        (None: no limit) and ConnectionClosedError once the subscription ended."""
        self._conn.check_fork()
        t = options.optional_timeout("timeout", timeout)
        with self._cond:
            if not self._cond.wait_for(lambda: self._items or self._ended is not None, t):
                raise errors.TimeoutError("no message within %.3fs" % t)
            if self._items:
                msg = self._items.popleft()
                self._bytes -= len(msg.data)
                return msg
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

    def _end(self, error: BaseException) -> None:
        with self._cond:
            if self._ended is None:
                self._ended = error
            self._cond.notify_all()

    def unsubscribe(self) -> None:
        """Remove interest; messages already received stay readable."""
        if self._ended is not None:
            return
        conn = self._conn
        if self._sid is not None and not conn.closing:
            try:
                conn.run(conn.unsubscribe(self._sid), 5.0)
            except errors.ConnectionClosedError:
                pass
        conn.unregister(self)
        self._end(errors.ConnectionClosedError("unsubscribed"))

    def connection_closing(self, error: BaseException) -> None:
        self._end(error)


def as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        return data.encode()
    raise errors.InvalidOptionError(f"data must be bytes or str, not {type(data).__name__}")
