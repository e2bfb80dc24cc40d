"""One member instance of a partitioned consumer group: the pull on its
consumer (a ``messages()`` or ``consume()`` context on priority group
``PCG``) plus a watch of the group's config, which ends the member when the
config is deleted (it deletes the member's consumer, as orbit.go does) or
changed (it ends with :class:`ConsumerGroupError` in ``error``)."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, List, Optional, TypeVar, Union

from .. import errors
from .._core.logfields import log_fields
from .._core.message import Msg
from ..contexts import ConsumeContext, MessagesContext, PullStats
from ..kv.bucket import KeyValue, KeyValueOp
from .model import StaticGroupConfig, strip_partition

__all__ = ["GroupConsumeContext", "GroupMessagesContext"]

log = logging.getLogger("jetstream_sync.pcgroups")

M = TypeVar("M", bound="_Member")
WATCH_POLL = 0.5  # seconds: how often the config watch looks whether the member ended


class _Member:
    """What both member contexts share: the pull context and the config watch."""

    def __init__(
        self,
        inner: Union[MessagesContext, ConsumeContext],
        kv: KeyValue,
        key: str,
        config: StaticGroupConfig,
        member: str,
        delete_consumer: Callable[[], None],
    ) -> None:
        self._inner = inner
        self.config = config
        self.member = member
        self.partitions: List[int] = config.partitions_of(member)
        self.error: Optional[errors.ConsumerGroupError] = None
        self._delete_consumer = delete_consumer
        self._watcher = kv.watch(key)
        self._thread = threading.Thread(target=self._watch, name=f"jetstream-sync-pcg-{member}", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"<jetstream_sync.{type(self).__name__} member={self.member!r} partitions={self.partitions}>"

    def _watch(self) -> None:
        while not self._inner.closed:
            try:
                entry = self._watcher.next(WATCH_POLL)
            except errors.TimeoutError:
                continue
            except errors.JetStreamError as exc:  # stopped, or the connection went: the member ends with it
                log.debug("consumer group config watch of %s ended: %r", self.member, exc, extra=log_fields(consumer=self.member))
                return
            if entry is None:
                continue
            if entry.operation is not KeyValueOp.PUT:
                self._end(None)
                return
            try:
                changed = StaticGroupConfig.from_json(entry.value) != self.config
            except errors.InvalidOptionError as exc:
                self._end(errors.ConsumerGroupError(f"the group's config was replaced by an invalid one: {exc}"))
                return
            if changed:
                self._end(errors.ConsumerGroupError("the static group's config changed: the member stopped (static groups are not rebalanced)"))
                return

    def _end(self, error: Optional[errors.ConsumerGroupError]) -> None:
        self.error = error
        self._inner.stop()
        try:
            self._delete_consumer()
        except errors.ConsumerNotFoundError:
            pass
        except errors.JetStreamError as exc:
            log.warning("could not delete the consumer of member %s: %r", self.member, exc, extra=log_fields(consumer=self.member))

    def stop(self) -> None:
        """End delivery now (messages buffered and not handed out are NAK'd);
        the member's consumer stays, so another instance takes over its pin."""
        self._inner.stop()
        self._watcher.stop()

    def drain(self) -> None:
        """Hand over what was received, pull no more, then end."""
        self._inner.drain()
        self._watcher.stop()

    @property
    def closed(self) -> bool:
        """Whether delivery has ended."""
        return self._inner.closed

    @property
    def stats(self) -> PullStats:
        """The pull's counters (as ``messages()`` / ``consume()``)."""
        return self._inner.stats

    def __enter__(self: M) -> M:
        return self

    def __exit__(self, *exc: Any) -> None:
        """Leaving ``with group.join(...)`` stops the member instance."""
        self.stop()

    @staticmethod
    def subject(msg: Msg) -> str:
        """A message's subject without the partition token (what orbit.go hands its callback)."""
        return strip_partition(msg.subject)


class GroupMessagesContext(_Member):
    """A member's messages to iterate, as :meth:`Consumer.messages`; only its
    partitions' messages, in stream order per subject. Iteration ends after
    :meth:`stop` / :meth:`drain`, when the group is deleted, or raises
    :class:`ConsumerGroupError` when its config changed. ``msg.subject`` keeps
    the partition token; :meth:`subject` strips it."""

    _inner: MessagesContext

    def __iter__(self) -> "GroupMessagesContext":
        return self

    def __next__(self) -> Msg:
        try:
            return next(self._inner)
        except StopIteration:
            if self.error is not None:
                raise self.error from None
            raise

    def next(self, timeout: Optional[float] = None) -> Msg:
        """The next message, waiting up to ``timeout`` seconds (None: no
        limit); :class:`TimeoutError` when none came."""
        return self._inner.next(timeout)

    def wait_closed(self, timeout: Optional[float] = None) -> bool:
        """Wait up to ``timeout`` seconds for the end; True when ended."""
        return self._inner.wait_closed(timeout)



class GroupConsumeContext(_Member):
    """A member's handler running on a worker thread, as
    :meth:`Consumer.consume`; :attr:`error` says why it ended when the group's
    config changed (None otherwise)."""

    _inner: ConsumeContext

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait up to ``timeout`` seconds (None: no limit) for the end; True when ended."""
        return self._inner.wait(timeout)

