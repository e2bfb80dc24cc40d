"""A 3-node cluster: replicated consumers across leadership changes, and
ordered and push consumers while the R3 stream's leader (or the push
consumer's leader) is killed: every message once, in stream order for the
ordered consumer."""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import jetstream_answers, publish, stream_placed, wait_until


@pytest.fixture
def cnc(cluster):
    client = jss.connect(cluster.urls, reconnect_time_wait=0.2, max_reconnect_attempts=-1)
    yield client
    client.close()


def replicated(cnc):
    js = cnc.jetstream(timeout=10)
    wait_until(lambda: jetstream_answers(js), timeout=30, interval=0.2)
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
    wait_until(lambda: stream_placed(js, "C"), timeout=30, interval=0.1)
    # Placed is not yet reachable from the server this client is on: the
    # leader's interest crosses the routes asynchronously.
    wait_until(lambda: _stream_answers(js), timeout=30, interval=0.1)
    return js, stream


def _stream_answers(js):
    """A publish the stream refuses (wrong expected last sequence) proves the
    leader answers from here and stores nothing."""
    try:
        js.publish("c.probe", b"", expected_last_seq=10**9)
    except jss.NoRespondersError:
        return False
    except jss.APIError:
        return True
    raise AssertionError("the probe was stored")


def consumer_answers(cons):
    """Wait until pulls reach the new consumer's leader from this server."""

    def answers():
        try:
            return list(cons.fetch_no_wait(1)) == []
        except jss.NoRespondersError:
            return False

    wait_until(answers, timeout=30, interval=0.1)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("replicas", [1, 3])
def test_messages_across_a_consumer_leader_change(cnc, replicas):
    js, stream = replicated(cnc)
    cons = stream.create_consumer(durable_name="c", num_replicas=replicas, ack_wait=5.0)
    consumer_answers(cons)
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
    consumer_answers(cons)
    publish(js, "c.x", 5)
    assert [m.data for m in cons.fetch(5, expires=5)] == [b"0", b"1", b"2", b"3", b"4"]
    assert list(cons.fetch_no_wait(5)) == []


# -- ordered and push consumers across a leader kill ---------------------------------------


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
    cons = stream.create_push_consumer(
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
