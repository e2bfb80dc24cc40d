"""Memory: the buffer stays within max_messages / max_bytes, and RSS does not
grow with the number of messages consumed."""

from __future__ import annotations

import time

import pytest

from ..helpers import publish

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
