"""The connection core: the one owner of everything a Client is made of.

A :class:`Connection` owns the loop thread, the nats-py client and its
version-gated fast paths (:mod:`._wire`), the dispatcher of raw subscription
handlers, the ack outbox, the one async publisher, the registry of live
contexts / fetches / subscriptions, and the translation of nats-py errors.
Everything above it (Client, JetStream, the pull engines, the contexts, Msg)
calls its methods; it imports nothing above it.

Threads: methods marked "loop thread" run only on the loop thread; the
others may be called from any thread. Shared state touched from both sides
says how it is safe where it is declared.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import queue
import re
import threading
import time
import urllib.parse
import weakref
from functools import partial
from typing import Any, Awaitable, Callable, Coroutine, Dict, List, Optional, Set, TypeVar, Union, cast

import nats.errors as _nerr
from nats.aio.client import Client as _NatsClient

from . import errors
from ._loop import LoopThread, gevent_patched, register_exit_hook
from ._outbox import AckOutbox, subject_str
from ._publisher import AsyncPublisher
from ._wire import (
    REPLY_INBOX,
    Dispatcher,
    Handler,
    Sink,
    deliver_one,
    fix_late_pong,
    fix_ping_order,
    pub_command,
    send_raw,
    server_info,
    sid_of,
    subject_covers,
    supported,
    translate,
)

__all__ = ["Connection", "translate", "redact_url", "Resource"]

T = TypeVar("T")
_log = logging.getLogger(__name__)

EVENTS = ("disconnected", "reconnected", "closed")
_USER_CALLBACKS = ("error_cb", "disconnected_cb", "closed_cb", "discovered_server_cb", "reconnected_cb")
NATS_OPTIONS = frozenset(inspect.signature(_NatsClient.connect).parameters) - {"self", "servers"}
# Our own connect() options, not passed to nats-py.
OWN_OPTIONS = frozenset({"retry_on_failed_connect"})
# JETSTREAM_SYNC_FAST_PATHS=0 forces the public nats-py API (CI runs the
# integration tier both ways).
FAST_PATHS_ENV = "JETSTREAM_SYNC_FAST_PATHS"
_SCHEMES = frozenset({"nats", "tls", "ws", "wss"})  # what nats-py connects with

_PERMISSION = re.compile(r'Permissions Violation for (Publish|Subscription) to "?([^"\s]+)"?', re.IGNORECASE)

# Bumped in a forked child: objects made before the fork compare it with
# their own generation and refuse use (one int compare, cheap on hot paths).
_generation = 0


def _after_fork_in_child() -> None:
    global _generation
    _generation += 1
    for conn in list(_live):  # hot paths read this flag instead of comparing generations
        conn.in_child = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def check_servers(servers: List[str]) -> List[str]:
    """``servers`` if each is a URL nats-py can connect to; InvalidOptionError otherwise."""
    if not servers or not all(isinstance(s, str) and s for s in servers):
        raise errors.InvalidOptionError("servers must be a URL or a non-empty list of URLs")
    for url in servers:
        scheme = url.partition("://")[0].lower() if "://" in url else "nats"
        if scheme not in _SCHEMES:  # http:// would otherwise fail as an unresolvable host name
            raise errors.InvalidOptionError(
                f"unsupported URL scheme {scheme!r} in {redact_url(url)}: use nats://, tls://, ws:// or wss://"
            )
        full = url if "://" in url else "nats://" + url
        try:  # as nats-py will read it; else its connect fails with a bare "Error"
            parts = urllib.parse.urlsplit(full)
            _ = parts.port
            if "@" in full.partition("://")[2] and "@" not in parts.netloc:
                raise ValueError("a '#', '/' or '?' cut the user part off")  # nats-py would dial the secret as a host
        except ValueError:  # its text may quote a piece of the password: not shown
            raise errors.InvalidOptionError(
                f"invalid server URL {redact_url(url)}: its host or port cannot be read "
                "(percent-encode '#', '/' and '?' in a password or token)"
            ) from None
    return servers


def redact_url(url: str) -> str:
    """``url`` with any password (or token in the user part) replaced by ``***``.

    By hand, not urlsplit: a password with an unencoded ``#``, ``/`` or ``?``
    ends urlsplit's netloc before the ``@``, and the secret came back whole.
    The credentials run to the last ``@`` (one in a path would over-redact,
    never leak)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    at = rest.rfind("@")
    if at < 0:
        return url
    user, colon, _secret = rest[:at].partition(":")
    cred = f"{user}:***" if colon else "***"
    return f"{scheme}{sep}{cred}@{rest[at + 1:]}"


