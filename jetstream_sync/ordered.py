"""OrderedConsumer: read a stream in order, exactly once, with no acks,
surviving consumer deletion, missing heartbeats and reconnects."""

from __future__ import annotations

import datetime
import functools
import time
from typing import Any, Callable, Dict, List, Optional, TypeVar, Union

from . import errors, options
from ._core.jsapi import JsApi
from ._engines.ordered import OrderedFetchEngine, OrderedPullEngine, OrderedReceiver, OrderedState
from ._engines.receiver import Receiver
from .contexts import ConsumeContext, FetchResult, MessagesContext
from ._core.message import Msg
from .models import ConsumerConfig, ConsumerInfo, DeliverPolicy, ReplayPolicy
from .options import build_config, consume_options_from, fetch_options, validate_name

__all__ = ["OrderedConsumer"]

ErrorHandler = Callable[[BaseException], Any]
_R = TypeVar("_R")
DEFAULT_INACTIVE_THRESHOLD = 300.0  # seconds, as nats.go
_RECREATE_PAUSE = 0.1  # seconds between next()'s attempts to create a consumer
# Failures of next()'s consumer creation that waiting cannot mend.
_GIVE_UP = (errors.NotFoundError, errors.ConnectionClosedError, errors.PermissionDeniedError, errors.OrderedConsumerError)


