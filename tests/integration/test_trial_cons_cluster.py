"""Ordered and push consumers on a 3-node cluster while the R3 stream's
leader (or the push consumer's leader) is killed: every message once, in
stream order for the ordered consumer."""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import wait_until
from .test_cluster import replicated


@pytest.fixture
def cnc(cluster):
    client = jss.connect(cluster.urls, reconnect_time_wait=0.2, max_reconnect_attempts=-1)
    yield client
    client.close()


class Publisher:
    """Publishes ``total`` messages with msg ids, retrying through the failover."""

    def __init__(self, js, total):
        self.seqs = []
        self._js, self._total = js, total
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        i = 0
        deadline = time.monotonic() + 60
        while i < self._total and time.monotonic() < deadline:
            try:
                self.seqs.append(self._js.publish("c.x", str(i).encode(), msg_id=str(i), timeout=2).seq)
                i += 1
            except jss.JetStreamError:
                time.sleep(0.05)  # no leader for a moment

    def join(self):
        self._thread.join(70)


def _kill(cluster, leader_name):
    node = cluster.servers[int(leader_name[1:])]  # servers are named n0, n1, n2
    node.stop()
    return node


@pytest.mark.timeout(120)
@pytest.mark.parametrize("read", ["messages", "fetch"])
def test_ordered_across_a_stream_leader_kill(cluster, cnc, read):
    js, _ = replicated(cnc)
    total = 1500
    pub = Publisher(js, total)
    oc = js.ordered_consumer("C")
    got = []
    killed = None
    ctx = oc.messages(max_messages=50) if read == "messages" else None
    deadline = time.monotonic() + 60
    try:
        while len(got) < total and time.monotonic() < deadline:
            try:
                batch = [ctx.next(timeout=5)] if ctx is not None else list(oc.fetch(50, expires=2))
            except jss.TimeoutError:
                continue
            got += [m.metadata.sequence.stream for m in batch]
            if killed is None and len(got) >= 300:
                killed = _kill(cluster, js.stream_info("C").cluster.leader)
    finally:
        if ctx is not None:
            ctx.stop()
    pub.join()
    assert killed is not None
    assert got == list(range(1, total + 1))


@pytest.mark.timeout(120)
def test_push_across_a_consumer_leader_kill(cluster, cnc):
    js, stream = replicated(cnc)
    cons = stream.create_consumer(
        durable_name="pp", deliver_subject="dc.pp", idle_heartbeat=1.0, flow_control=True, ack_wait=3.0, num_replicas=3
    )
    total = 1500
    pub = Publisher(js, total)
    seen = set()
    killed = None
    with cons.messages() as ctx:
        deadline = time.monotonic() + 60
        while len(seen) < total and time.monotonic() < deadline:
            try:
                msg = ctx.next(timeout=5)
            except jss.TimeoutError:
                continue
            seen.add(msg.metadata.sequence.stream)
            msg.ack()
            if killed is None and len(seen) >= 300:
                killed = _kill(cluster, cons.info().cluster.leader)
        pub.join()
        assert killed is not None
        assert seen == set(range(1, total + 1))

        # Acks sent while the leader was gone are lost (they are not
        # confirmed); those messages come back after AckWait and are acked again.
        def settled():
            try:
                ctx.next(timeout=0.2).ack()
            except jss.TimeoutError:
                pass
            return cons.info().num_ack_pending == 0

        wait_until(settled, timeout=30, interval=0.1)
