"""Stream: a handle on one stream, with its data and consumer operations;
and the functions that make consumer handles, which JetStream shares."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from . import errors
from ._core.jsapi import JsApi
from .consumer import Consumer
from .models import ConsumerConfig, ConsumerInfo, StoredMsg, StreamInfo
from .ordered import OrderedConsumer
from .push import PushConsumer

__all__ = ["Stream"]


def pull_consumer(api: JsApi, stream: str, name: str) -> Consumer:
    """The handle of an existing pull consumer; ConsumerPushBasedError for a push one."""
    info = api.consumer_info(stream, name)
    deliver = info.config.deliver_subject if info.config is not None else None
    if deliver:
        raise errors.ConsumerPushBasedError(
            409, f"Consumer is push based: {stream}/{name} delivers to {deliver!r}; use push_consumer() for its handle"
        )
    return Consumer(api, info)


def push_consumer(api: JsApi, stream: str, name: str) -> PushConsumer:
    """The handle of an existing push consumer; ConsumerPullBasedError for a pull one."""
    info = api.consumer_info(stream, name)
    if info.config is None or not info.config.deliver_subject:
        raise errors.ConsumerPullBasedError(
            f"consumer {stream}/{name} is pull based (it has no deliver subject): use consumer() for its handle"
        )
    return PushConsumer(api, info)


def make_consumer(api: JsApi, stream: str, config: Optional[ConsumerConfig], fields: Dict[str, Any], action: str) -> Consumer:
    """create/update_consumer: a pull Consumer; a deliver subject, as a keyword
    or in the config, is refused (options.consumer_kind)."""
    return Consumer(api, api.upsert_consumer(stream, config, fields, action, push=False))


def make_push_consumer(api: JsApi, stream: str, config: Optional[ConsumerConfig], fields: Dict[str, Any], action: str) -> PushConsumer:
    """create/update_push_consumer: the config needs a deliver_subject."""
    return PushConsumer(api, api.upsert_consumer(stream, config, fields, action, push=True))


class Stream:
    """A stream by name. ``cached_info`` is the info from when the handle was
    made (or last ``info()``); ``info()`` asks the server again."""

    def __init__(self, api: JsApi, info: StreamInfo) -> None:
        self._js = api
        self._info = info
        self.name: str = info.config.name  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<Stream {self.name!r}>"

    @property
    def cached_info(self) -> StreamInfo:
        return self._info

    def info(self, *, subjects_filter: Optional[str] = None, deleted_details: bool = False) -> StreamInfo:
        """Ask the server again; options as :meth:`JetStream.stream_info`."""
        self._info = self._js.stream_info(self.name, subjects_filter=subjects_filter, deleted_details=deleted_details)
        return self._info

    def purge(self, subject: Optional[str] = None, seq: Optional[int] = None, keep: Optional[int] = None) -> int:
        """Remove messages (all, or those on ``subject``; below ``seq``, or all
        but the newest ``keep``). Returns how many were purged."""
        return self._js.purge_stream(self.name, subject, seq, keep)

    def get_msg(
        self,
        seq: Optional[int] = None,
        last_by_subject: Optional[str] = None,
        *,
        next_by_subject: Optional[str] = None,
        direct: bool = False,
    ) -> StoredMsg:
        """Read one stored message by sequence, as the last on a subject, or
        the next on a subject from ``seq``; ``direct=True`` uses direct get.
        Raises MsgNotFoundError. See :meth:`JetStream.get_msg`."""
        return self._js.get_msg(self.name, seq, last_by_subject, next_by_subject=next_by_subject, direct=direct)

    def get_msgs(self, **options: Any) -> List[StoredMsg]:
        """A batch of stored messages by direct get; see :meth:`JetStream.get_msgs`."""
        return self._js.get_msgs(self.name, **options)

    def get_last_msgs(self, subjects: List[str], **options: Any) -> List[StoredMsg]:
        """The last message on each subject by direct get; see :meth:`JetStream.get_last_msgs`."""
        return self._js.get_last_msgs(self.name, subjects, **options)

    def delete_msg(self, seq: int, erase: bool = False) -> None:
        """Delete one message; ``erase=True`` overwrites its bytes on disk."""
        self._js.delete_msg(self.name, seq, erase)

    # -- consumers --------------------------------------------------------------

    # As on JetStream: the pull creators return a Consumer and refuse a
    # deliver subject; the ``*_push_consumer`` calls return a PushConsumer.

    def create_consumer(self, config: Optional[ConsumerConfig] = None, **fields: Any) -> Consumer:
        """Create a pull consumer; see :meth:`JetStream.create_consumer`."""
        return make_consumer(self._js, self.name, config, fields, "create")

    def update_consumer(self, config: Optional[ConsumerConfig] = None, **fields: Any) -> Consumer:
        """Update an existing pull consumer; see :meth:`JetStream.update_consumer`."""
        return make_consumer(self._js, self.name, config, fields, "update")

    def create_or_update_consumer(self, config: Optional[ConsumerConfig] = None, **fields: Any) -> Consumer:
        """Update the pull consumer if it exists, else create it."""
        return make_consumer(self._js, self.name, config, fields, "")

    def create_push_consumer(self, config: Optional[ConsumerConfig] = None, **fields: Any) -> PushConsumer:
        """Create a push consumer (its config needs a ``deliver_subject``)."""
        return make_push_consumer(self._js, self.name, config, fields, "create")

    def update_push_consumer(self, config: Optional[ConsumerConfig] = None, **fields: Any) -> PushConsumer:
        """Update an existing push consumer; see :meth:`JetStream.update_push_consumer`."""
        return make_push_consumer(self._js, self.name, config, fields, "update")

    def create_or_update_push_consumer(self, config: Optional[ConsumerConfig] = None, **fields: Any) -> PushConsumer:
        """Update the push consumer if it exists, else create it."""
        return make_push_consumer(self._js, self.name, config, fields, "")

    def consumer(self, name: str) -> Consumer:
        """A pull consumer's handle; ConsumerPushBasedError for a push one (use :meth:`push_consumer`)."""
        return pull_consumer(self._js, self.name, name)

    def push_consumer(self, name: str) -> PushConsumer:
        """A push consumer's handle; ConsumerPullBasedError for a pull one (use :meth:`consumer`)."""
        return push_consumer(self._js, self.name, name)

    def consumer_info(self, name: str) -> ConsumerInfo:
        return self._js.consumer_info(self.name, name)

    def delete_consumer(self, name: str) -> None:
        self._js.delete_consumer(self.name, name)

    def ordered_consumer(self, **config: Any) -> OrderedConsumer:
        """An ordered consumer on this stream; see :class:`OrderedConsumer`
        for the options (``filter_subjects``, ``deliver_policy``,
        ``opt_start_seq``, ``opt_start_time``, ``replay_policy``,
        ``inactive_threshold``, ``headers_only``, ``max_reset_attempts``,
        ``name_prefix``, ``metadata``)."""
        return OrderedConsumer(self._js, self.name, **config)

    def consumer_names(self) -> List[str]:
        return self._js.consumer_names(self.name)

    def consumers(self) -> List[ConsumerInfo]:
        return self._js.consumers(self.name)

    def delete(self) -> None:
        """Delete this stream."""
        self._js.delete_stream(self.name)
