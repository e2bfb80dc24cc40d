"""Waiting for a condition with a deadline: what tests do instead of sleeping."""

from __future__ import annotations

import time
from typing import Callable, Optional, Protocol, TypeVar

from ..models import ConsumerInfo

__all__ = ["HasConsumerInfo", "ack_floor", "wait_for_ack_floor", "wait_until"]

T = TypeVar("T")


def wait_until(predicate: Callable[[], Optional[T]], timeout: float = 5.0, interval: float = 0.01) -> T:
    """Call ``predicate`` every ``interval`` seconds (default 0.01) until it
    returns something truthy, and return that. ``AssertionError`` (a test
    failure) when ``timeout`` seconds (default 5) pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def ack_floor(info: ConsumerInfo) -> int:
    """The stream sequence below which (and at which) every message is acked; 0 before any."""
    return info.ack_floor.stream_seq if info.ack_floor else 0


class HasConsumerInfo(Protocol):
    """A consumer handle: ``Consumer``, ``PushConsumer``, ``OrderedConsumer``."""

    def info(self) -> ConsumerInfo: ...


def wait_for_ack_floor(consumer: HasConsumerInfo, seq: int, timeout: float = 10.0, interval: float = 0.02) -> ConsumerInfo:
    """Wait until the server has every message up to stream sequence ``seq``
    acknowledged by ``consumer`` (its ack floor reached ``seq``): the way to
    know that a handler running on another thread has acked what was published.

    :param seq: a stream sequence, e.g. ``js.publish(...).seq``.
    :param timeout: seconds (default 10); then ``AssertionError`` saying where
        the floor stood.
    :param interval: seconds between two ``consumer.info()`` calls (default 0.02).
    :returns: the ``ConsumerInfo`` that showed it.
    """
    last: list[ConsumerInfo] = []

    def reached() -> Optional[ConsumerInfo]:
        info = consumer.info()
        last[:] = [info]
        return info if ack_floor(info) >= seq else None

    try:
        return wait_until(reached, timeout=timeout, interval=interval)
    except AssertionError:
        info = last[0]
        raise AssertionError(
            f"the ack floor of consumer {info.name!r} is at stream sequence {ack_floor(info)},"
            f" not {seq}, after {timeout}s ({info.num_ack_pending} delivered and unacked,"
            f" {info.num_pending} not delivered)"
        ) from None
