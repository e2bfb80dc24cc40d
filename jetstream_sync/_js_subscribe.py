"""The subscribe workflow's entry points on JetStream (nats-py's names and
argument order; the workflow itself is in ``subscribe.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Union, cast

from . import errors
from ._core.message import Msg
from .models import ConsumerConfig, DeliverPolicy

if TYPE_CHECKING:  # pragma: no cover
    from .jetstream import JetStream
    from .subscribe import PullSubscription, PushSubscription


class Subscribing:
    """``subscribe`` / ``pull_subscribe`` and their bind forms (mixed into JetStream)."""

    @property
    def _js(self) -> "JetStream":
        return cast("JetStream", self)  # mixed into JetStream only

    def subscribe(
        self,
        subject: str,
        queue: Optional[str] = None,
        cb: Optional[Callable[[Msg], Any]] = None,
        durable: Optional[str] = None,
        stream: Optional[str] = None,
        config: Optional[ConsumerConfig] = None,
        manual_ack: bool = False,
        ordered_consumer: bool = False,
        idle_heartbeat: Optional[float] = None,
        flow_control: bool = False,
        *,
        deliver_policy: Union[str, DeliverPolicy, None] = None,
        headers_only: Optional[bool] = None,
        inactive_threshold: Optional[float] = None,
        error_handler: Optional[Callable[[BaseException], Any]] = None,
    ) -> "PushSubscription":
        """A push subscription on ``subject`` (ADR-15), as nats-py's.

        The stream is found by subject unless given. With ``durable`` (or a
        ``queue``, which is then the durable name and the deliver group) an
        existing consumer is bound after checks (SubscribeError when it does
        not fit), or created; without, an ephemeral one is created. A
        consumer created here is deleted by ``unsubscribe()``/``drain()``.
        With ``cb``, a worker thread calls it per message and acks after it
        returns unless ``manual_ack``; without, read with ``next_msg()`` or
        iteration. ``ordered_consumer=True`` reads in stream order with no
        acks (an :class:`OrderedConsumer` behind it).
        """
        from . import subscribe as sub
        from .jetstream import build_config

        if headers_only is not None and not isinstance(headers_only, bool):
            raise errors.InvalidOptionError(f"headers_only must be a bool, got {headers_only!r}")
        given = {"deliver_policy": deliver_policy, "headers_only": headers_only, "inactive_threshold": inactive_threshold}
        norm = build_config(ConsumerConfig, None, {k: v for k, v in given.items() if v is not None})  # validates
        # Only what was given: ConsumerConfig() has deliver_policy "all" by default.
        extra = {k: getattr(norm, k) for k, v in given.items() if v is not None}
        return sub.subscribe(
            self._js, subject, queue, cb, durable, stream, config, manual_ack, ordered_consumer,
            idle_heartbeat, flow_control, extra, error_handler,
        )  # fmt: skip

    def subscribe_bind(
        self,
        stream: str,
        config: Union[ConsumerConfig, str, None] = None,
        consumer: Optional[str] = None,
        cb: Optional[Callable[[Msg], Any]] = None,
        manual_ack: bool = False,
        *,
        queue: Optional[str] = None,
        error_handler: Optional[Callable[[BaseException], Any]] = None,
    ) -> "PushSubscription":
        """A push subscription on an existing consumer (ConsumerNotFoundError
        if there is none); never created, never deleted. nats-py's argument
        order: ``subscribe_bind(stream, config, consumer, cb)``; ``config`` may
        also be just the consumer's name. A ``config`` given is checked
        against the consumer's (SubscribeError on a difference)."""
        from . import subscribe as sub

        if isinstance(config, str) and consumer is None:
            config, consumer = None, config
        if config is not None and not isinstance(config, ConsumerConfig):
            raise errors.InvalidOptionError(f"config must be a ConsumerConfig or the consumer's name, got {config!r}")
        name = consumer or (config.durable_name or config.name if config is not None else None)
        if not name:
            raise errors.InvalidOptionError("subscribe_bind needs the consumer's name")
        return sub.subscribe(
            self._js, "", queue, cb, name, stream, config, manual_ack, False, None, False, {}, error_handler, bind=True
        )

    def pull_subscribe(
        self,
        subject: str,
        durable: Optional[str] = None,
        stream: Optional[str] = None,
        config: Optional[ConsumerConfig] = None,
    ) -> "PullSubscription":
        """A pull subscription on ``subject`` (ADR-13), as nats-py's: bound to
        the durable consumer if it exists (after ADR-15's checks), else a
        consumer is created (and deleted again by ``unsubscribe()``)."""
        from . import subscribe as sub

        return sub.pull_subscribe(self._js, subject, durable, stream, config)

    def pull_subscribe_bind(self, durable: str, stream: str) -> "PullSubscription":
        """A pull subscription on an existing consumer (ConsumerNotFoundError
        if there is none); never created, never deleted."""
        from . import subscribe as sub

        return sub.pull_subscribe(self._js, "", durable, stream, None, bind=True)
