"""Stand-ins for the connection, for unit tests that drive an engine or a
receiver by hand: what those touch of it, recorded."""

from __future__ import annotations

from typing import Any, List, Tuple


class FakeOutbox:
    def kick(self) -> None:
        pass

    def send_now(self) -> None:
        pass


class FakeLoopThread:
    def in_loop_thread(self) -> bool:
        return False


class FakeConn:
    """Records what is published (subject, payload) and what is handed to the loop."""

    closed = closing = forked = in_child = False

    def __init__(self) -> None:
        self.published: List[Tuple[str, bytes]] = []
        self.soon: List[Any] = []
        self.outbox = FakeOutbox()
        self.loop_thread = FakeLoopThread()

    def send_pub(self, subject: str, reply: str, payload: bytes) -> bool:
        self.published.append((subject, payload))
        return True

    def call_soon(self, fn: Any, *args: Any) -> None:
        self.soon.append(fn)

    def unregister(self, resource: Any) -> None:
        pass
