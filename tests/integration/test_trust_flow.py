"""Flow defects found when the client was tried for real: slow handlers and
AckWait, heartbeat alarms under CPU load."""

from __future__ import annotations

import collections
import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import publish


@pytest.mark.timeout(60)
def test_slow_handler_with_default_options_gets_no_duplicates(js, stream, subj):
    """Defect 17: with max_messages 500, a handler slower than AckWait/500 a
    message used to see buffered messages expire on the server and come twice."""
    cons = stream.create_consumer(durable_name="slow", ack_wait=2.0)
    # 400 x 10 ms = 4 s of work, twice the AckWait: the buffer refills (at half
    # of 500) after the first messages have expired on the server.
    total = 400
    publish(js, subj, total)
    seen = collections.Counter()
    done = threading.Event()

    def handler(msg: jss.Msg) -> None:
        seen[msg.metadata.sequence.stream] += 1
        time.sleep(0.01)  # a database write
        msg.ack()
        if len(seen) == total:
            done.set()

    cc = cons.consume(handler)  # default options
    try:
        assert done.wait(30)
    finally:
        cc.stop()
    assert sorted(seen) == list(range(1, total + 1))
    assert max(seen.values()) == 1, {s: n for s, n in seen.items() if n > 1}
    info = cons.info()
    assert info.num_redelivered == 0 and info.num_ack_pending == 0


@pytest.mark.timeout(60)
def test_slow_iterating_thread_gets_no_duplicates(js, stream, subj):
    """Defect 17, the iterator form: the buffer is kept alive while the caller works."""
    cons = stream.create_consumer(durable_name="slowit", ack_wait=1.0)
    total = 40  # 40 x 60 ms = 2.4 s
    publish(js, subj, total)
    seen = collections.Counter()
    with cons.messages() as ctx:
        while len(seen) < total:
            msg = ctx.next(timeout=10)
            seen[msg.metadata.sequence.stream] += 1
            time.sleep(0.06)
            msg.ack()
        assert ctx.stats.kept_alive > 0
    assert max(seen.values()) == 1
    assert cons.info().num_redelivered == 0


@pytest.mark.timeout(120)
def test_heartbeats_under_cpu_load_are_not_missed(js, stream):
    """Defect 23: heartbeats already read from the socket (or about to be) are
    traffic; a busy process must not call them missing."""
    cons = stream.create_consumer(durable_name="hb")
    stop = threading.Event()

    def burn() -> None:
        while not stop.is_set():
            sum(i * i for i in range(2000))

    burners = [threading.Thread(target=burn, daemon=True) for _ in range(3)]
    for t in burners:
        t.start()
    errors = []
    try:
        for _ in range(30):
            try:
                assert list(cons.fetch(1, expires=0.6, idle_heartbeat=0.1)) == []
            except jss.NoHeartbeatError as exc:
                errors.append(exc)
    finally:
        stop.set()
        for t in burners:
            t.join(5)
    assert errors == []
