"""Consumer: a handle on one pull consumer, and the ways to read from it;
BaseConsumer: what pull and push consumer handles share."""

from __future__ import annotations

import datetime
import functools
from typing import Any, Callable, Dict, Optional, Union

from . import options
from ._core.jsapi import JsApi
from ._engines.engine import PinId
from ._engines.pull import FetchEngine, PullTarget
from .contexts import ConsumeContext, FetchResult, MessagesContext
from ._core.message import Msg
from .models import AckPolicy, ConsumerInfo, ConsumerPauseResponse, ConsumerResetResponse
from .options import (
    CONSUME_OPTION_NAMES,
    PRIORITY_OPTION_NAMES,
    ConsumeOptions,
    FetchOptions,
    PriorityOptions,
    check_option_names,
    consume_options,
    fetch_options,
    priority_options,
)

__all__ = ["BaseConsumer", "Consumer", "PullConsumer"]

ErrorHandler = Callable[[BaseException], Any]


class BaseConsumer:
    """What pull and push consumer handles share. ``cached_info`` is the info
    from when the handle was made (or last ``info()``); ``info()`` asks the
    server again."""

    def __init__(self, api: JsApi, info: ConsumerInfo) -> None:
        self._js = api
        self._conn = api.connection
        self._info = info
        self.name: str = info.name
        self.stream_name: str = info.stream_name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.stream_name!r}/{self.name!r}>"

    @property
    def cached_info(self) -> ConsumerInfo:
        return self._info

    def info(self) -> ConsumerInfo:
        self._info = self._js.consumer_info(self.stream_name, self.name)
        return self._info

    def delete(self) -> None:
        self._js.delete_consumer(self.stream_name, self.name)

    def _ack_wait(self) -> Optional[float]:
        """Seconds the server waits for an ack; None when acks are off."""
        cfg = self._info.config
        if cfg is not None and cfg.ack_policy not in (AckPolicy.NONE, "none"):
            return cfg.ack_wait or 30.0  # the server's default
        return None

    def _info_subject(self) -> str:
        return f"{self._js.api_prefix}.CONSUMER.INFO.{self.stream_name}.{self.name}"

    # -- lifecycle ------------------------------------------------------------------

    def pause(self, until: Union[datetime.datetime, float]) -> ConsumerPauseResponse:
        """Pause delivery until ``until`` (an aware datetime, or seconds from
        now); pulls wait meanwhile (server 2.11+)."""
        return self._js.pause_consumer(self.stream_name, self.name, until)

    def resume(self) -> ConsumerPauseResponse:
        """Resume a paused consumer now (see :meth:`JetStream.resume_consumer`)."""
        return self._js.resume_consumer(self.stream_name, self.name)

    def reset(self, seq: Optional[int] = None) -> ConsumerResetResponse:
        """Move the consumer back to its ack floor, or to stream sequence
        ``seq``: delivery restarts there (server 2.14+). Updates ``cached_info``."""
        resp = self._js.reset_consumer(self.stream_name, self.name, seq)
        self._info = resp.info
        return resp


