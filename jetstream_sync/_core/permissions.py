"""Permission watchers: who is told when the server refuses a publish or a
subscription (``-ERR Permissions Violation``), so that the request, pull or
subscription concerned fails at once instead of waiting out its timeout.

Loop thread only (the error reaches nats-py's error_cb there).
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, Optional, Set, Tuple

from .wire import subscription_matches
from .logfields import log_fields

__all__ = ["Watcher", "PermissionWatchers"]

_log = logging.getLogger("jetstream_sync._connection")  # the logger name users configure, kept from before the move

Watcher = Callable[[BaseException], None]


class PermissionWatchers:
    """The watchers of one connection, by (subject, queue)."""

    def __init__(self) -> None:
        # (subject, queue) -> callbacks told of a violation; queue None for
        # publishes, "" for a subscription without one. Subjects lower case:
        # nats-py lowercases -ERR text.
        self._watchers: Dict[Tuple[str, Optional[str]], Set[Watcher]] = {}

    def watch(self, subject: str, callback: Watcher, queue: Optional[str] = None) -> Callable[[], None]:
        """``callback(PermissionDeniedError)`` if the server refuses a publish
        on ``subject`` (or a subscription covering it); with ``queue`` (""
        for none): if it refuses the subscription to exactly ``subject`` in
        that queue group. Returns a remover."""
        key = (subject.lower(), None if queue is None else queue.lower())
        watchers = self._watchers.setdefault(key, set())
        watchers.add(callback)

        def remove() -> None:
            watchers.discard(callback)
            if not watchers:
                self._watchers.pop(key, None)

        return remove

    def watchers_of(self, kind: str, subject: str, queue: str) -> Set[Watcher]:
        """The callbacks a refused ``kind`` ("publish", "subscription") on
        ``subject`` (in ``queue``, "" for none) concerns."""
        subject = subject.lower()
        hit = set(self._watchers.get((subject, None), ()))  # watchers of this subject (a push deliver subject too)
        if kind == "subscription":  # and the core subscription named, as subscribed (the server names it so)
            hit |= self._watchers.get((subject, queue.lower()), set())
        if kind == "subscription" and not queue:  # a reply inbox ("_INBOX.x.*") covers the requests on it
            for (watched, group), callbacks in list(self._watchers.items()):
                if group is None and subscription_matches(subject, watched):
                    hit |= callbacks
        return hit

    @staticmethod
    def tell(callbacks: Set[Watcher], err: BaseException) -> None:
        """Call each of ``callbacks`` with ``err``; one that raises is logged."""
        for callback in callbacks:
            try:
                callback(err)
            except Exception:
                _log.exception("permission watcher failed", extra=log_fields())
