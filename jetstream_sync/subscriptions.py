"""The subscriptions that ``js.subscribe()`` and ``js.pull_subscribe()``
return (nats-py's shapes, blocking): PullSubscription and PushSubscription.
The workflow that makes them is ``subscribe.py``."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterator, List, Optional, Union

from . import errors, options
from ._core.jsapi import JsApi
from ._core.message import Msg
from ._engines.protocol import StatusKind, classify_status
from .consumer import Consumer
from .contexts import ConsumeContext, MessagesContext
from .models import AckPolicy, ConsumerInfo
from .options import DEFAULT, DefaultType
from ._core.logfields import log_fields

__all__ = ["PullSubscription", "PushSubscription", "auto_ack"]

_log = logging.getLogger("jetstream_sync.subscribe")  # the logger name users configure, kept from before the split
_RETRY_START = 0.05  # seconds before re-pulling after a 409 limit warning, doubling
_RETRY_MAX = 0.5
Handler = Callable[[Msg], Any]


def _retryable(exc: BaseException) -> bool:
    """A pull refused for now, not for good (409 limit warnings, a dropped pull)."""
    if isinstance(exc, errors.NoHeartbeatError):
        return True
    if type(exc) is not errors.PullStatusError:  # ConsumerDeleted, PushBased, BadRequest …
        return False
    return classify_status(str(exc.status), exc.description) is StatusKind.LIMIT


class _Subscription:
    """What pull and push subscriptions share: the consumer, and deleting it
    on unsubscribe when this subscription created it (ADR-15)."""

    def __init__(self, js: JsApi, stream: str, consumer: str, subject: str, created: bool) -> None:
        self._js = js
        self.stream = stream
        self._consumer = consumer
        self.filter_subject = subject  # the subject subscribed to ("" when bound by name)
        self.subject = subject
        self._created = created  # still to delete (cleared once deleted)
        self._lock = threading.Lock()
        self._closed = False

    @property
    def consumer(self) -> str:
        """The consumer's name."""
        return self._consumer

    def consumer_info(self) -> ConsumerInfo:
        return self._js.consumer_info(self.stream, self.consumer)

    @property
    def is_closed(self) -> bool:
        return self._closed

    def _close(self) -> bool:
        """Mark closed; False if it already was. A consumer whose deletion
        failed before (server unreachable) is retried instead of refusing."""
        with self._lock:
            if self._closed:
                if self._created:
                    self._delete_if_created()
                    return False
                raise errors.SubscriptionClosedError(f"the subscription on {self.subject!r} is already unsubscribed")
            self._closed = True
            return True

    def _check_open(self) -> None:
        if self._closed:
            raise errors.SubscriptionClosedError(f"the subscription on {self.subject!r} is unsubscribed")

    def _delete_if_created(self) -> None:
        conn = self._js.connection
        if not self._created or conn.closing or conn.inherited:
            return  # a closed client deletes nothing; a forked child touches nothing of the parent's
        try:
            self._js.delete_consumer(self.stream, self.consumer)
        except errors.NotFoundError:
            pass  # gone already (an ephemeral that timed out, or deleted by hand)
        except errors.ConnectionClosedError:
            # The client closed meanwhile: as after a close, nothing is deleted
            # (an ephemeral goes with its inactive threshold).
            _log.debug("consumer %s/%s not deleted: the client closed", self.stream, self.consumer,
                       extra=log_fields(stream=self.stream, consumer=self.consumer))
        self._created = False

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._closed:
            self.unsubscribe()

    def unsubscribe(self) -> None:
        raise NotImplementedError


