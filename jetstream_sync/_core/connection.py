"""The connection core: the one owner of everything a Client is made of.

A :class:`Connection` owns the loop thread (:mod:`.loop`), the nats-py
client and its version-gated fast paths (:mod:`.wire`), the core
subscriptions (:mod:`.subscriptions`), the ack outbox, the one async
publisher, the registry of live contexts / fetches / subscriptions, the
connection events (:mod:`.events`) and the routing of permission violations
(:mod:`.permissions`). Connecting is in :mod:`.connect`, the mapping of
nats-py errors in :mod:`.nats_errors`, the fork hook in :mod:`.fork`.
Everything above it (Client, JetStream, the pull engines, the contexts, Msg)
calls its methods; it imports nothing above it.

Threads: methods marked "loop thread" run only on the loop thread; the
others may be called from any thread. Shared state touched from both sides
says how it is safe where it is declared.

Long: the one owner of a connection's parts and of its states (connecting,
reconnecting, draining, closing, forked); they read best side by side.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
import weakref
from typing import Any, Awaitable, Callable, Coroutine, Dict, List, Optional, Set, TypeVar, Union

from nats.aio.client import Client as _NatsClient

from .. import errors
from ..options import DEFAULT_INBOX_PREFIX, reply_room
from . import fork as _fork
from .ack_order import RECENT_ACKS, after_acks, after_queued
from .connect import Settings, check_servers, check_settings, close_quietly, fast_paths_wanted, first_connect
from .connect import redact_url, secure_enough
from .events import Events, log_event
from .loop import LoopThread, register_exit_hook
from .nats_errors import NATS_ERRORS, permission_violation, translate
from .outbox import AckOutbox
from .permissions import PermissionWatchers
from .publisher import AsyncPublisher
from .subscriptions import Subscriptions
from .wire import REPLY_INBOX, Dispatcher, Handler, Sink, fix_late_pong, fix_ping_order, supported
from .writer import SocketWriter, pub_command, send_raw
from .logfields import log_fields
from .nuid import next_nuid

# check_servers and redact_url are connect's; named here too for the modules that import them from here.
__all__ = ["Connection", "Resource", "live_connections", "check_servers", "redact_url"]

T = TypeVar("T")
_log = logging.getLogger("jetstream_sync._connection")  # the logger name users configure, kept from before the move

# Every Connection alive in this process (for the signal helper and the fork hook).
_live: "weakref.WeakSet[Connection]" = weakref.WeakSet()


@_fork.on_child
def _after_fork_in_child() -> None:
    for conn in list(_live):  # hot paths read this flag instead of comparing generations
        conn.in_child = True


def live_connections() -> List["Connection"]:
    """Connections of this process that are not closing."""
    return [c for c in list(_live) if not c.closing and not c.forked]


class Resource:
    """Something live on a connection that close/drain/fork must reach:
    pull contexts, fetches, core subscriptions. Subclasses override."""

    def drain_for_shutdown(self, timeout: float) -> Optional[threading.Event]:
        """The thread that drains (never wait for it): begin a graceful end, over
        within ``timeout`` seconds; an event set once it is (None: nothing to wait for)."""
        return None

    def connection_closing(self, error: BaseException) -> None:
        """Any thread: the connection is closing; stop and release waiters."""

    async def connection_shutdown(self) -> None:
        """Loop thread: finish loop-side work before the socket closes."""


class Connection:
    """One nats-py connection and everything built on it."""

    def __init__(self, name: str = "jetstream-sync") -> None:
        self.loop_thread = LoopThread(name)  # first: it catches up with a fork the hook missed
        self._generation = _fork.generation
        self.nc: Optional[_NatsClient] = None
        self.fast = False  # the fast paths through nats-py internals are on
        # Queues of acks and publishes sent in bursts; flush/drain/close and
        # every other call send them first (an ack precedes a later request).
        self.outbox = AckOutbox(self)
        self.direct = SocketWriter(self.loop_thread)  # blocking calls write to an idle socket themselves
        self._publisher: Optional[AsyncPublisher] = None
        self._requester: Optional[AsyncPublisher] = None  # core request/reply, same machinery
        self._publisher_lock = threading.Lock()
        # Live resources; _state_lock makes "register" and "closing" exclusive,
        # so nothing registers after close() collected them.
        self._resources: "weakref.WeakSet[Resource]" = weakref.WeakSet()
        self._state_lock = threading.Lock()
        self.closing = False
        self.closed = False
        self.draining = False  # a drain began: nothing new subscribes (set under _state_lock)
        self._closed_event = threading.Event()
        self._events = Events(self.loop_thread.name)
        self._permissions = PermissionWatchers()  # loop thread only
        self._subscriptions: Optional[Subscriptions] = None  # made at the connect (loop thread only)
        self._tls_wanted = False
        # Inboxes are "<inbox_prefix>.<nuid>"; reply_room is the bytes of the longest reply inbox (any thread reads both).
        self.inbox_prefix, self.reply_room = DEFAULT_INBOX_PREFIX, reply_room()
        self.pong_fixed = False  # nats-py's late-PONG bug is worked around
        # The server URL (password redacted) last connected to, for the logs:
        # nats-py forgets it at a disconnect. Written on the loop thread only.
        self.last_url: Optional[str] = None
        # Fire-and-forget tasks (loop thread): asyncio keeps only weak references to them.
        self._tasks: Set["asyncio.Future[None]"] = set()
        self.in_child = False  # set in a forked child by the fork hook
        _live.add(self)

    # -- state (any thread) ----------------------------------------------------

    @property
    def forked(self) -> bool:
        return self._generation != _fork.generation

    @property
    def inherited(self) -> bool:
        """True in a forked child: this connection is the parent's."""
        return self._generation != _fork.generation or self.in_child

    def check_fork(self) -> None:
        """Raise ForkedProcessError in a child process. Hot paths test
        ``in_child`` inline and call this only to raise."""
        if self._generation != _fork.generation or self.in_child:
            raise errors.ForkedProcessError(
                "this object was created before os.fork() and cannot be used in the child process; "
                "create a new Client in the child"
            )

    def check_new(self) -> None:
        """Raise unless something new may subscribe now: not while draining."""
        self.check()
        if self.draining:
            raise errors.ConnectionDrainingError("the client is draining: nothing new may subscribe")

    def check_wait(self, what: str, ready: bool = False) -> None:
        """Raise before a wait for ``what`` that could not end: in a forked
        child (ForkedProcessError), or on the loop thread unless ``ready``
        (nothing to wait for: DeadlockError)."""
        self.check_fork()
        if not ready:
            self.loop_thread.refuse_wait(what)

    def check(self) -> None:
        """Raise unless this connection may be used from this process now."""
        if self._generation != _fork.generation:
            raise errors.ForkedProcessError(
                "this Client was created before os.fork() and cannot be used in the child process; "
                "create a new Client in the child"
            )
        if self.closing:
            raise errors.ConnectionClosedError("the client is closed")

    @property
    def is_connected(self) -> bool:
        nc = self.nc
        return not self.closed and nc is not None and nc.is_connected

    @property
    def is_closed(self) -> bool:
        nc = self.nc
        return self.closed or nc is None or nc.is_closed

    @property
    def is_draining(self) -> bool:
        return self.draining and not self.closed

    def begin_drain(self) -> None:
        """Any thread: from now on nothing new subscribes (ConnectionDrainingError)."""
        with self._state_lock:
            if not self.closing:
                self.draining = True

    def timeout_note(self) -> str:
        """What a TimeoutError adds while the client is away from the server ("" when connected)."""
        nc = self.nc
        if nc is None or self.closing or nc.is_connected:
            return ""
        return " (the client is not connected: reconnecting)" if nc.is_reconnecting else " (the client is not connected)"

    def timed_out(self, text: str) -> errors.TimeoutError:
        """A TimeoutError saying ``text``, and that the client is reconnecting if it is."""
        return errors.TimeoutError(text + self.timeout_note())

    @property
    def is_reconnecting(self) -> bool:
        nc = self.nc
        return nc is not None and nc.is_reconnecting

    @property
    def connected_url(self) -> Optional[str]:
        nc = self.nc
        url = nc.connected_url if nc is not None else None
        return redact_url(url.geturl()) if url is not None else None

    @property
    def max_payload(self) -> int:
        nc = self.nc
        return nc.max_payload if nc is not None else 1024 * 1024

    @property
    def stats(self) -> Dict[str, int]:
        out = self.direct.add_direct_sends(dict(self.nc.stats) if self.nc is not None else {})
        out["ack_errors"] = self.outbox.errors
        return out

    # -- connecting ---------------------------------------------------------------

    def connect(self, servers: Union[str, List[str]], options: Dict[str, Any]) -> None:
        settings = check_settings(servers, options)
        self._events.set_user_callbacks(settings.callbacks)
        if settings.inbox_prefix is not None:
            self.inbox_prefix, self.reply_room = settings.inbox_prefix, reply_room(settings.inbox_prefix)
        self._tls_wanted = settings.tls
        try:
            self.loop_thread.run(self._aconnect(settings))
        except BaseException:
            self.loop_thread.stop(timeout=1.0)
            raise
        register_exit_hook(self)

    async def _aconnect(self, settings: Settings) -> None:
        nc = _NatsClient()
        self.nc = nc
        self.pong_fixed = fix_late_pong(nc)
        fix_ping_order(nc)  # a PONG proves the server read what was queued before its PING
        dispatcher = None
        if fast_paths_wanted() and supported(nc):
            dispatcher = Dispatcher(nc)  # before connect: its parser reads from the start
            self.fast = True
        self._subscriptions = Subscriptions(nc, dispatcher, self._permissions, self.spawn)
        callbacks: Dict[str, Any] = dict(
            disconnected_cb=self._event_cb("disconnected"),
            reconnected_cb=self._event_cb("reconnected"),
            closed_cb=self._event_cb("closed"),
        )
        if self._events.has_user_callback("discovered_server_cb"):
            callbacks["discovered_server_cb"] = self._event_cb("discovered_server")
        await first_connect(nc, settings, callbacks, self._on_error)
        self.outbox.connected(nc)
        self.last_url = self.connected_url
        _log.info("connected to %s", self.last_url, extra=log_fields(server=self.last_url))

    # -- events and errors (loop thread unless said) -----------------------------------

    def _event_cb(self, event: str) -> Callable[[], Awaitable[None]]:
        async def fire() -> None:
            if event == "reconnected":  # also the first connect of retry_on_failed_connect
                self.last_url = self.connected_url or self.last_url
            log_event(event, self.last_url, self.closing)
            if event == "reconnected":
                self._check_reconnected_secure()
                if self.nc is not None:
                    self.outbox.connected(self.nc)  # publishes held while reconnecting go now
            self._events.tell(event)
            await self._events.call_user(f"{event}_cb")

        return fire

    def _check_reconnected_secure(self) -> None:
        nc = self.nc
        if nc is not None and not secure_enough(nc, self._tls_wanted):
            _log.error("reconnected to a server without TLS although TLS was requested: closing",
                       extra=log_fields(server=self.last_url))
            self.spawn(close_quietly(nc))

    async def _on_error(self, exc: Exception) -> None:
        """Loop thread: nats-py's error callback."""
        err: BaseException
        violation = permission_violation(exc)
        if violation is not None:
            err = violation.error
            self._permission_denied(violation.kind, violation.subject, violation.queue, err)
        else:
            err = translate(exc)
            self._events.log_error(exc, err, self.last_url)
        await self._events.call_user("error_cb", err)

    def report_error(self, exc: BaseException, log: bool = True, **about: Any) -> None:
        """Any thread: pass an asynchronous problem (slow consumer, a failed callback …) to error_cb;
        logged with the fields (``subject=``, ``service=`` …) of what it is about unless ``log=False``."""
        if log:
            _log.warning("%s", exc, extra=log_fields(server=self.last_url, **about))
        if self._events.has_user_callback("error_cb"):
            try:
                self.call_soon(self._report_now, exc)
            except errors.JetStreamError:
                pass

    def _report_now(self, exc: BaseException) -> None:
        self.spawn(self._events.call_user("error_cb", exc))

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Loop thread: run ``coro`` in the background, referenced until done."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def add_listener(self, event: str, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn()`` on the loop thread at each ``event``; returns a remover.

        Events: "disconnected", "reconnected", "closed". ``fn`` must not block.
        """
        return self._events.add_listener(event, fn)

    # -- permissions (loop thread) -------------------------------------------------

    def watch_permission(
        self, subject: str, callback: Callable[[BaseException], None], queue: Optional[str] = None
    ) -> Callable[[], None]:
        """Loop thread: ``callback(PermissionDeniedError)`` if the server
        refuses a publish on ``subject`` (or a subscription covering it);
        with ``queue`` ("" for none): if it refuses the subscription to
        exactly ``subject`` in that queue group. Returns a remover."""
        return self._permissions.watch(subject, callback, queue)

    def _permission_denied(self, kind: str, subject: str, queue: str, err: BaseException) -> None:
        hit = self._permissions.watchers_of(kind, subject, queue)
        if kind == "publish" or not queue:  # the reply inboxes have no queue group
            for pub in (self._publisher, self._requester):
                if pub is not None:
                    pub.denied(kind, subject.lower(), err)
        self._permissions.tell(hit, err)

    # -- calls from user threads ---------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T], timeout: Optional[float], confirm_acks: str = "") -> T:
        """Run ``coro`` on the loop and block for its result, translating errors.

        Acks and publishes this thread queued before the call go out first.
        ``confirm_acks="all"`` (JetStream API requests, whose answers show the
        consumers' state) makes the server process the acks queued or sent
        just before, first; ``"naks"`` (pulls) does so only after a recent
        ``nak()``, so that a fetch gets the NAK'd message back.
        """
        try:
            self.check()
        except BaseException:
            coro.close()
            raise
        inner = coro
        outbox = self.outbox
        now = time.monotonic()
        if confirm_acks == "all" and (outbox.has_queued() or now - outbox.sent_at < RECENT_ACKS):
            coro = after_acks(self, coro, timeout)
        elif confirm_acks == "naks" and now - outbox.last_nak < RECENT_ACKS:
            coro = after_acks(self, coro, timeout)
        elif outbox.has_queued():
            coro = after_queued(self, coro)
        try:
            return self.loop_thread.run(coro, timeout)
        except errors.TimeoutError as exc:
            note = self.timeout_note()
            if note and note not in str(exc):
                exc.args = (str(exc) + note,)
            raise
        except errors.JetStreamError:
            raise
        except NATS_ERRORS as exc:
            err = translate(exc)
            if isinstance(err, errors.TimeoutError):
                err.args = (str(err) + self.timeout_note(),)
            raise err from exc
        finally:
            if inner is not coro and inspect.getcoroutinestate(inner) == inspect.CORO_CREATED:
                inner.close()  # the wrapper never ran it

    def acks_processed(self, timeout: Optional[float]) -> None:
        """Return once the server has processed the acks made so far, so that
        a look at the consumer next, from any client, sees them. Quietly gives
        up when closed or out of time (the caller's own work is done)."""
        if self.closed:
            return
        try:
            self.run(asyncio.sleep(0), timeout, confirm_acks="all")
        except errors.JetStreamError as exc:
            _log.debug("acks not confirmed: %r", exc, extra=log_fields(server=self.last_url))

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Schedule ``fn(*args)`` on the loop without waiting (never blocks)."""
        if self._generation != _fork.generation:
            raise errors.ForkedProcessError("this Client cannot be used after os.fork()")
        self.loop_thread.call_soon(fn, *args)

    def register(self, resource: Resource) -> None:
        """Track a live resource; raises ConnectionClosedError once closing
        began, ConnectionDrainingError once a drain began."""
        with self._state_lock:
            self.check_new()
            self._resources.add(resource)

    def unregister(self, resource: Resource) -> None:
        self._resources.discard(resource)

    def drain_resources(self, timeout: float) -> List[threading.Event]:
        """Begin every live resource's graceful end (within ``timeout`` s); events to wait on."""
        with self._state_lock:  # none once closing, nor on the loop thread (resources block for it)
            resources = [] if self.closing or self.forked or self.loop_thread.in_loop_thread() else list(self._resources)
        events = [r.drain_for_shutdown(timeout) for r in resources]
        return [e for e in events if e is not None]

    def publisher(self) -> AsyncPublisher:
        """The connection's one async publisher, made on first use."""
        pub = self._publisher
        if pub is None:
            with self._publisher_lock:
                if self._publisher is None:
                    self._publisher = AsyncPublisher(self)
                pub = self._publisher
        return pub

    def requester(self, make_reply: Callable[[bytes, bytes, bytes, Any, Optional[bytes]], Any]) -> AsyncPublisher:
        """The connection's pipelined core requests (one reply inbox; each
        reply made into a message by ``make_reply``), made on first use."""
        req = self._requester
        if req is None:
            with self._publisher_lock:
                if self._requester is None:
                    self._requester = AsyncPublisher(self, make_reply=make_reply)
                req = self._requester
        return req

    @property
    def has_publisher(self) -> bool:
        return self._publisher is not None

    # -- loop-side primitives ---------------------------------------------------------

    def nats_client(self) -> _NatsClient:
        """Loop thread: the nats-py client; ConnectionClosedError before the connect."""
        nc = self.nc
        if nc is None:
            raise errors.ConnectionClosedError("not connected")
        return nc

    def new_inbox(self) -> str:  # any thread (nats-py's NUID is not thread-safe)
        return f"{self.inbox_prefix}.{next_nuid()}"

    async def subscribe(
        self,
        subject: str,
        handler: Union[Handler, Sink],
        queue: str = "",
        limits: Optional[Dict[str, int]] = None,
        denied: Optional[Callable[[BaseException], None]] = None,
        requests_to: Optional[str] = None,
    ) -> int:
        """Loop thread: a core subscription whose messages go to
        ``handler(subject, reply, data, header_block)`` (all bytes; the header
        block includes the ``NATS/1.0`` status line), or in bulk to a
        :class:`~.wire.Sink`. Returns its sid. If the server refuses it, or a publish to ``requests_to``
        (a reply inbox's requests), it is removed and ``denied(PermissionDeniedError)`` called."""
        subs = self._subscriptions
        if subs is None:
            raise errors.ConnectionClosedError("not connected")
        return await subs.subscribe(subject, handler, queue, limits, denied, requests_to)

    def backlog(self, sid: int) -> int:
        """Loop thread: messages received for ``sid`` and not yet given to its
        handler (only without the fast paths, where nats-py queues them)."""
        subs = self._subscriptions
        return subs.backlog(sid) if subs is not None else 0

    async def unsubscribe(self, sid: int, drain: bool = False, timeout: float = 5.0) -> None:
        """Loop thread: remove interest. With ``drain``, what the server sent
        before the UNSUB still reaches the handler."""
        subs = self._subscriptions
        if subs is not None:
            await subs.unsubscribe(sid, drain, timeout)

    def send_pub(self, subject: str, reply: str, payload: bytes) -> bool:
        """Loop thread: publish without waiting; False if it cannot be sent."""
        nc = self.nc
        if nc is None or nc.is_closed:
            return False
        if self.fast:
            return self.send_commands(pub_command(subject, reply, payload), 1, len(payload))
        task = asyncio.get_running_loop().create_task(nc.publish(subject, payload, reply=reply))
        task.add_done_callback(_log_send_failure)
        return True

    async def apublish(
        self, subject: str, payload: bytes, reply: str = "", headers: Optional[Dict[str, str]] = None
    ) -> None:
        """Loop thread: one publish through nats-py, written after everything
        this coroutine published before it."""
        await self.nats_client().publish(subject, payload, reply=reply, headers=headers)

    def send_commands(self, data: bytes, msgs: int, size: int) -> bool:
        """Loop thread, fast paths only: pre-formatted protocol lines carrying
        ``msgs`` messages of ``size`` payload bytes in all."""
        nc = self.nc
        return nc is not None and send_raw(nc, data, msgs, size)

    async def request(
        self, subject: str, data: bytes, timeout: float, headers: Optional[Dict[str, str]] = None
    ) -> Any:
        """Loop thread: one request/reply; a permission violation on ``subject``
        (or on the reply inbox) fails it at once with PermissionDeniedError."""
        nc = self.nats_client()
        task = asyncio.current_task()
        denied: List[BaseException] = []

        def on_denied(err: BaseException) -> None:
            denied.append(err)
            if task is not None:
                task.cancel()

        removes = [self.watch_permission(subject, on_denied), self.watch_permission(REPLY_INBOX, on_denied)]
        try:
            return await nc.request(subject, data, timeout=timeout, headers=headers)
        except asyncio.CancelledError:
            if denied:
                raise denied[0] from None
            raise
        finally:
            for remove in removes:
                remove()

    async def send_batched(self) -> None:
        """Loop thread: send every queued ack and publish now."""
        await self.outbox.send_queued()
        for pub in (self._publisher, self._requester):
            if pub is not None:
                await pub.send_queued()

    async def round_trip(self, timeout: float) -> bool:
        """Loop thread: a PING/PONG round trip, so that whatever the server
        sent before it has been read; False if no PONG came within
        ``timeout``. Where nats-py's late-PONG bug could not be worked around
        (fix_late_pong) a short pause stands in."""
        nc = self.nc
        if nc is None or not nc.is_connected:
            return False
        if not self.pong_fixed:
            await asyncio.sleep(min(timeout, 0.05))
            return True
        try:
            await nc.flush(timeout=timeout)  # type: ignore[arg-type]  # nats-py says int; any number works
        except Exception as exc:
            _log.debug("round trip: %r", exc, extra=log_fields(server=self.last_url))
            return False
        return True

    async def flush_quietly(self, timeout: float) -> None:
        """Loop thread: send what is queued and wait (bounded) until the server
        has read it; never raises."""
        try:
            await self.send_batched()
            nc = self.nc
            if nc is not None and nc.is_connected:
                await asyncio.wait_for(nc.flush(timeout=timeout), timeout + 0.1)  # type: ignore[arg-type]  # as above
        except Exception as exc:
            _log.debug("flush: %r", exc, extra=log_fields(server=self.last_url))

    async def aflush(self, timeout: float) -> None:
        """Loop thread: send what is queued and wait for the server's PONG.
        While reconnecting nats-py's flush returns at once without one: wait
        for the reconnect first, within ``timeout``."""
        await self.send_batched()
        nc = self.nats_client()
        deadline = time.monotonic() + timeout
        while not nc.is_connected and not nc.is_closed:
            if time.monotonic() >= deadline:
                raise errors.TimeoutError(f"flush: no PONG within {timeout}s")
            await asyncio.sleep(0.01)
        await nc.flush(timeout=max(deadline - time.monotonic(), 0.001))  # type: ignore[arg-type]  # nats-py says int

    # -- shutdown ------------------------------------------------------------------

    def _begin_close(self) -> Optional[List[Resource]]:
        """Mark closing; the resources to stop, or None if already closing."""
        with self._state_lock:
            if self.closing:
                return None
            self.closing = True
            return list(self._resources)

    def close(self, timeout: float = 5.0, drain: bool = False) -> None:
        """Stop every resource, send what is queued, close the socket, stop
        the loop. Idempotent; bounded by ``timeout``."""
        if self.forked:
            self.closing = self.closed = True  # the child never touches the parent's socket
            return
        deadline = time.monotonic() + timeout
        resources = self._begin_close()
        if resources is None:  # another thread is closing: return when it is done
            if not self.loop_thread.in_loop_thread():
                self._closed_event.wait(timeout)
            return
        pub = self._publisher
        if pub is not None and self.loop_thread.started and not self.loop_thread.in_loop_thread():
            # No new publish_async from here on; those accepted get their
            # PubAcks (bounded), so a stored message is never reported failed.
            pub.refuse_new()
            pub.wait_complete(timeout / 2)
        if self._requester is not None:
            self._requester.refuse_new()  # requests in flight fail when the connection closes
        error = errors.ConnectionClosedError("the client was drained" if drain else "the client was closed")
        try:
            for res in resources:
                res.connection_closing(error)
            if self.nc is not None and self.loop_thread.started and not self.loop_thread.in_loop_thread():
                left = max(deadline - time.monotonic(), 0.5)
                try:
                    self.loop_thread.run(self._aclose(resources, left, drain), left)
                except BaseException as exc:
                    _log.debug("error while closing: %r", exc, extra=log_fields(server=self.last_url))
        finally:
            self.closed = True
            self.loop_thread.stop(timeout=max(deadline - time.monotonic(), 0.5))
            self.outbox.drop_unsent()
            if pub is not None:
                pub.fail_all(errors.ConnectionClosedError("connection closed before the publish was acknowledged"))
            for res in resources:  # anything that slipped through waits no more
                res.connection_closing(error)
            self._events.stop()
            self._closed_event.set()

    async def _aclose(self, resources: List[Resource], timeout: float, drain: bool) -> None:
        tasks = [asyncio.ensure_future(r.connection_shutdown()) for r in resources]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout / 2)
        nc = self.nats_client()
        try:
            self.outbox.seal()
            await self.send_batched()
        finally:
            if not nc.is_closed:
                if drain:
                    try:
                        await asyncio.wait_for(nc.drain(), timeout / 2)
                    except Exception as exc:
                        _log.debug("drain: %r", exc, extra=log_fields(server=self.last_url))
                if not nc.is_closed:
                    await nc.close()

    def close_at_exit(self) -> None:
        self.close(timeout=1.5)


def _log_send_failure(task: "asyncio.Task[Any]") -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.debug("send failed: %r", task.exception(), extra=log_fields())
