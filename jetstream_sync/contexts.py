"""The blocking faces of the engines: MessagesContext (iterator),
ConsumeContext (handler on a worker thread) — over a continuous pull or a
push consumer's deliveries — and FetchResult (one pull)."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Generator, List, Optional, Type

from . import errors, options
from ._engines.pull import FetchEngine, PullEngine, PullTarget
from ._engines.receiver import Exhausted, PullStats, Receiver
from ._core.message import Msg
from .options import FetchOptions
from ._core.logfields import message_fields

if TYPE_CHECKING:  # pragma: no cover
    from ._core.connection import Connection

__all__ = ["MessagesContext", "ConsumeContext", "FetchResult", "PullStats"]

_log = logging.getLogger(__name__)
ErrorHandler = Callable[[BaseException], Any]
# engine(conn, receiver, target, opts): the loop side of a context (PullEngine, PushEngine)
EngineFactory = Callable[["Connection", Receiver, Any, Any], Any]


def _start(conn: "Connection", receiver: Receiver, engine: Any, timeout: float) -> None:
    """Register the receiver (refused once the client is closing) and start
    its engine on the loop; a fetch pulls only after the acks queued before
    it were processed (a NAK'd message comes back to it)."""
    conn.register(receiver)
    try:
        conn.run(engine.start(), timeout, confirm_acks="naks" if isinstance(engine, FetchEngine) else "")
    except BaseException:
        receiver.stop()
        conn.unregister(receiver)
        raise


class _Context:
    """stop / drain / closed / stats, shared by MessagesContext and ConsumeContext."""

    _receiver: Receiver

    def _in_own_thread(self) -> bool:
        return False

    def stop(self) -> None:
        """End delivery now. Messages received but never handed out are NAK'd,
        so the server redelivers them at once (it counts them in the
        consumer's ``num_ack_pending`` until then). Idempotent, any thread.

        From a user thread it returns once the context is closed and the NAKs
        are written (bounded by the JetStream timeout); from a handler at once.
        """
        receiver = self._receiver
        receiver.stop()
        if not self._in_own_thread():
            receiver.wait_closed(receiver.stop_wait)

    def drain(self) -> None:
        """Send no more pulls, remove interest, hand over everything already
        received (all the server sent before it took in the unsubscribe; what
        an open pull would have delivered after, the server queues for
        immediate redelivery), then end. Idempotent, any thread."""
        self._receiver.drain()

    @property
    def stats(self) -> PullStats:
        """A snapshot of the counters."""
        return self._receiver.snapshot()

    @property
    def options(self) -> Any:
        """The validated options (ConsumeOptions; PushOptions for a push consumer)."""
        return self._receiver.engine.opts

    @property
    def subscribed(self) -> bool:
        """True until the engine has ended and removed its subscription."""
        return not self._receiver.closed_event.is_set()


class MessagesContext(_Context):
    """A continuous, pre-buffered pull (or a push consumer's deliveries)
    read by iteration or :meth:`next`.

    Iterate with ``for msg in ctx``: iteration ends after :meth:`stop` or when
    :meth:`drain` has handed everything over, and raises the terminal error
    (ConsumerDeletedError, ConsumerPushBasedError, BadRequestError,
    ConnectionClosedError) if one ends it. Transient problems (missing
    heartbeats, 409 warnings, leadership changes, reconnects) never end it:
    they are logged, counted in :attr:`stats` and passed to ``error_handler``.
    Any number of threads may share one context; each message goes to one.
    Leaving ``with consumer.messages() as ctx:`` stops it.
    """

    def __init__(
        self,
        conn: "Connection",
        target: Any,
        opts: Any,
        error_handler: Optional[ErrorHandler],
        engine: EngineFactory = PullEngine,
        receiver_cls: Type[Receiver] = Receiver,
    ) -> None:
        options.handler("error_handler", error_handler, optional=True)
        self._receiver = receiver_cls(conn, error_handler, target.api_timeout)
        _start(conn, self._receiver, engine(conn, self._receiver, target, opts), target.api_timeout)

    def __iter__(self) -> "MessagesContext":
        return self

    def __next__(self) -> Msg:
        try:
            return self._receiver.take(None)
        except Exhausted:
            raise StopIteration from None

    def next(self, timeout: Optional[float] = None) -> Msg:
        """The next message, waiting up to ``timeout`` seconds (None: no limit).

        Raises :class:`TimeoutError` when nothing came (the context stays
        usable), the terminal error that ended the context, or
        :class:`ConsumerStoppedError` once it is stopped or drained.
        """
        t = options.optional_timeout("timeout", timeout)
        try:
            return self._receiver.take(t)
        except Exhausted:
            raise errors.ConsumerStoppedError("the messages() context is stopped") from None

    @property
    def closed(self) -> bool:
        """True once the engine has ended (stopped, drained, or failed)."""
        return self._receiver.closed_event.is_set()

    def prefetch(self) -> None:
        """Pull now instead of at the first read (``next()``/iteration): the
        buffer fills while the caller does something else. Never waits."""
        self._receiver.prefetch()

    def wait_closed(self, timeout: Optional[float] = None) -> bool:
        """Block until :attr:`closed`; False on timeout."""
        t = options.optional_timeout("timeout", timeout)
        closed = self._receiver.closed_event
        self._receiver.check_wait("the context to close", ready=closed.is_set())
        return closed.wait(t)

    def __enter__(self) -> "MessagesContext":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        # Dropped without stop(): stop pulling and give the buffer back.
        try:
            receiver = self._receiver
        except AttributeError:
            return
        try:
            if receiver.state != "stopped" and not receiver.finished:
                receiver.stop()  # never waits: this may run on any thread, even the loop's
        except Exception:
            pass


class ConsumeContext(_Context):
    """``handler(msg)`` called for each message on a worker thread of its own.

    A handler that raises does not stop consumption: the exception goes to
    ``error_handler`` and, if the handler had not acked the message, the
    message is NAK'd so the server redelivers it at once (use ``term()`` in
    the handler for messages that can never succeed). Pending credit is
    returned when the handler returns, so a slow handler pulls no more than
    ``max_messages`` ahead. The handler and error handler may call
    :meth:`stop`, :meth:`drain` and :meth:`wait`.
    """

    def __init__(
        self,
        conn: "Connection",
        target: Any,
        handler: Callable[[Msg], Any],
        opts: Any,
        error_handler: Optional[ErrorHandler],
        engine: EngineFactory = PullEngine,
        receiver_cls: Type[Receiver] = Receiver,
    ) -> None:
        options.handler("consume() handler", handler)
        options.handler("error_handler", error_handler, optional=True)
        self._handler = handler
        self._conn = conn
        self._receiver = receiver_cls(conn, error_handler, target.api_timeout)
        self._receiver.explicit_credit = True  # credited when the handler returns
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"jetstream-sync-consume-{target.consumer}", daemon=True
        )
        self._receiver.worker = self._thread
        _start(conn, self._receiver, engine(conn, self._receiver, target, opts), target.api_timeout)
        self._thread.start()

    def _in_own_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _run(self) -> None:
        receiver = self._receiver
        try:
            receiver.serve(self._handler, self._handler_failed)
        except errors.JetStreamError as exc:  # the terminal error that ends consumption
            receiver.call_error_handler(exc)
        finally:
            self._done.set()
            receiver.mark_user_done()

    def _handler_failed(self, msg: Msg, exc: Exception) -> None:
        _log.warning("consume handler raised for %s", msg.subject, exc_info=exc, extra=message_fields(msg))
        if not msg.is_acked and msg.reply:
            try:
                msg.nak()
            except errors.JetStreamError:
                pass
        self._receiver.call_error_handler(exc)

    @property
    def closed(self) -> bool:
        """True once the worker has finished (after stop, drain or a terminal error)."""
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until :attr:`closed` (every in-flight handler returned) and the
        server has processed the handlers' acks; False on timeout. From the
        handler's own thread it does not block."""
        t = options.optional_timeout("timeout", timeout)
        self._receiver.check_wait("the handler to return", ready=self._done.is_set())
        if threading.current_thread() is self._thread:
            return self._done.is_set()
        deadline = None if t is None else time.monotonic() + t
        if not self._done.wait(t):
            return False
        # The engine's end too, so that stats (the NAKs of stop) are final.
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        if not self._receiver.wait_closed(left):
            return False
        # And the handlers' acks: once this returns, the consumer shows them to anyone.
        left = None if deadline is None else max(deadline - time.monotonic(), 0.001)
        self._conn.acks_processed(left)
        return True