class Consumer(BaseConsumer):
    """A pull consumer of a stream (``PullConsumer`` is the same class)."""

    def __init__(self, api: JsApi, info: ConsumerInfo) -> None:
        super().__init__(api, info)
        self._fetch_pin = PinId()  # pinned_client: the pin this handle's fetches hold

    def _fetch(self, opts: FetchOptions) -> FetchResult:
        return FetchResult(self._conn, self._target(), opts, functools.partial(FetchEngine, pin=self._fetch_pin))

    def _target(self) -> PullTarget:
        """What the engines pull from, with the AckWait they must respect."""
        pull_subject = f"{self._js.api_prefix}.CONSUMER.MSG.NEXT.{self.stream_name}.{self.name}"
        options.control_line(pull_subject, reply_room=self._conn.reply_room)  # the pull, to a reply inbox
        return PullTarget(
            stream=self.stream_name,
            consumer=self.name,
            pull_subject=pull_subject,
            info_subject=self._info_subject(),
            ack_wait=self._ack_wait(),
            api_timeout=self._js.timeout,
        )

    # -- consuming ----------------------------------------------------------------

    def fetch(
        self,
        max_messages: Optional[int] = None,
        *,
        max_bytes: Optional[int] = None,
        expires: float = 30.0,
        idle_heartbeat: Optional[float] = None,
        **priority: Any,
    ) -> FetchResult:
        """One pull of up to ``max_messages`` messages and/or ``max_bytes``
        bytes (whichever is reached first), waiting up to ``expires`` seconds.

        Returns at once; iterating blocks per message until the pull is
        complete. ``idle_heartbeat`` defaults to 5 s when ``expires`` >= 10 s.
        A fetch that gets nothing is simply empty. Priority groups (ADR-42):
        ``group``, ``min_pending``, ``min_ack_pending``, ``priority``; see
        :meth:`messages`. With pinned_client, a fetch whose pin went stale
        ends with :class:`PinIdMismatchError`; fetch again.
        """
        prio = self._priority(priority)
        opts = fetch_options(max_messages, max_bytes, expires, idle_heartbeat, priority=prio)
        return self._fetch(opts)

    def fetch_no_wait(
        self,
        max_messages: Optional[int] = None,
        *,
        max_bytes: Optional[int] = None,
        expires: Optional[float] = None,
        **priority: Any,
    ) -> FetchResult:
        """One pull of what is available right now (up to the limits); never
        waits for new messages. With ``expires`` (seconds; default None, no
        wait at all), it waits up to that long for the first messages when
        none are there, then returns with what came (nats.java's
        ``noWaitExpiresIn``)."""
        prio = self._priority(priority)
        opts = fetch_options(max_messages, max_bytes, expires, None, no_wait=True, priority=prio)
        return self._fetch(opts)

    def next(self, timeout: float = 30.0, **priority: Any) -> Msg:
        """Pull one message, waiting up to ``timeout`` seconds; raises
        :class:`jetstream_sync.TimeoutError` when none came."""
        t = options.duration("timeout", timeout)
        opts = fetch_options(1, None, t, None, priority=self._priority(priority))
        result = self._fetch(opts)
        it = iter(result)
        try:
            return next(it)
        except StopIteration:
            raise self._conn.timed_out(f"no message from {self.stream_name}/{self.name} within {timeout}s") from None
        finally:
            it.close()

    def messages(self, *, error_handler: Optional[ErrorHandler] = None, **options: Any) -> MessagesContext:
        """A continuous, pre-buffered pull to iterate (ADR-37 consume).

        Options: ``max_messages`` (default 500) or ``max_bytes`` bound what is
        requested and not yet handed out; ``expires`` (default 30 s, at least
        1 s) is each pull's lifetime; ``idle_heartbeat`` defaults to
        expires/2 capped at 30 s; the buffer is refilled when it falls below
        ``threshold_messages`` / ``threshold_bytes`` (default: half). Both
        ``max_messages`` and ``max_bytes``: the buffer is bounded in messages
        and each pull is also capped at ``max_bytes``. ``stop_after=N`` ends
        the context once N messages were handed out (pulling no more than N).
        ``error_handler(exc)`` receives transient problems.

        Priority groups (ADR-42; the consumer's ``priority_groups``):
        ``group`` (required when the consumer has groups), ``min_pending`` /
        ``min_ack_pending`` (policy overflow: served only while the consumer
        has at least that many pending / ack-pending), ``priority`` 0-9
        (policy prioritized; 0 is served first). With pinned_client the pin
        id the server hands this context is sent in its later pulls; the pin
        lapses when no pull carries it for ``priority_timeout``, so keep
        ``expires`` below it or an idle worker loses its pin.
        """
        return MessagesContext(self._conn, self._target(), self._consume_options(options), error_handler)

    def consume(
        self, handler: Callable[[Msg], Any], *, error_handler: Optional[ErrorHandler] = None, **options: Any
    ) -> ConsumeContext:
        """Call ``handler(msg)`` for every message on a worker thread; options as :meth:`messages`."""
        return ConsumeContext(self._conn, self._target(), handler, self._consume_options(options), error_handler)

    def _priority(self, given: Dict[str, Any]) -> Optional[PriorityOptions]:
        """Priority-group options checked against the cached config."""
        check_option_names(given, PRIORITY_OPTION_NAMES)
        return priority_options(self._info.config, **given)

    def _consume_options(self, given: Dict[str, Any]) -> ConsumeOptions:
        check_option_names(given, CONSUME_OPTION_NAMES + PRIORITY_OPTION_NAMES)
        prio = {k: given.pop(k) for k in PRIORITY_OPTION_NAMES if k in given}
        return consume_options(**given, priority=self._priority(prio))

    # -- priority groups --------------------------------------------------------------

    def unpin(self, group: str) -> None:
        """Release the pin of a pinned_client priority ``group``: the server
        pins the next puller (server 2.11+)."""
        priority_options(self._info.config, group)  # a group of this consumer, before anything is sent
        self._js.unpin_consumer(self.stream_name, self.name, group)



PullConsumer = Consumer
