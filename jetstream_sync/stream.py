"""Stream: a handle on one stream, with its data and consumer operations."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional

from .models import ConsumerConfig, ConsumerInfo, StoredMsg, StreamInfo

if TYPE_CHECKING:  # pragma: no cover
    from .jetstream import AnyConsumer, JetStream
    from .ordered import OrderedConsumer

__all__ = ["Stream"]


class Stream:
    """A stream by name. ``cached_info`` is the info from when the handle was
    made (or last ``info()``); ``info()`` asks the server again."""

    def __init__(self, js: "JetStream", info: StreamInfo) -> None:
        self._js = js
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

    def create_consumer(self, config: Optional[ConsumerConfig] = None, **fields: Any) -> "AnyConsumer":
        return self._js.create_consumer(self.name, config, **fields)

    def update_consumer(self, config: Optional[ConsumerConfig] = None, **fields: Any) -> "AnyConsumer":
        return self._js.update_consumer(self.name, config, **fields)

    def create_or_update_consumer(self, config: Optional[ConsumerConfig] = None, **fields: Any) -> "AnyConsumer":
        return self._js.create_or_update_consumer(self.name, config, **fields)

    def consumer(self, name: str) -> "AnyConsumer":
        return self._js.consumer(self.name, name)

    def consumer_info(self, name: str) -> ConsumerInfo:
        return self._js.consumer_info(self.name, name)

    def delete_consumer(self, name: str) -> None:
        self._js.delete_consumer(self.name, name)

    def ordered_consumer(self, **config: Any) -> "OrderedConsumer":
        """An ordered consumer on this stream; see :class:`OrderedConsumer`
        for the options (``filter_subjects``, ``deliver_policy``,
        ``opt_start_seq``, ``opt_start_time``, ``replay_policy``,
        ``inactive_threshold``, ``headers_only``, ``max_reset_attempts``,
        ``name_prefix``, ``metadata``)."""
        from .ordered import OrderedConsumer

        return OrderedConsumer(self._js, self.name, **config)

    def consumer_names(self) -> List[str]:
        return self._js.consumer_names(self.name)

    def consumers(self) -> List[ConsumerInfo]:
        return self._js.consumers(self.name)

    def delete(self) -> None:
        """Delete this stream."""
        self._js.delete_stream(self.name)
