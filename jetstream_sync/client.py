"""connect() and Client: a blocking, thread-safe face on one nats-py connection."""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import threading
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

import nats.errors as _nerr
from nats.aio.client import Client as _NatsClient

from . import errors
from ._loop import LoopThread, register_exit_hook
from ._wire import Dispatcher
from .message import AckOutbox, Msg

__all__ = ["connect", "Client", "Subscription"]

_log = logging.getLogger("jetstream_sync")

_EVENTS = ("disconnected", "reconnected", "closed")
_USER_CALLBACKS = ("error_cb", "disconnected_cb", "closed_cb", "discovered_server_cb", "reconnected_cb")
_NATS_OPTIONS = frozenset(inspect.signature(_NatsClient.connect).parameters) - {"self", "servers"}
# Our own connect() options, not passed to nats-py.
_OWN_OPTIONS = frozenset({"retry_on_failed_connect"})


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
    default) and raises :class:`NoServersError`.
    """
    client = Client()
    try:
        client._connect(servers, options)
    except BaseException:
        client._lt.stop(timeout=1.0)
        raise
    return client


def translate(exc: BaseException) -> BaseException:
    """Map a nats-py exception to this library's hierarchy."""
    if isinstance(exc, errors.JetStreamError):
        return exc
    if isinstance(exc, (_nerr.ConnectionClosedError, _nerr.ConnectionDrainingError)):
        return errors.ConnectionClosedError(str(exc) or "connection closed")
    if isinstance(exc, _nerr.NoRespondersError):
        return errors.NoRespondersError("no responders available for request")
    if isinstance(exc, (_nerr.TimeoutError, asyncio.TimeoutError)):
        return errors.TimeoutError(str(exc) or "timed out")
    if isinstance(exc, _nerr.NoServersError):
        return errors.NoServersError(str(exc) or "no servers available for connection")
    if isinstance(exc, (_nerr.BadSubjectError, _nerr.MaxPayloadError, _nerr.BadHeaderError)):
        return errors.InvalidOptionError(str(exc) or exc.__class__.__name__)
    if isinstance(exc, _nerr.Error):
        return errors.JetStreamError(str(exc) or exc.__class__.__name__)
    return exc