class OrderedConsumer:
    """An ordered view of a stream (nats.go's ``OrderedConsumer``).

    Nothing is created on the server until the first read. Each read —
    :meth:`messages`, :meth:`consume`, :meth:`fetch`, :meth:`next` — hands
    out stream messages in stream-sequence order, each exactly once across
    reads, with no acks needed. Behind it is an ephemeral, memory-stored,
    one-replica AckNone consumer named ``<name_prefix>_<serial>``, recreated
    from the next stream sequence whenever the sequence could break.

    One mode per ordered consumer: either fetch()/fetch_no_wait()/next() or
    messages()/consume(); and one read open at a time
    (:class:`OrderedConsumerError` otherwise).
    """

    def __init__(
        self,
        api: JsApi,
        stream: str,
        *,
        filter_subjects: Optional[List[str]] = None,
        deliver_policy: Union[str, DeliverPolicy, None] = None,
        opt_start_seq: Optional[int] = None,
        opt_start_time: Optional[datetime.datetime] = None,
        replay_policy: Union[str, ReplayPolicy, None] = None,
        inactive_threshold: Optional[float] = None,
        headers_only: bool = False,
        max_reset_attempts: Optional[int] = None,
        name_prefix: Optional[str] = None,
        metadata: Optional[Dict[str, str]] = None,
    ) -> None:
        validate_name("stream", stream)
        if filter_subjects is not None and isinstance(filter_subjects, str):
            filter_subjects = [filter_subjects]
        options.subjects_sequence("filter_subjects", filter_subjects)
        options.flag("headers_only", headers_only)
        if max_reset_attempts is not None:
            options.at_least("max_reset_attempts", max_reset_attempts, 0)
        prefix = api.connection.new_inbox().rsplit(".", 1)[-1] if name_prefix is None else name_prefix
        validate_name("name_prefix", prefix)
        base = build_config(
            ConsumerConfig,
            None,
            dict(
                filter_subjects=list(filter_subjects) if filter_subjects else None,
                deliver_policy=deliver_policy,
                opt_start_seq=opt_start_seq,
                opt_start_time=options.opt_start_time(opt_start_time),
                replay_policy=replay_policy,
                inactive_threshold=DEFAULT_INACTIVE_THRESHOLD if inactive_threshold is None else inactive_threshold,
                headers_only=headers_only or None,
                metadata=metadata,
            ),
        )
        options.ordered_start(base)
        self._js = api
        self._conn = api.connection
        self._conn.check()  # made without I/O: a closed or inherited client says so now, not at the first read
        self.stream_name = stream
        self._state = OrderedState(api, stream, base, prefix, max_reset_attempts or 0)

    def __repr__(self) -> str:
        return f"<OrderedConsumer {self.stream_name!r}/{self.name!r}>"

    @property
    def name(self) -> Optional[str]:
        """The current server consumer's name (None before the first read)."""
        return self._state.name

    @property
    def cached_info(self) -> ConsumerInfo:
        """Info of the current server consumer, as created."""
        info = self._state.info
        if info is None:
            raise errors.OrderedConsumerError("the ordered consumer has not created a server consumer yet")
        return info

    def info(self) -> ConsumerInfo:
        """Ask the server about the current server consumer."""
        name = self._state.name
        if name is None:
            raise errors.OrderedConsumerError("the ordered consumer has no server consumer now")
        self._state.info = self._js.consumer_info(self.stream_name, name)
        return self._state.info

    def close(self) -> None:
        """Delete the server consumer now instead of after
        ``inactive_threshold`` (fetch()/next() keep it between calls). The
        ordered consumer stays usable: the next read creates a new one after
        the last message handed out. Raises OrderedConsumerError while a read
        is open. Does nothing once the client is closed (the server removes
        the consumer after ``inactive_threshold``) or in a forked child."""
        if self._conn.closing or self._conn.inherited:
            return
        state = self._state
        with state.lock:
            active = state.active
            if active is not None and not _ended(active):
                raise errors.OrderedConsumerError("close(): a read is still open; stop or finish it first")
            name = state.name
            if name is None:
                return
            self._conn.run(state.forget(name), self._js.timeout + 1.0)
        try:
            self._js.delete_consumer(self.stream_name, name)
        except errors.NotFoundError:
            pass  # gone already (deleted, or lapsed)

    def __enter__(self) -> "OrderedConsumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- reading ------------------------------------------------------------------

    def messages(self, *, error_handler: Optional[ErrorHandler] = None, **opts: Any) -> MessagesContext:
        """A continuous, pre-buffered ordered read; options as Consumer.messages()."""
        o = consume_options_from(opts)
        options.handler("error_handler", error_handler, optional=True)
        return self._open("consume", lambda target, engine: MessagesContext(
            self._conn, target, o, error_handler, engine, OrderedReceiver))

    def consume(
        self, handler: Callable[[Msg], Any], *, error_handler: Optional[ErrorHandler] = None, **opts: Any
    ) -> ConsumeContext:
        """Call ``handler(msg)`` for every message, in order, on a worker thread."""
        o = consume_options_from(opts)
        options.handler("consume() handler", handler)
        options.handler("error_handler", error_handler, optional=True)
        return self._open("consume", lambda target, engine: ConsumeContext(
            self._conn, target, handler, o, error_handler, engine, OrderedReceiver))

    def fetch(
        self,
        max_messages: Optional[int] = None,
        *,
        max_bytes: Optional[int] = None,
        expires: float = 30.0,
        idle_heartbeat: Optional[float] = None,
    ) -> FetchResult:
        """One pull of up to ``max_messages`` (or ``max_bytes``), in order."""
        o = fetch_options(max_messages, max_bytes, expires, idle_heartbeat)
        return self._open("fetch", lambda target, engine: FetchResult(self._conn, target, o, engine, OrderedReceiver))

    def _fetch_one(self, expires: float) -> FetchResult:
        """next()'s pull: creating the server consumer counts against its timeout too."""
        o = fetch_options(1, None, expires, None)
        return self._open(
            "fetch", lambda target, engine: FetchResult(self._conn, target, o, engine, OrderedReceiver), bound=expires
        )

    def fetch_no_wait(
        self, max_messages: Optional[int] = None, *, max_bytes: Optional[int] = None, expires: Optional[float] = None
    ) -> FetchResult:
        """One pull of what is available now, in order; ``expires`` as
        :meth:`Consumer.fetch_no_wait`."""
        o = fetch_options(max_messages, max_bytes, expires, None, no_wait=True)
        return self._open("fetch", lambda target, engine: FetchResult(self._conn, target, o, engine, OrderedReceiver))

    def next(self, timeout: float = 30.0) -> Msg:
        """The next message in order, waiting up to ``timeout`` seconds; raises
        :class:`jetstream_sync.TimeoutError` when none came. A consumer lost
        meanwhile is recreated and the wait goes on."""
        t = options.duration("timeout", timeout)
        deadline = time.monotonic() + t
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._conn.timed_out(f"no message from ordered consumer on {self.stream_name} within {timeout}s")
            try:
                result = self._fetch_one(left)
            except _GIVE_UP:
                raise
            except (errors.TimeoutError, errors.NoRespondersError, errors.APIError) as exc:
                # Creating the consumer failed for now (a server restarting,
                # JetStream not ready, no stream leader yet): again while time is left.
                if isinstance(exc, errors.APIError) and exc.code < 500:
                    raise
                time.sleep(min(_RECREATE_PAUSE, max(deadline - time.monotonic(), 0.0)))
                continue
            it = iter(result)
            try:
                return next(it)
            except StopIteration:
                continue
            except (errors.NoHeartbeatError, errors.NoRespondersError):
                continue  # the consumer was lost: the next fetch recreates it
            finally:
                it.close()

    def _open(self, mode: str, make: Callable[[Any, Callable[..., Any]], _R], bound: Optional[float] = None) -> _R:
        """Start a read in ``mode`` on a server consumer positioned right after
        the last message handed out (reused only after a fetch that ended
        cleanly). Creating it waits at most ``bound`` seconds (default: the
        JetStream timeout); a create cut short is retried by the next read."""
        state = self._state
        with state.lock:
            if state.mode is not None and state.mode != mode:
                used = "fetch()/next()" if state.mode == "fetch" else "messages()/consume()"
                raise errors.OrderedConsumerError(f"this ordered consumer is used with {used}; create another for the other mode")
            active = state.active
            if active is not None and not _ended(active):
                raise errors.OrderedConsumerError("this ordered consumer already has a read open; stop or finish it first")
            reuse = mode == "fetch" and state.name is not None and state.pull_done and state.cursor == state.sseq
            if reuse:
                target = state.target()
            else:
                cursor = state.cursor
                start = cursor + 1 if cursor or state.last_taken is not None else 0
                wait = self._js.timeout + 1.0
                target = self._conn.run(state.create(start), wait if bound is None else min(bound, wait))
            state.mode = mode
            state.pull_done = False
            engine_cls = OrderedFetchEngine if mode == "fetch" else OrderedPullEngine
            return make(target, functools.partial(_engine, engine_cls, state))


def _engine(cls: Any, state: OrderedState, conn: Any, receiver: OrderedReceiver, target: Any, opts: Any) -> Any:
    receiver.ordered = state
    state.active = receiver
    return cls(conn, receiver, target, opts, state)


def _ended(receiver: Receiver) -> bool:
    """The previous read is over: its user saw the end, or it was stopped
    (a pull that is complete on the server may still hold messages nobody
    took: that read is still open). Then its engine finishes soon (bounded
    wait) and no longer touches the state the next read uses."""
    if receiver.user_done.is_set() or receiver.state == "stopped":
        return receiver.closed_event.wait(receiver.stop_wait)
    return False