class FetchResult:
    """The messages of one pull, iterable once; iteration blocks per message.

    Iteration ends when the pull is complete (batch filled, max_bytes reached,
    expired, or no messages for fetch_no_wait) and raises the pull's error if
    one ended it (ConsumerDeletedError, NoHeartbeatError, NoRespondersError
    …). Breaking out early NAKs what was received and not handed out.
    """

    def __init__(
        self,
        conn: "Connection",
        target: PullTarget,
        opts: FetchOptions,
        engine: EngineFactory = FetchEngine,
        receiver_cls: Type[Receiver] = Receiver,
    ) -> None:
        self._receiver = receiver_cls(conn, None, target.api_timeout)
        self.options = opts
        self._iterated = False
        _start(conn, self._receiver, engine(conn, self._receiver, target, opts), target.api_timeout)

    def __iter__(self) -> Generator[Msg, None, None]:  # a generator: callers may close() it
        if self._iterated:
            raise errors.InvalidOptionError("a fetch result can be iterated only once")
        self._iterated = True
        return self._messages()

    def _messages(self) -> Generator[Msg, None, None]:
        receiver = self._receiver
        try:
            while True:
                try:
                    yield receiver.take(None)
                except Exhausted:
                    return
        finally:
            self.close()

    def ready(self) -> List[Msg]:
        """The messages already received and not yet iterated, without waiting."""
        msgs: List[Msg] = []
        receiver = self._receiver
        while True:
            try:
                msgs.append(receiver.take(0.0))
            except (errors.TimeoutError, Exhausted):
                return msgs
            except errors.JetStreamError:
                if msgs:  # the pull's error is raised again on the next take
                    return msgs
                raise

    def close(self) -> None:
        """Give up on this pull: NAK anything received and not handed out."""
        self._receiver.stop()

    @property
    def stats(self) -> PullStats:
        return self._receiver.snapshot()

    def __enter__(self) -> "FetchResult":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
