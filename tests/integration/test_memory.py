"""Memory: the buffer stays within max_messages / max_bytes (also when
heartbeat alarms re-pull while the server is frozen), and RSS does not grow
with the number of messages consumed."""

from __future__ import annotations

import time

import pytest

import jetstream_sync as jss

from ..helpers import Bounded, publish, wait_until

MIB = 1024 * 1024


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def test_max_bytes_buffer_never_exceeds_the_limit(js, stream):
    subj = f"{stream.name.lower()}.x"
    publish(js, subj, 3000, b"b" * 1000)
    cons = stream.create_consumer(durable_name="c", ack_policy="none")
    largest = 0
    with cons.messages(max_bytes=MIB) as ctx:
        for i, msg in enumerate(ctx):
            largest = max(largest, msg.size)
            time.sleep(0.0005)  # a slow consumer lets the buffer fill up
            if i == 2999:
                break
        stats = ctx.stats
    assert stats.buffered_bytes_high_water <= MIB + largest
    assert stats.buffered_bytes_high_water > MIB // 2  # it did fill: the bound was tested


def test_max_messages_buffer_never_exceeds_the_limit(js, stream):
    subj = f"{stream.name.lower()}.x"
    publish(js, subj, 1000)
    cons = stream.create_consumer(durable_name="c", ack_policy="none")
    with cons.messages(max_messages=100) as ctx:
        for i, _msg in enumerate(ctx):
            time.sleep(0.0005)
            if i == 999:
                break
        assert 50 < ctx.stats.buffered_high_water <= 100


@pytest.mark.timeout(300)
def test_rss_growth_over_a_million_messages(js, stream):
    count, subject = 1_000_000, f"{stream.name.lower()}.m"
    for _ in range(count // 50_000):  # acknowledged publishes: every one is stored
        publish(js, subject, 50_000, b"m" * 128)
    assert stream.info().state.messages == count
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit", max_ack_pending=-1)
    baseline = peak = 0
    with cons.messages(max_messages=500) as ctx:
        for i, msg in enumerate(ctx, 1):
            msg.ack()
            if i == 50_000:
                baseline = rss_bytes()  # after warm-up: buffers, caches, code paths
            elif i % 50_000 == 0:
                peak = max(peak, rss_bytes())
            if i == count:
                break
    assert peak - baseline < 30 * MIB, f"RSS grew {(peak - baseline) / MIB:.1f} MiB"


@pytest.mark.timeout(90)
def test_heartbeat_alarms_never_exceed_the_buffer_bound(private_server):
    """messages(max_messages=100): however many heartbeat alarms re-pull while
    the server is frozen, no more than 100 messages are ever buffered."""
    client = jss.connect(private_server.url, name="hb-bound")
    feeder = jss.connect(private_server.url, name="hb-feeder")
    try:
        js = client.jetstream()
        stream = js.create_stream(name="HB", subjects=["hb.>"])
        cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
        ctx = cons.messages(max_messages=100, expires=4, idle_heartbeat=1)
        taker = Bounded(lambda: ctx.next(timeout=60), "takes-one")  # takes one message, then no more
        wait_until(lambda: ctx.stats.heartbeats >= 1, timeout=5)  # its pull is open on the server

        private_server.pause()
        try:
            wait_until(lambda: ctx.stats.missed_heartbeats >= 3, timeout=20)
        finally:
            private_server.resume()

        publish(feeder.jetstream(), "hb.x", 2000)
        taker.join(15)
        assert taker.finished and taker.error is None, f"the waiting thread got no message: {taker.error!r}"

        # The pulls the alarms sent are served now; watch the buffer while they are.
        watch_until = time.monotonic() + 5
        while time.monotonic() < watch_until and ctx.stats.buffered_high_water <= 100:
            time.sleep(0.05)
        stats = ctx.stats
        ctx.stop()
        assert stats.buffered_high_water <= 100, (
            f"{stats.buffered_high_water} messages buffered with max_messages=100 "
            f"after {stats.missed_heartbeats} heartbeat alarms ({stats.pulls} pulls)"
        )
    finally:
        feeder.close()
        client.close()