# Every Connection alive in this process (for the signal helper).
_live: "weakref.WeakSet[Connection]" = weakref.WeakSet()


def live_connections() -> List["Connection"]:
    """Connections of this process that are not closing."""
    return [c for c in list(_live) if not c.closing and not c.forked]


class Resource:
    """Something live on a connection that close/drain/fork must reach:
    pull contexts, fetches, core subscriptions. Subclasses override."""

    def drain_for_shutdown(self) -> Optional[threading.Event]:
        """Any thread: begin a graceful end; an event set once it is over."""
        return None

    def connection_closing(self, error: BaseException) -> None:
        """Any thread: the connection is closing; stop and release waiters."""

    async def connection_shutdown(self) -> None:
        """Loop thread: finish loop-side work before the socket closes."""


class Connection:
    """One nats-py connection and everything built on it."""

    def __init__(self, name: str = "jetstream-sync") -> None:
        self.loop_thread = LoopThread(name)
        self._generation = _generation
        self.nc: Optional[_NatsClient] = None
        self.fast = False  # the fast paths through nats-py internals are on
        self._dispatcher: Optional[Dispatcher] = None
        # Queues of acks and publishes sent in bursts; flush/drain/close and
        # every other call send them first (an ack precedes a later request).
        self.outbox = AckOutbox(self)
        self._publisher: Optional[AsyncPublisher] = None
        self._requester: Optional[AsyncPublisher] = None  # core request/reply, same machinery
        self._publisher_lock = threading.Lock()
        # Live resources; _state_lock makes "register" and "closing" exclusive,
        # so nothing registers after close() collected them.
        self._resources: "weakref.WeakSet[Resource]" = weakref.WeakSet()
        self._state_lock = threading.Lock()
        self.closing = False
        self.closed = False
        self._closed_event = threading.Event()
        self._listeners: Dict[str, List[Callable[[], None]]] = {e: [] for e in EVENTS}
        self._user_cbs: Dict[str, Callable[..., Any]] = {}
        self._cb_thread: Optional[_CallbackThread] = None
        # Loop thread only: subject -> callbacks told of a permission violation.
        self._perm_watchers: Dict[str, Set[Callable[[BaseException], None]]] = {}
        self._tls_wanted = False
        self.pong_fixed = False  # nats-py's late-PONG bug is worked around
        self._servers: List[str] = []
        # The server URL (password redacted) last connected to, for the logs:
        # nats-py forgets it at a disconnect. Written on the loop thread only.
        self.last_url: Optional[str] = None
        self._subs: Dict[int, Any] = {}  # sid -> nats-py subscription (loop thread)
        # Fire-and-forget tasks (loop thread): asyncio keeps only weak references to them.
        self._tasks: Set["asyncio.Future[None]"] = set()
        self.in_child = False  # set in a forked child by the at-fork hook
        _live.add(self)

    # -- state (any thread) ----------------------------------------------------

    @property
    def forked(self) -> bool:
        return self._generation != _generation

    def check_fork(self) -> None:
        """Raise ForkedProcessError in a child process. Hot paths test
        ``in_child`` inline and call this only to raise."""
        if self._generation != _generation or self.in_child:
            raise errors.ForkedProcessError(
                "this object was created before os.fork() and cannot be used in the child process; "
                "create a new Client in the child"
            )

    def check(self) -> None:
        """Raise unless this connection may be used from this process now."""
        if self._generation != _generation:
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
        out = dict(self.nc.stats) if self.nc is not None else {}
        out["ack_errors"] = self.outbox.errors
        return out

    # -- connecting ---------------------------------------------------------------

    def connect(self, servers: Union[str, List[str]], options: Dict[str, Any]) -> None:
        unknown = set(options) - NATS_OPTIONS - OWN_OPTIONS
        if unknown:
            raise errors.InvalidOptionError(f"unknown connect option(s): {', '.join(sorted(unknown))}")
        retry = bool(options.pop("retry_on_failed_connect", False))
        for name in _USER_CALLBACKS:
            cb = options.pop(name, None)
            if cb is not None:
                if not callable(cb):
                    raise errors.InvalidOptionError(f"{name} must be callable")
                self._user_cbs[name] = cb
        if any(not inspect.iscoroutinefunction(cb) for cb in self._user_cbs.values()):
            # Made here, on the caller's side: under gevent it must belong to the caller's hub.
            self._cb_thread = _CallbackThread(f"{self.loop_thread.name}-callbacks")
        server_list = check_servers([servers] if isinstance(servers, str) else list(servers))
        self._servers = server_list
        deadline = None
        if not retry:
            deadline = float(options.get("connect_timeout", 2)) * max(1, len(server_list)) + 1.0
        try:
            self.loop_thread.run(self._aconnect(server_list, options, deadline, retry))
        except BaseException:
            self.loop_thread.stop(timeout=1.0)
            raise
        register_exit_hook(self)

    async def _aconnect(
        self, servers: List[str], options: Dict[str, Any], deadline: Optional[float], retry: bool
    ) -> None:
        nc = _NatsClient()
        self.nc = nc
        self.pong_fixed = fix_late_pong(nc)
        fix_ping_order(nc)  # a PONG proves the server read what was queued before its PING
        if os.environ.get(FAST_PATHS_ENV, "1") != "0" and supported(nc):
            self._dispatcher = Dispatcher(nc)  # before connect: its parser reads from the start
            self.fast = True
        failed: "asyncio.Future[BaseException]" = asyncio.get_running_loop().create_future()
        attempts: List[BaseException] = []

        async def on_error(exc: Exception) -> None:
            if not retry and not failed.done() and not nc.is_connected:
                attempts.append(exc)
                if len(attempts) >= len(servers):  # every server failed once: say why at once
                    failed.set_result(_most_specific(attempts))
                return
            await self._on_error(exc)

        cbs: Dict[str, Any] = dict(  # Any: nats-py checks each keyword's type, not a dict's
            error_cb=on_error,
            disconnected_cb=self._event_cb("disconnected"),
            reconnected_cb=self._event_cb("reconnected"),
            closed_cb=self._event_cb("closed"),
        )
        if "discovered_server_cb" in self._user_cbs:
            cbs["discovered_server_cb"] = self._event_cb("discovered_server")
        self._tls_wanted = bool(options.get("tls")) or any(s.startswith("tls://") for s in servers)
        connecting = asyncio.ensure_future(nc.connect(servers, **options, **cbs))
        try:
            waiting: Set["asyncio.Future[Any]"] = {connecting, failed}
            done, _ = await asyncio.wait(waiting, timeout=deadline, return_when=asyncio.FIRST_COMPLETED)
            if connecting in done:
                connecting.result()
                if not self._secure_enough():
                    await self._close_quietly(nc)
                    raise self._no_servers(_InsecureServer())
                self.last_url = self.connected_url
                _log.info("connected to %s", self.last_url)
                return
            cause: Optional[BaseException] = failed.result() if failed in done else None
            connecting.cancel()
        except BaseException as exc:
            connecting.cancel()
            await self._close_quietly(nc)
            if isinstance(exc, errors.JetStreamError):
                raise
            raise self._no_servers(exc) from exc
        await self._close_quietly(nc)
        raise self._no_servers(cause) from cause

    def _secure_enough(self) -> bool:
        """With ``tls`` (or a tls:// URL) the connection must be encrypted:
        nats-py would otherwise go on in plain text with a server that does
        not require TLS. Checked where nats-py shows the server's INFO."""
        if not self._tls_wanted:
            return True
        info = server_info(self.nc) if self.nc is not None else None
        return info is None or bool(info.get("tls_required"))

    @staticmethod
    async def _close_quietly(nc: _NatsClient) -> None:
        try:
            await nc.close()
        except Exception:
            pass

    def _no_servers(self, cause: Optional[BaseException]) -> errors.JetStreamError:
        where = ", ".join(redact_url(s) for s in self._servers)
        reason = describe_connect_error(cause)
        if reason == "authorization violation":
            return errors.AuthorizationError(f"could not connect to {where}: {reason}")
        return errors.NoServersError(f"could not connect to {where}: {reason}")

    def _event_cb(self, event: str) -> Callable[[], Awaitable[None]]:
        async def fire() -> None:
            self._log_event(event)
            if event == "reconnected":
                self._check_reconnected_secure()
            for listener in list(self._listeners.get(event, ())):
                try:
                    listener()
                except Exception:
                    _log.exception("%s listener failed", event)
            await self._dispatch_user(f"{event}_cb")

        return fire

    def _log_event(self, event: str) -> None:
        """Loop thread: connection events at INFO, an unasked-for disconnect
        at WARNING; URLs come from connected_url, so without passwords."""
        if event == "reconnected":  # also the first connect of retry_on_failed_connect
            self.last_url = self.connected_url or self.last_url
            _log.info("reconnected to %s", self.last_url)
        elif self.last_url is None:  # a failed first connect: the caller gets NoServersError instead
            return
        elif event == "disconnected":
            level = logging.INFO if self.closing else logging.WARNING
            _log.log(level, "disconnected from %s", self.last_url)
        elif event == "closed":
            _log.info("connection to %s closed", self.last_url)

    def _check_reconnected_secure(self) -> None:
        if not self._secure_enough():
            _log.error("reconnected to a server without TLS although TLS was requested: closing")
            nc = self.nc
            if nc is not None:
                self._spawn(self._close_quietly(nc))

    async def _on_error(self, exc: Exception) -> None:
        """Loop thread: nats-py's error callback."""
        text = str(exc)
        match = _PERMISSION.search(text)
        err: BaseException
        if match is not None:
            kind, subject = match.group(1).lower(), match.group(2)
            err = errors.PermissionDeniedError(f"permission denied: {kind} to {subject!r}")
            self._permission_denied(kind, subject, err)
        else:
            err = translate(exc)
            _log.debug("connection error: %r", exc)
        await self._dispatch_user("error_cb", err)

    def report_error(self, exc: BaseException, log: bool = True) -> None:
        """Any thread: pass an asynchronous problem (slow consumer, a failed
        callback …) to error_cb; ``log=False`` when the caller logged it."""
        if log:
            _log.warning("%s", exc)
        if "error_cb" in self._user_cbs:
            try:
                self.call_soon(self._report_now, exc)
            except errors.JetStreamError:
                pass

    def _report_now(self, exc: BaseException) -> None:
        self._spawn(self._dispatch_user("error_cb", exc))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Loop thread: run ``coro`` in the background, referenced until done."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dispatch_user(self, name: str, *args: Any) -> None:
        cb = self._user_cbs.get(name)
        if cb is None:
            return
        if inspect.iscoroutinefunction(cb):
            try:
                await cb(*args)
            except Exception:
                _log.exception("%s raised", name)
            return
        if self._cb_thread is None:
            self._cb_thread = _CallbackThread(f"{self.loop_thread.name}-callbacks")
        self._cb_thread.submit(cb, args)

    def add_listener(self, event: str, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn()`` on the loop thread at each ``event``; returns a remover.

        Events: "disconnected", "reconnected", "closed". ``fn`` must not block.
        """
        listeners = self._listeners[event]
        listeners.append(fn)

        def remove() -> None:
            try:
                listeners.remove(fn)
            except ValueError:
                pass

        return remove

    # -- permissions (loop thread) -------------------------------------------------

    def watch_permission(self, subject: str, callback: Callable[[BaseException], None]) -> Callable[[], None]:
        """Loop thread: ``callback(PermissionDeniedError)`` if the server
        refuses a publish or subscription on ``subject``; returns a remover."""
        # nats-py lowercases -ERR text: match subjects without case.
        key = subject.lower()
        watchers = self._perm_watchers.setdefault(key, set())
        watchers.add(callback)

        def remove() -> None:
            watchers.discard(callback)
            if not watchers:
                self._perm_watchers.pop(key, None)

        return remove

    def _permission_denied(self, kind: str, subject: str, err: BaseException) -> None:
        subject = subject.lower()
        for pub in (self._publisher, self._requester):
            if pub is not None:
                pub.denied(kind, subject, err)
        hit = set(self._perm_watchers.get(subject, ()))
        if kind == "subscription":  # a reply inbox ("_INBOX.x.*") covers the requests on it
            for watched, callbacks in list(self._perm_watchers.items()):
                if subject_covers(subject, watched):
                    hit |= callbacks
        for callback in hit:
            try:
                callback(err)
            except Exception:
                _log.exception("permission watcher failed")

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
            coro = self._after_acks(coro, timeout)
        elif confirm_acks == "naks" and now - outbox.last_nak < RECENT_ACKS:
            coro = self._after_acks(coro, timeout)
        elif outbox.has_queued():
            coro = self._after_queued(coro)
        try:
            return self.loop_thread.run(coro, timeout)
        except errors.JetStreamError:
            raise
        except (_nerr.Error, asyncio.TimeoutError) as exc:
            raise translate(exc) from exc
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
            _log.debug("acks not confirmed: %r", exc)

    async def _after_queued(self, coro: Coroutine[Any, Any, T]) -> T:
        await self.send_batched()
        return await coro

    async def _after_acks(self, coro: Coroutine[Any, Any, T], timeout: Optional[float]) -> T:
        bound = min(timeout or ACK_CONFIRM_TIMEOUT, ACK_CONFIRM_TIMEOUT)
        if self.outbox.has_queued():
            await self.send_acks_confirmed(bound)
        elif time.monotonic() - self.outbox.sent_at < RECENT_ACKS:
            # Sent moments ago without confirmation. A settled ack sent again
            # as a request is a no-op whose reply comes once the server has
            # processed it (and its consumer's earlier acks); otherwise a round
            # trip lets the server take them in before this call.
            last = self.outbox.last_sent
            if last is not None and (last[1] == b"+ACK" or last[1].startswith(b"+TERM")):
                try:
                    await self._nats().request(subject_str(last[0]), last[1], timeout=bound)
                except Exception as exc:
                    _log.debug("ack confirmation: %r", exc)
            else:
                await self.round_trip(bound)
        await self.send_batched()
        return await coro

    async def send_acks_confirmed(self, timeout: float) -> None:
        """Loop thread: send the queued acks; the last one of each consumer
        goes as a request, and its reply (sent once the server processed it,
        and so every earlier ack of that consumer) is awaited, bounded."""
        items = self.outbox.take_all()
        if not items:
            return
        last: Dict[str, int] = {}
        for i, (subject, _) in enumerate(items):
            last[_consumer_of(subject_str(subject))] = i
        confirm = set(last.values())
        plain = [item for i, item in enumerate(items) if i not in confirm]
        if plain:
            self.outbox.put_many(plain)  # put_many sends at once, ahead of the requests below
            self.outbox.send_now()
        nc = self._nats()
        requests = [nc.request(subject_str(items[i][0]), items[i][1], timeout=timeout) for i in sorted(confirm)]
        for outcome in await asyncio.gather(*requests, return_exceptions=True):
            if isinstance(outcome, BaseException):
                _log.debug("ack confirmation: %r", outcome)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Schedule ``fn(*args)`` on the loop without waiting (never blocks)."""
        if self._generation != _generation:
            raise errors.ForkedProcessError("this Client cannot be used after os.fork()")
        self.loop_thread.call_soon(fn, *args)

    def register(self, resource: Resource) -> None:
        """Track a live resource; raises ConnectionClosedError once closing began."""
        with self._state_lock:
            self.check()
            self._resources.add(resource)

    def unregister(self, resource: Resource) -> None:
        self._resources.discard(resource)

    def drain_resources(self) -> List[threading.Event]:
        """Begin a graceful end of every live context; events to wait on."""
        with self._state_lock:
            resources = list(self._resources)
        events = [r.drain_for_shutdown() for r in resources]
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

    def _nats(self) -> _NatsClient:
        nc = self.nc
        if nc is None:
            raise errors.ConnectionClosedError("not connected")
        return nc

    def new_inbox(self) -> str:
        return self._nats().new_inbox()

    async def subscribe(
        self,
        subject: str,
        handler: Union[Handler, Sink],
        queue: str = "",
        limits: Optional[Dict[str, int]] = None,
    ) -> int:
        """Loop thread: a core subscription whose messages go to
        ``handler(subject, reply, data, header_block)`` (all bytes; the header
        block includes the ``NATS/1.0`` status line), or in bulk to a
        :class:`~._wire.Sink`. Returns its sid."""
        nc = self._nats()
        lim = limits if limits is not None else {"pending_msgs_limit": 0, "pending_bytes_limit": 0}
        msgs_limit, bytes_limit = lim["pending_msgs_limit"], lim["pending_bytes_limit"]
        # A Sink is told apart by its bulk entry point (Protocols are not checked at runtime).
        sink = cast(Sink, handler) if hasattr(handler, "on_msgs") else None
        plain = cast(Handler, handler)  # used only when it is not a Sink
        if self.fast:
            assert self._dispatcher is not None
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
        """Loop thread: messages received for ``sid`` and not yet given to its
        handler (only without the fast paths, where nats-py queues them)."""
        sub = self._subs.get(sid)
        return sub.pending_msgs if sub is not None and not self.fast else 0

    async def unsubscribe(self, sid: int, drain: bool = False, timeout: float = 5.0) -> None:
        """Loop thread: remove interest. With ``drain``, what the server sent
        before the UNSUB still reaches the handler."""
        sub = self._subs.pop(sid, None)
        try:
            if sub is None or self.nc is None or self.nc.is_closed:
                return
            if drain:
                # No wait_for: its extra task would let later publishes overtake the UNSUB.
                async with asyncio.timeout(timeout):
                    await sub.drain()
            else:
                await sub.unsubscribe()
        except Exception as exc:  # connection going away: nothing more will arrive
            _log.debug("unsubscribe: %r", exc)
        finally:
            if self._dispatcher is not None:
                self._dispatcher.unregister(sid)

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
        await self._nats().publish(subject, payload, reply=reply, headers=headers)

    def send_commands(self, data: bytes, msgs: int, size: int) -> bool:
        """Loop thread, fast paths only: pre-formatted protocol lines carrying
        ``msgs`` messages of ``size`` payload bytes in all."""
        nc = self.nc
        if nc is None or not send_raw(nc, data):
            return False
        stats = nc.stats  # what nats-py counts for its own publishes, so Client.stats stays true
        stats["out_msgs"] += msgs
        stats["out_bytes"] += size
        return True

    async def request(
        self, subject: str, data: bytes, timeout: float, headers: Optional[Dict[str, str]] = None
    ) -> Any:
        """Loop thread: one request/reply; a permission violation on ``subject``
        (or on the reply inbox) fails it at once with PermissionDeniedError."""
        nc = self._nats()
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
            _log.debug("round trip: %r", exc)
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
            _log.debug("flush: %r", exc)

    async def aflush(self, timeout: float) -> None:
        await self.send_batched()
        await self._nats().flush(timeout=timeout)  # type: ignore[arg-type]  # nats-py says int; any number works

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
                    _log.debug("error while closing: %r", exc)
        finally:
            self.closed = True
            self.loop_thread.stop(timeout=max(deadline - time.monotonic(), 0.5))
            self.outbox.drop_unsent()
            if pub is not None:
                pub.fail_all(errors.ConnectionClosedError("connection closed before the publish was acknowledged"))
            for res in resources:  # anything that slipped through waits no more
                res.connection_closing(error)
            if self._cb_thread is not None:
                self._cb_thread.stop()
            self._closed_event.set()

    async def _aclose(self, resources: List[Resource], timeout: float, drain: bool) -> None:
        tasks = [asyncio.ensure_future(r.connection_shutdown()) for r in resources]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout / 2)
        nc = self._nats()
        try:
            self.outbox.seal()
            await self.send_batched()
        finally:
            if not nc.is_closed:
                if drain:
                    try:
                        await asyncio.wait_for(nc.drain(), timeout / 2)
                    except Exception as exc:
                        _log.debug("drain: %r", exc)
                if not nc.is_closed:
                    await nc.close()

    def close_at_exit(self) -> None:
        self.close(timeout=1.5)


