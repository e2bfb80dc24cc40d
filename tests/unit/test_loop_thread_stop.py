"""LoopThread.stop(): nothing is left pending on the loop it closes, also
when a task starts another as it is cancelled (as a client closing under a
reconnect starts its flusher); a task left pending fails when collected."""

from __future__ import annotations

import asyncio
import threading
from typing import List

import pytest

from jetstream_sync._core.loop import LoopThread

pytestmark = pytest.mark.timeout(30)


def test_a_task_started_by_a_cancelled_task_is_cancelled_too() -> None:
    lt = LoopThread("test-stop")
    started: List["asyncio.Task[None]"] = []
    running = threading.Event()

    async def follower() -> None:
        await asyncio.Event().wait()

    async def leader() -> None:
        running.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            for _ in range(3):  # a chain: each cancelled one starts the next
                started.append(asyncio.get_running_loop().create_task(chained(len(started))))
            raise

    async def chained(i: int) -> None:
        try:
            await follower()
        except asyncio.CancelledError:
            if i < 5:
                started.append(asyncio.get_running_loop().create_task(chained(i + 10)))
            raise

    lt.spawn(leader())
    assert running.wait(10)
    lt.stop(10)
    assert started and all(t.done() for t in started)
