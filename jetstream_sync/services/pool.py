"""The handler threads of one service and the queue that feeds them.

The loop thread puts requests in (never blocking); N worker threads take
them one at a time. All state is under one condition, so "nothing queued and
nothing running" is one consistent look.
"""

from __future__ import annotations

import collections
import threading
from typing import Callable, Deque, Generic, List, Optional, TypeVar

__all__ = ["WorkerPool"]

T = TypeVar("T")


class WorkerPool(Generic[T]):
    """``run(item)`` for each item put, on ``workers`` daemon threads named
    ``<name>-<i>``; at most ``limit`` items wait (``put`` refuses more)."""

    def __init__(self, run: Callable[[T], None], workers: int, name: str, limit: int) -> None:
        self._run = run
        self._limit = limit
        self._cond = threading.Condition(threading.Lock())
        self._items: Deque[T] = collections.deque()  # under _cond
        self._closing = False  # no more items: threads end once the queue is empty (under _cond)
        self.running = 0  # items being run now (under _cond; read without it for stats)
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    def put(self, item: T) -> bool:
        """Any thread, never blocks: queue ``item``; False when closing or full."""
        with self._cond:
            if self._closing or len(self._items) >= self._limit:
                return False
            self._items.append(item)
            self._cond.notify()
            return True

    def close(self) -> None:
        """Take no more items; the threads end once what is queued has run."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    def cancel(self) -> List[T]:
        """Take no more items and hand back those not started (the caller
        answers them); the threads end after the item in hand."""
        with self._cond:
            self._closing = True
            left = list(self._items)
            self._items.clear()
            self._cond.notify_all()
        return left

    @property
    def queued(self) -> int:
        return len(self._items)

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing running (a join would not wait for items)."""
        with self._cond:
            return not self._items and not self.running

    def join(self, timeout: Optional[float], waiter: Optional[threading.Thread] = None) -> bool:
        """Wait up to ``timeout`` seconds (None: no limit) until the pool is
        closed and every item has run; True when so. When ``waiter`` (the
        thread that waits for this; default: the calling one) is one of the
        pool's own threads (a handler stopping its service), its own item
        is not waited for."""
        mine = 1 if (waiter or threading.current_thread()) in self._threads else 0
        with self._cond:
            done = self._cond.wait_for(lambda: self._closing and not self._items and self.running <= mine, timeout)
        return bool(done)

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._items and not self._closing:
                    self._cond.wait()
                if not self._items:
                    return
                item = self._items.popleft()
                self.running += 1
            try:
                self._run(item)
            finally:
                with self._cond:
                    self.running -= 1
                    self._cond.notify_all()
