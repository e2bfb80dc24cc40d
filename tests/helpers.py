"""Test helpers shared by the integration tests."""

from __future__ import annotations

import time
from typing import Callable


def wait_until(predicate: Callable[[], object], timeout: float = 5.0, interval: float = 0.01) -> object:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def raw_pull(nc, stream: str, consumer: str, batch: int, expires: float = 2.0, timeout: float = 5.0):
    """Pull up to ``batch`` messages with a hand-made MSG.NEXT request on a core
    subscription; stops at the first status message. Returns the user messages."""
    import json

    import jetstream_sync as jss

    inbox = f"_INBOX.rawpull.{time.monotonic_ns()}"
    sub = nc.subscribe(inbox)
    try:
        body = json.dumps({"batch": batch, "expires": int(expires * 1e9)}).encode()
        nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", body, reply=inbox)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < batch:
            try:
                msg = sub.next_msg(timeout=max(0.01, deadline - time.monotonic()))
            except jss.TimeoutError:
                break
            if msg.headers and "Status" in msg.headers and not msg.data:
                break
            out.append(msg)
        return out
    finally:
        sub.unsubscribe()