class Client:
    """A NATS connection usable from any number of threads.

    Create it with :func:`connect`. Every method blocks the calling thread
    only; the connection itself is driven by a background loop thread.
    """

    def __init__(self) -> None:
        self._lt = LoopThread("jetstream-sync")
        self._nc: _NatsClient = None  # type: ignore[assignment]  # set on the loop in _connect
        # Queues of acks and publishes sent in bursts; flush/drain/close send them all.
        self._batchers: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._closed = False
        self._closing = False
        self._close_lock = threading.Lock()
        # Live pull receivers: close() stops them first so their buffers are NAK'd.
        self._receivers: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._outbox = AckOutbox(self)
        self._listeners: Dict[str, List[Callable[[], None]]] = {e: [] for e in _EVENTS}
        self._user_cbs: Dict[str, Callable[..., Any]] = {}
        self._cb_thread: Optional[_CallbackThread] = None
        self._dispatcher: Optional[Dispatcher] = None
        self._wire = False  # nats-py internals usable for the fast paths

    # -- connection -----------------------------------------------------------

    def _connect(self, servers: Union[str, List[str]], options: Dict[str, Any]) -> None:
        unknown = set(options) - _NATS_OPTIONS - _OWN_OPTIONS
        if unknown:
            raise errors.InvalidOptionError(f"unknown connect option(s): {', '.join(sorted(unknown))}")
        retry = bool(options.pop("retry_on_failed_connect", False))
        for name in _USER_CALLBACKS:
            cb = options.pop(name, None)
            if cb is not None:
                if not callable(cb):
                    raise errors.InvalidOptionError(f"{name} must be callable")
                self._user_cbs[name] = cb
        server_list = [servers] if isinstance(servers, str) else list(servers)
        deadline = None
        if not retry:
            deadline = float(options.get("connect_timeout", 2)) * max(1, len(server_list)) + 1.0
        self._lt.run(self._aconnect(server_list, options, deadline))
        register_exit_hook(self)

    async def _aconnect(self, servers: List[str], options: Dict[str, Any], deadline: Optional[float]) -> None:
        nc = _NatsClient()
        self._nc = nc
        self._dispatcher = Dispatcher(nc)  # before connect: its parser reads from the start
        self._wire = self._dispatcher.enabled
        cbs = dict(
            error_cb=self._on_error,
            disconnected_cb=self._event_cb("disconnected"),
            reconnected_cb=self._event_cb("reconnected"),
            closed_cb=self._event_cb("closed"),
        )
        if "discovered_server_cb" in self._user_cbs:
            cbs["discovered_server_cb"] = self._event_cb("discovered_server")
        try:
            if deadline is None:
                await nc.connect(servers, **options, **cbs)
            else:
                await asyncio.wait_for(nc.connect(servers, **options, **cbs), deadline)
        except BaseException as exc:
            try:
                await nc.close()
            except Exception:
                pass
            if isinstance(exc, (asyncio.TimeoutError, OSError, _nerr.NoServersError)):
                raise errors.NoServersError(f"could not connect to any of {servers}: {exc!r}") from None
            raise translate(exc) from None

    def _event_cb(self, event: str) -> Callable[[], Any]:
        async def fire() -> None:
            for listener in list(self._listeners.get(event, ())):
                try:
                    listener()
                except Exception:
                    _log.exception("jetstream_sync: %s listener failed", event)
            await self._dispatch_user(f"{event}_cb")

        return fire

    async def _on_error(self, exc: Exception) -> None:
        _log.debug("nats connection error: %r", exc)
        await self._dispatch_user("error_cb", translate(exc))

    async def _dispatch_user(self, name: str, *args: Any) -> None:
        cb = self._user_cbs.get(name)
        if cb is None:
            return
        if inspect.iscoroutinefunction(cb):
            try:
                await cb(*args)
            except Exception:
                _log.exception("jetstream_sync: %s raised", name)
            return
        if self._cb_thread is None:
            self._cb_thread = _CallbackThread(f"{self._lt.name}-callbacks")
        self._cb_thread.submit(cb, args)

    def _add_listener(self, event: str, fn: Callable[[], None]) -> Callable[[], None]:
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

    # -- state ----------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return not self._closed and self._nc is not None and self._nc.is_connected

    @property
    def is_closed(self) -> bool:
        return self._closed or self._nc is None or self._nc.is_closed

    @property
    def is_reconnecting(self) -> bool:
        return self._nc is not None and self._nc.is_reconnecting

    @property
    def connected_url(self) -> Optional[str]:
        url = self._nc.connected_url if self._nc is not None else None
        return url.geturl() if url is not None else None

    @property
    def max_payload(self) -> int:
        return self._nc.max_payload

    @property
    def stats(self) -> Dict[str, int]:
        """nats-py connection counters plus ``ack_errors`` (acks that could not be sent)."""
        out = dict(self._nc.stats) if self._nc is not None else {}
        out["ack_errors"] = self._outbox.errors
        return out

    @property
    def async_client(self) -> _NatsClient:
        """The underlying nats-py client; only touch it on the loop thread."""
        return self._nc

    # -- calls --------------------------------------------------------------

    def _run(self, coro: Any, timeout: Optional[float]) -> Any:
        """Run a coroutine on the loop, mapping nats-py errors to ours."""
        try:
            return self._lt.run(coro, timeout)
        except errors.JetStreamError:
            raise
        except (_nerr.Error, asyncio.TimeoutError) as exc:
            raise translate(exc) from None

    def publish(
        self,
        subject: str,
        data: bytes = b"",
        *,
        reply: str = "",
        headers: Optional[Dict[str, str]] = None,
    ) -> None:
        """Publish a core NATS message (no JetStream acknowledgement)."""
        self._check_open()
        self._run(self._nc.publish(subject, _as_bytes(data), reply=reply, headers=headers), 30.0)

    def request(
        self,
        subject: str,
        data: bytes = b"",
        *,
        timeout: float = 1.0,
        headers: Optional[Dict[str, str]] = None,
    ) -> Msg:
        """Send a request and block up to ``timeout`` seconds for the reply.

        Raises :class:`TimeoutError` when no reply came and
        :class:`NoRespondersError` when nobody is subscribed.
        """
        self._check_open()
        _check_timeout(timeout)
        return self._run(self._arequest(subject, _as_bytes(data), timeout, headers), timeout + 1.0)

    async def _arequest(self, subject: str, data: bytes, timeout: float, headers: Optional[Dict[str, str]]) -> Msg:
        m = await self._nc.request(subject, data, timeout=timeout, headers=headers)
        return Msg(m.subject, m.reply, m.data, m.headers, self)

    def subscribe(self, subject: str, queue: str = "") -> "Subscription":
        """Subscribe to a core NATS subject; read with ``next_msg()`` or iterate."""
        self._check_open()
        sub = Subscription(self)
        sub._sub = self._run(self._nc.subscribe(subject, queue=queue, cb=sub._on_msg), 10.0)
        return sub

    def flush(self, timeout: float = 5.0) -> None:
        """Send everything queued (acks included) and wait for the server's PONG."""
        self._check_open()
        _check_timeout(timeout)
        self._run(self._aflush(timeout), timeout + 1.0)

    async def _send_batched(self) -> None:
        for batcher in list(self._batchers):
            await batcher.send_queued()

    async def _aflush(self, timeout: float) -> None:
        await self._send_batched()
        await self._nc.flush(timeout=timeout)

    def jetstream(self, *, domain: Optional[str] = None, api_prefix: Optional[str] = None, timeout: float = 5.0) -> Any:
        """A :class:`JetStream` context on this connection."""
        from .jetstream import JetStream

        return JetStream(self, domain=domain, api_prefix=api_prefix, timeout=timeout)

    # -- shutdown -------------------------------------------------------------

    def drain(self, timeout: float = 30.0) -> None:
        """Stop subscriptions gracefully, send everything queued, then close.

        Pull contexts are stopped (their unread buffers NAK'd) first."""
        if self._closed or self._lt._forked:
            self.close()
            return
        for receiver in list(self._receivers):
            receiver.stop(errors.ConnectionClosedError("the client was drained"))
        try:
            self._run(self._adrain(), timeout)
        finally:
            self.close()

    async def _adrain(self) -> None:
        tasks = [r.engine.shutdown("stop") for r in list(self._receivers) if r.engine is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        await self._send_batched()
        if not self._nc.is_closed:
            await self._nc.drain()

    def close(self, timeout: float = 5.0) -> None:
        """Flush queued acks, close the connection and stop the loop thread. Idempotent."""
        with self._close_lock:
            if self._closing:
                return
            self._closing = True
        try:
            if self._nc is not None and self._lt.started and not self._lt._forked and not self._lt.in_loop_thread():
                for batcher in list(self._batchers):  # publish_async: let its acks arrive
                    if hasattr(batcher, "wait_complete"):
                        batcher.wait_complete(timeout / 2)
                receivers = list(self._receivers)
                for receiver in receivers:  # NAK what was never handed out
                    receiver.stop(errors.ConnectionClosedError("the client was closed"))
                try:
                    self._lt.run(self._aclose(receivers, timeout), timeout)
                except Exception as exc:
                    _log.debug("jetstream_sync: error while closing: %r", exc)
        finally:
            self._closed = True
            self._lt.stop(timeout=timeout)
            if self._cb_thread is not None:
                self._cb_thread.stop()

    async def _aclose(self, receivers: List[Any], timeout: float) -> None:
        tasks = [r.engine.shutdown("stop") for r in receivers if r.engine is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout / 2)
        try:
            await self._send_batched()
        finally:
            if not self._nc.is_closed:
                await self._nc.close()

    def _close_at_exit(self) -> None:
        self.close(timeout=1.5)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise errors.ConnectionClosedError("the client is closed")


class Subscription:
    """A core NATS subscription read from user threads."""

    _END = object()

    def __init__(self, client: Client) -> None:
        self._client = client
        self._queue: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._sub: Any = None
        self._done = False

    async def _on_msg(self, m: Any) -> None:
        self._queue.put(Msg(m.subject, m.reply, m.data, m.headers, self._client))

    def next_msg(self, timeout: Optional[float] = 1.0) -> Msg:
        """The next message; raises TimeoutError after ``timeout`` seconds."""
        if self._done:
            raise errors.ConnectionClosedError("subscription is closed")
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise errors.TimeoutError("no message within %.3fs" % timeout) from None
        if item is self._END:
            self._done = True
            raise errors.ConnectionClosedError("subscription is closed")
        return item  # type: ignore[no-any-return]

    def pending(self) -> int:
        """Messages received and not yet read."""
        return self._queue.qsize()

    def __iter__(self) -> Iterator[Msg]:
        while True:
            try:
                yield self.next_msg(timeout=None)
            except errors.ConnectionClosedError:
                return

    def unsubscribe(self) -> None:
        """Remove interest; messages already received stay readable."""
        if self._sub is None or self._done:
            return
        if not self._client._closed:
            try:
                self._client._run(self._sub.unsubscribe(), 5.0)
            except errors.ConnectionClosedError:
                pass
        self._queue.put(self._END)


class _CallbackThread:
    """Runs user connection callbacks off the loop thread, in order."""

    def __init__(self, name: str) -> None:
        self._queue: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], args: Any) -> None:
        self._queue.put((fn, args))

    def stop(self) -> None:
        self._queue.put(None)

    def _main(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                _log.exception("jetstream_sync: connection callback raised")


def _as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        return data.encode()
    raise errors.InvalidOptionError(f"data must be bytes or str, not {type(data).__name__}")


def _check_timeout(timeout: Any) -> None:
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise errors.InvalidOptionError(f"timeout must be a positive number of seconds, got {timeout!r}")