ACK_CONFIRM_TIMEOUT = 2.0  # at most this long for the server to confirm queued acks
RECENT_ACKS = 0.5  # acks sent this recently are settled by a round trip before a pull or API call


def _consumer_of(ack_subject: str) -> str:
    """The stream.consumer part of a ``$JS.ACK`` subject (v1 or v2)."""
    tokens = ack_subject.split(".")
    return ".".join(tokens[2:4] if len(tokens) == 9 else tokens[4:6])


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


class _InsecureServer(Exception):
    """TLS was asked for; the server offered a plain connection."""


def _most_specific(attempts: List[BaseException]) -> BaseException:
    """Of several failed attempts, one that names a cause a user can act on."""
    for exc in attempts:
        if describe_connect_error(exc) not in ("timed out", "connection refused"):
            return exc
    return attempts[-1]


def describe_connect_error(exc: Optional[BaseException]) -> str:
    """A short, secret-free reason for a failed connection attempt."""
    import socket
    import ssl

    if exc is None:
        return "timed out"
    if isinstance(exc, _InsecureServer):
        return "TLS error: secure connection not available (the server does not offer TLS)"
    seen: Set[int] = set()
    cur: Optional[BaseException] = exc
    while cur is not None and id(cur) not in seen:  # the most specific cause
        seen.add(id(cur))
        if isinstance(cur, _nerr.AuthorizationError) or "authorization violation" in str(cur).lower():
            return "authorization violation"
        if isinstance(cur, ssl.SSLCertVerificationError):
            return f"TLS certificate error: {cur.verify_message or cur.reason}"
        if isinstance(cur, ssl.SSLError):
            return f"TLS error: {cur.reason or cur}"
        if isinstance(cur, socket.gaierror):
            return f"name not resolved ({cur.strerror})"
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cur, (asyncio.TimeoutError, TimeoutError)):
            return "timed out"
        if isinstance(cur, OSError) and cur.strerror:
            return cur.strerror.lower()
        cur = cur.__cause__ or cur.__context__
    return type(exc).__name__


def _log_send_failure(task: "asyncio.Task[Any]") -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.debug("send failed: %r", task.exception())


class _CallbackThread:
    """Runs user connection callbacks off the loop thread, in order.

    Under gevent it is a greenlet of the hub that made it; the loop thread
    (a real OS thread) hands it items through that hub's thread-safe queue.
    """

    def __init__(self, name: str) -> None:
        self._queue: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._hub: Any = None
        if gevent_patched():
            import gevent

            self._hub = gevent.get_hub()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], args: Any) -> None:
        self._put((fn, args))

    def stop(self) -> None:
        self._put(None)

    def _put(self, item: Any) -> None:
        hub = self._hub
        if hub is None or threading.get_ident() == getattr(hub, "thread_ident", None):
            self._queue.put(item)
        else:
            hub.loop.run_callback_threadsafe(self._queue.put, item)

    def _main(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                _log.exception("connection callback raised")