class PullSubscription(_Subscription):
    """A pull subscription (ADR-13): ``fetch(batch, timeout, heartbeat)``
    returns the messages that are there, waiting up to ``timeout`` for the first."""

    def __init__(self, js: JsApi, consumer: Consumer, subject: str, created: bool) -> None:
        super().__init__(js, consumer.stream_name, consumer.name, subject, created)
        self._cons = consumer

    def __repr__(self) -> str:
        return f"<PullSubscription {self.stream!r}/{self.consumer!r} subject={self.subject!r}>"

    def fetch(self, batch: int = 1, timeout: Optional[float] = 5.0, heartbeat: Optional[float] = None) -> List[Msg]:
        """Up to ``batch`` messages: those available now, else the first to
        arrive within ``timeout`` seconds with any that came with it. Raises
        :class:`jetstream_sync.TimeoutError` when none came (as nats-py)."""
        self._check_open()
        options.at_least("batch", batch, 1)
        t = options.duration("timeout", 5.0 if timeout is None else timeout)
        if heartbeat is not None:
            options.half_of_timeout(options.duration("heartbeat", heartbeat), t)
        # A no-wait pull first: what is there now comes back at once, and no
        # pull lingers on the server (ADR-13).
        msgs = list(self._cons.fetch_no_wait(batch))
        if msgs:
            return msgs
        deadline = time.monotonic() + t
        backoff = _RETRY_START
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._js.connection.timed_out(f"no message on {self.subject or self.stream!r} within {t}s")
            try:
                return self._wait_first(batch, left, heartbeat)
            except (errors.PullStatusError, errors.NoHeartbeatError) as exc:
                if not _retryable(exc):
                    raise
                # The server refused this pull for now (e.g. 409 Exceeded
                # MaxWaiting; with a heartbeat it drops it silently): try again
                # until the caller's timeout, as nats-py treats these as no message.
                time.sleep(min(backoff, max(deadline - time.monotonic(), 0.0)))
                backoff = min(backoff * 2, _RETRY_MAX)

    def _wait_first(self, batch: int, expires: float, heartbeat: Optional[float]) -> List[Msg]:
        """One pull: the first message to arrive and whatever came with it."""
        hb = heartbeat if heartbeat is None or heartbeat <= expires / 2 else None
        result = self._cons.fetch(batch, expires=expires, idle_heartbeat=hb)
        msgs: List[Msg] = []
        try:
            for msg in result:
                msgs.append(msg)
                msgs.extend(result.ready())
                break
        finally:
            result.close()  # what arrives after we returned goes back (NAK'd)
        if not msgs:
            raise self._js.connection.timed_out(f"no message on {self.subject or self.stream!r} within {expires:.3f}s")
        return msgs

    def unsubscribe(self) -> None:
        """End the subscription; a consumer it created is deleted."""
        if self._close():
            self._delete_if_created()

    def drain(self) -> None:
        """As :meth:`unsubscribe`: between fetches a pull subscription holds nothing."""
        self.unsubscribe()


