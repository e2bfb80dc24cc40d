"""A 3-node cluster: replicated consumers across leadership changes."""

from __future__ import annotations

import time

import pytest

import jetstream_sync as jss

from ..helpers import publish, wait_until


@pytest.fixture
def cnc(cluster):
    client = jss.connect(cluster.urls, reconnect_time_wait=0.2, max_reconnect_attempts=-1)
    yield client
    client.close()


def replicated(cnc):
    js = cnc.jetstream(timeout=10)
    wait_until(lambda: _ready(js), timeout=30, interval=0.2)
    # A fresh cluster may answer INFO before its meta leader can place a
    # stream: creating the same stream again is idempotent, so retry.
    deadline = time.monotonic() + 45
    while True:
        try:
            stream = js.create_stream(name="C", subjects=["c.>"], num_replicas=3)
            break
        except jss.TimeoutError:
            if time.monotonic() > deadline:
                raise
    # Created is not yet publishable: wait for the stream's leader and its
    # replicas, or the first publishes can meet "no responders" for longer
    # than ADR-22's retries (2 x 250 ms) on a loaded machine.
    wait_until(lambda: _placed(js), timeout=30, interval=0.1)
    return js, stream


def _placed(js):
    cluster = js.stream_info("C").cluster
    return bool(cluster and cluster.leader and cluster.replicas and all(r.current for r in cluster.replicas))


def _ready(js):
    try:
        js.account_info()
        return True
    except jss.JetStreamError:
        return False


@pytest.mark.timeout(90)
@pytest.mark.parametrize("replicas", [1, 3])
def test_messages_across_a_consumer_leader_change(cnc, replicas):
    js, stream = replicated(cnc)
    cons = stream.create_consumer(durable_name="c", num_replicas=replicas, ack_wait=5.0)
    publish(js, "c.x", 20)
    reports = []
    got = []
    with cons.messages(max_messages=5, expires=2.0, idle_heartbeat=1.0, error_handler=reports.append) as ctx:
        for _ in range(10):
            msg = ctx.next(timeout=10)
            got.append(msg.metadata.sequence.stream)
            msg.ack()
        js._api.request("CONSUMER.LEADER.STEPDOWN.C.c")
        start = time.monotonic()
        while len(set(got)) < 20:
            msg = ctx.next(timeout=15)
            got.append(msg.metadata.sequence.stream)
            msg.ack()
        assert time.monotonic() - start < 15
        # The engine recovers either from a 409 Leadership Change or, when the
        # pull was lost with the old leader, from the heartbeat watchdog.
    assert set(got) == set(range(1, 21))


@pytest.mark.timeout(90)
def test_fetch_on_a_cluster(cnc):
    js, stream = replicated(cnc)
    cons = stream.create_consumer(durable_name="c", num_replicas=3)
    publish(js, "c.x", 5)
    assert [m.data for m in cons.fetch(5, expires=5)] == [b"0", b"1", b"2", b"3", b"4"]
    assert list(cons.fetch_no_wait(5)) == []
