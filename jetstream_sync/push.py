"""PushConsumer: a handle on a consumer with a deliver subject (ADR-15)."""

from __future__ import annotations

import functools
import threading
import weakref
from typing import Any, Callable, NoReturn, Optional, TypeVar

from . import errors, options
from ._core.jsapi import JsApi
from ._engines.push import PushEngine, PushTarget
from .consumer import BaseConsumer
from .contexts import ConsumeContext, MessagesContext
from ._core.message import Msg
from .models import ConsumerInfo
from .options import PushOptions, push_options
from .options import handler as check_handler


__all__ = ["PushConsumer"]

ErrorHandler = Callable[[BaseException], Any]
_Ctx = TypeVar("_Ctx", MessagesContext, ConsumeContext)


class PushConsumer(BaseConsumer):
    """A consumer the server pushes to: it sends messages to the consumer's
    ``deliver_subject`` as fast as ``max_ack_pending``, ``flow_control`` and
    ``rate_limit_bps`` allow; read them with :meth:`messages` or
    :meth:`consume`. There is no fetch() or next(): those need a pull consumer.

    The consumer's ``idle_heartbeat`` arms a watchdog (NoHeartbeatError after
    3 × idle_heartbeat without traffic, to ``error_handler``); flow-control
    requests are answered as the user catches up; consumer-sequence gaps are
    reported as ConsumerSequenceMismatchError (not in a deliver group).

    One handle runs one messages()/consume() at a time, unless the consumer
    has a ``deliver_group``: then each is a member of the queue group and
    every message goes to one of them.
    """

    def __init__(self, api: JsApi, info: ConsumerInfo) -> None:
        super().__init__(api, info)
        self._lock = threading.Lock()
        self._active: Optional["weakref.ref[Any]"] = None  # weak: a dropped context still stops

    @property
    def deliver_subject(self) -> str:
        cfg = self._info.config
        return (cfg.deliver_subject if cfg is not None else None) or ""

    @property
    def deliver_group(self) -> Optional[str]:
        cfg = self._info.config
        return (cfg.deliver_group if cfg is not None else None) or None

    def _target(self) -> PushTarget:
        cfg = self._info.config
        options.control_line(self.deliver_subject, self.deliver_group)  # SUB <deliver subject> <group> <sid>
        return PushTarget(
            stream=self.stream_name,
            consumer=self.name,
            deliver_subject=self.deliver_subject,
            deliver_group=self.deliver_group or "",
            info_subject=self._info_subject(),
            idle_heartbeat=(cfg.idle_heartbeat if cfg is not None else None) or 0.0,
            ack_wait=self._ack_wait(),
            api_timeout=self._js.timeout,
        )

    def messages(
        self, *, error_handler: Optional[ErrorHandler] = None, exclusive: bool = True, **options: Any
    ) -> MessagesContext:
        """Subscribe to the deliver subject; iterate the messages (or
        ``next(timeout)``). ``stop()`` NAKs what was received and not handed
        out; ``drain()`` hands it all over. Option: ``heartbeat_alarm``
        (seconds without traffic before NoHeartbeatError; default 3 × the
        consumer's idle_heartbeat). ``error_handler(exc)`` receives transient
        problems. Without a deliver group, a consumer already bound to a
        subscriber elsewhere is refused (ConsumerAlreadyConsumingError: both
        would get every message) unless ``exclusive=False``."""
        target, opts = self._target(), self._options(options)
        check_handler("error_handler", error_handler, optional=True)
        make = functools.partial(MessagesContext, self._conn, target, opts, error_handler, engine=PushEngine)
        return self._start(make, exclusive)

    def consume(
        self,
        handler: Callable[[Msg], Any],
        *,
        error_handler: Optional[ErrorHandler] = None,
        exclusive: bool = True,
        **options: Any,
    ) -> ConsumeContext:
        """Call ``handler(msg)`` for every message on a worker thread; options as :meth:`messages`."""
        target, opts = self._target(), self._options(options)
        check_handler("consume() handler", handler)
        check_handler("error_handler", error_handler, optional=True)
        make = functools.partial(ConsumeContext, self._conn, target, handler, opts, error_handler, engine=PushEngine)
        return self._start(make, exclusive)

    def _options(self, given: Any) -> PushOptions:
        cfg = self._info.config
        return push_options(cfg.idle_heartbeat if cfg is not None else None, given)

    def _start(self, make: Callable[[], _Ctx], exclusive: bool) -> _Ctx:
        options.flag("exclusive", exclusive)
        if self.deliver_group:
            return make()  # queue members: each message goes to one of them
        with self._lock:
            ctx = self._active() if self._active is not None else None
            if ctx is not None and ctx.subscribed:
                raise errors.ConsumerAlreadyConsumingError(
                    f"push consumer {self.stream_name}/{self.name} is already consuming on this handle;"
                    " stop it first, or give the consumer a deliver_group"
                )
            # Another handle or client may be subscribed: without a deliver
            # group both would get every message (ADR-15 "push bound").
            if exclusive and self.info().push_bound:
                raise errors.ConsumerAlreadyConsumingError(
                    f"push consumer {self.stream_name}/{self.name} is already bound to a subscription"
                    " (another handle or client); give the consumer a deliver_group to share it"
                )
            ctx = make()
            self._active = weakref.ref(ctx)
            return ctx

    # -- no pulls on a push consumer ----------------------------------------------------

    def fetch(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: a push consumer cannot be pulled (ConsumerPushBasedError)."""
        raise self._not_pull("fetch()")

    def fetch_no_wait(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: a push consumer cannot be pulled (ConsumerPushBasedError)."""
        raise self._not_pull("fetch_no_wait()")

    def next(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: a push consumer cannot be pulled (ConsumerPushBasedError)."""
        raise self._not_pull("next()")

    def _not_pull(self, what: str) -> errors.ConsumerPushBasedError:
        return errors.ConsumerPushBasedError(
            409,
            f"Consumer is push based: {self.stream_name}/{self.name} delivers to {self.deliver_subject!r};"
            f" {what} needs a pull consumer, use messages() or consume()",
        )
