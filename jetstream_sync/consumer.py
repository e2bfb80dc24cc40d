"""Consumer: a handle on one pull consumer, and the ways to read from it;
BaseConsumer: what pull and push consumer handles share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from . import errors, options
from ._pull import PullTarget
from .contexts import ConsumeContext, FetchResult, MessagesContext
from .message import Msg
from .models import AckPolicy, ConsumerInfo
from .options import consume_options_from, fetch_options

if TYPE_CHECKING:  # pragma: no cover
    from .jetstream import JetStream

__all__ = ["BaseConsumer", "Consumer", "PullConsumer"]

ErrorHandler = Callable[[BaseException], Any]


class BaseConsumer:
    """What pull and push consumer handles share. ``cached_info`` is the info
    from when the handle was made (or last ``info()``); ``info()`` asks the
    server again."""

    def __init__(self, js: "JetStream", info: ConsumerInfo) -> None:
        self._js = js
        self._conn = js.connection
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


class Consumer(BaseConsumer):
    """A pull consumer of a stream (``PullConsumer`` is the same class)."""

    def _target(self) -> PullTarget:
        """What the engines pull from, with the AckWait they must respect."""
        return PullTarget(
            stream=self.stream_name,
            consumer=self.name,
            pull_subject=f"{self._js.api_prefix}.CONSUMER.MSG.NEXT.{self.stream_name}.{self.name}",
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
    ) -> FetchResult:
        """One pull of up to ``max_messages`` messages or ``max_bytes`` bytes
        (exactly one of them), waiting up to ``expires`` seconds.

        Returns at once; iterating blocks per message until the pull is
        complete. ``idle_heartbeat`` defaults to 5 s when ``expires`` >= 10 s.
        A fetch that gets nothing is simply empty.
        """
        return FetchResult(self._conn, self._target(), fetch_options(max_messages, max_bytes, expires, idle_heartbeat))

    def fetch_no_wait(self, max_messages: Optional[int] = None, *, max_bytes: Optional[int] = None) -> FetchResult:
        """One pull of what is available right now (up to the limit); never waits for new messages."""
        return FetchResult(self._conn, self._target(), fetch_options(max_messages, max_bytes, None, None, no_wait=True))

    def next(self, timeout: float = 30.0) -> Msg:
        """Pull one message, waiting up to ``timeout`` seconds; raises
        :class:`jetstream_sync.TimeoutError` when none came."""
        t = options.duration("timeout", timeout)
        result = FetchResult(self._conn, self._target(), fetch_options(1, None, t, None))
        it = iter(result)
        try:
            return next(it)
        except StopIteration:
            raise errors.TimeoutError(f"no message from {self.stream_name}/{self.name} within {timeout}s") from None
        finally:
            it.close()  # type: ignore[attr-defined]

    def messages(self, *, error_handler: Optional[ErrorHandler] = None, **options: Any) -> MessagesContext:
        """A continuous, pre-buffered pull to iterate (ADR-37 consume).

        Options: ``max_messages`` (default 500) or ``max_bytes`` bound what is
        requested and not yet handed out; ``expires`` (default 30 s, at least
        1 s) is each pull's lifetime; ``idle_heartbeat`` defaults to
        expires/2 capped at 30 s; the buffer is refilled when it falls below
        ``threshold_messages`` / ``threshold_bytes`` (default: half).
        ``error_handler(exc)`` receives transient problems.
        """
        return MessagesContext(self._conn, self._target(), consume_options_from(options), error_handler)

    def consume(
        self, handler: Callable[[Msg], Any], *, error_handler: Optional[ErrorHandler] = None, **options: Any
    ) -> ConsumeContext:
        """Call ``handler(msg)`` for every message on a worker thread; options as :meth:`messages`."""
        return ConsumeContext(self._conn, self._target(), handler, consume_options_from(options), error_handler)


PullConsumer = Consumer
