"""Consumer: a handle on one pull consumer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .models import ConsumerInfo

if TYPE_CHECKING:  # pragma: no cover
    from .jetstream import JetStream

__all__ = ["Consumer"]


class Consumer:
    """A consumer of a stream. ``cached_info`` is the info from when the
    handle was made (or last ``info()``); ``info()`` asks the server again."""

    def __init__(self, js: "JetStream", info: ConsumerInfo) -> None:
        self._js = js
        self._info = info
        self.name: str = info.name
        self.stream_name: str = info.stream_name

    def __repr__(self) -> str:
        return f"<Consumer {self.stream_name!r}/{self.name!r}>"

    @property
    def cached_info(self) -> ConsumerInfo:
        return self._info

    def info(self) -> ConsumerInfo:
        self._info = self._js.consumer_info(self.stream_name, self.name)
        return self._info

    def delete(self) -> None:
        self._js.delete_consumer(self.stream_name, self.name)