class PushSubscription(_Subscription):
    """A push subscription (ADR-15), or an ordered one: read with
    :meth:`next_msg` or iteration, or give ``cb`` to have a worker thread
    call it (acking after it returns unless ``manual_ack``).

    ``subject`` is the consumer's deliver subject, which the messages arrive
    on (as nats-py's); ``filter_subject`` the subject given to subscribe().
    An ordered subscription is pull-based here and has no deliver subject:
    its ``subject`` is the subject given."""

    def __init__(
        self,
        js: JsApi,
        stream: str,
        consumer: str,
        subject: str,
        created: bool,
        ctx: "MessagesContext | ConsumeContext",
        queue: Optional[str],
        consumer_name: Callable[[], Optional[str]],
        caller: Optional["Caller"] = None,
        deliver_subject: str = "",
    ) -> None:
        super().__init__(js, stream, consumer, subject, created)
        self.subject = deliver_subject or subject
        self._ctx = ctx
        self.queue = queue
        self._consumer_name = consumer_name  # ordered: the name changes as it is recreated
        self._drained = False  # drain() began: what was received is still handed out
        self._caller = caller  # the callback's thread, with cb

    def __repr__(self) -> str:
        return f"<PushSubscription {self.stream!r}/{self.consumer!r} subject={self.subject!r}>"

    @property
    def consumer(self) -> str:
        """The current consumer's name (an ordered one changes as it is recreated; "" between two)."""
        return self._consumer_name() or ""

    def consumer_info(self) -> ConsumerInfo:
        name = self._consumer_name()
        if name is None:
            raise errors.SubscribeError("the ordered subscription has no server consumer right now")
        return self._js.consumer_info(self.stream, name)

    def _reader(self) -> MessagesContext:

        if not isinstance(self._ctx, MessagesContext):
            raise errors.SubscribeError("this subscription has a callback; it cannot be read with next_msg()")
        return self._ctx

    def next_msg(self, timeout: Optional[float] = 1.0) -> Msg:
        """The next message, waiting up to ``timeout`` seconds (None: no limit);
        raises :class:`jetstream_sync.TimeoutError` (nats-py's default is 1 s).
        After drain(), what was received before it is still handed out."""
        if not self._drained:
            self._check_open()
        try:
            return self._reader().next(timeout)
        except errors.ConsumerStoppedError:
            raise errors.SubscriptionClosedError(f"the subscription on {self.subject!r} was unsubscribed") from None

    def __iter__(self) -> Iterator[Msg]:
        return iter(self._reader())

    @property
    def messages(self) -> Iterator[Msg]:
        """Iterate the messages (nats-py's ``sub.messages``, blocking)."""
        return iter(self)

    @property
    def delivered(self) -> int:
        """Messages handed to the reader or callback so far."""
        return self._ctx.stats.delivered

    def unsubscribe(self) -> None:
        """Stop now (messages received and not handed out are NAK'd); a
        consumer this subscription created is deleted."""
        if self._close():
            self._ctx.stop()
            self._delete_if_created()

    def drain(self, timeout: Union[float, DefaultType] = DEFAULT) -> bool:
        """Hand over (or call back) everything already received, then end and
        delete a consumer this subscription created. Waits up to ``timeout``
        seconds (default: the JetStream timeout) for the end; False if it did
        not come. From the callback it returns False at once: the rest is
        called back after it returns, and the end is seen to in the background."""
        t = options.timeout_or_default("timeout", timeout, self._js.timeout)
        if self._js.connection.inherited:
            return True  # a forked child: the parent's subscription is the parent's to end
        if not self._close():
            return True
        self._drained = True
        self._ctx.drain()
        if self._caller is not None and threading.current_thread() is self._caller.thread:
            # Waiting here would hold up the very callbacks drain() waits for.
            threading.Thread(target=self._finish_drain_behind, args=(t,), name="jss-drain", daemon=True).start()
            return False
        return self._finish_drain(t)

    def _finish_drain_behind(self, t: float) -> None:
        """The end of a drain called from the callback: nobody waits for it, so
        what fails is logged (the consumer not deleted: a timeout, no JetStream)."""
        try:
            self._finish_drain(t)
        except errors.JetStreamError as exc:
            _log.warning("draining the subscription on %r: %s", self.subject, exc,
                         extra=log_fields(stream=self.stream, consumer=self.consumer))

    def _finish_drain(self, t: float) -> bool:

        done = self._ctx.wait(t) if isinstance(self._ctx, ConsumeContext) else self._ctx.wait_closed(t)
        if not done:
            self._ctx.stop()  # out of time: nothing more is handed out once this returns
        self._js.connection.acks_processed(t)  # the callbacks' auto-acks included
        self._delete_if_created()
        return done


class Caller:
    """Notes the thread that runs a subscription's callback."""

    def __init__(self) -> None:
        self.thread: Optional[threading.Thread] = None

    def wrap(self, handler: Handler) -> Handler:
        def called(msg: Msg) -> Any:
            self.thread = threading.current_thread()
            return handler(msg)

        return called


def auto_ack(handler: Handler) -> Handler:
    """nats-py's async-subscribe default: ack after the callback returns,
    unless it acked (or nak'd, term'd) the message itself."""

    def wrapped(msg: Msg) -> Any:
        result = handler(msg)
        if not msg.is_acked:
            try:
                msg.ack()
            except errors.MsgAlreadyAckedError:
                pass
        return result

    return wrapped


def acks_off(info: ConsumerInfo) -> bool:
    return info.config is not None and info.config.ack_policy in (AckPolicy.NONE, "none")


def delete_quietly(js: JsApi, stream: str, name: str) -> None:
    try:
        js.delete_consumer(stream, name)
    except errors.JetStreamError as exc:
        _log.debug("consumer %s/%s not deleted: %r", stream, name, exc, extra=log_fields(stream=stream, consumer=name))
