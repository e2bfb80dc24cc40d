"""A JetStream publish that meets "no responders" is tried again (ADR-22,
nats.go's DefaultPubRetryAttempts/Wait): right after a stream is placed on a
cluster its interest reaches the other servers a moment later, and the same
window opens while its leader moves."""

from __future__ import annotations

import json
import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import jetstream_answers, wait_until


@pytest.fixture
def first(cluster):
    """A client of the cluster's first server only, once JetStream answers there."""
    cluster.wait_for_meta_leader()
    nc = jss.connect(cluster.servers[0].url, reconnect_time_wait=0.2, max_reconnect_attempts=-1)
    wait_until(lambda: jetstream_answers(nc.jetstream()), timeout=30, interval=0.2)
    yield nc
    nc.close()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_publish_right_after_an_r3_stream_is_created_is_stored_once(first):
    js = first.jetstream(timeout=10)
    for i in range(50):
        js.create_stream(name=f"R3_{i}", subjects=[f"r3.{i}"], num_replicas=3)
        ack = js.publish(f"r3.{i}", b"x", msg_id=f"m{i}")
        assert (ack.stream, ack.seq, ack.duplicate) == (f"R3_{i}", 1, False)
        assert js.stream_info(f"R3_{i}").state.messages == 1


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_publish_async_across_two_leader_stepdowns_resolves_every_future(first):
    """A leader that steps down drops what it had not stored, without a word:
    those publishes (with a Nats-Msg-Id) are sent again, stored once."""
    js = first.jetstream(timeout=10)
    js.create_stream(name="MOVING", subjects=["moving"], num_replicas=3)
    wait_until(lambda: js.stream_info("MOVING").cluster.leader, timeout=30)
    stepped, problems = [], []

    def step_down():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # refused while the last one settles: ask again
            try:
                reply = json.loads(first.request("$JS.API.STREAM.LEADER.STEPDOWN.MOVING", b"", timeout=10).data)
            except jss.JetStreamError as exc:
                reply = {"error": repr(exc)}
            if reply.get("success"):
                stepped.append(reply)
                return
            time.sleep(0.2)
        problems.append(f"no stepdown within 30 s: {reply}")

    steppers, futures = [], []
    for i in range(10_000):
        if i in (3_000, 6_000):  # while thousands are in flight
            steppers.append(threading.Thread(target=step_down, daemon=True))
            steppers[-1].start()
        # retry_attempts=-1: "no responders" while a new leader is elected (longer than the
        # default 2 x 0.25 s on a loaded machine) is retried within the timeout, as a user
        # riding out stepdowns would ask; the silence of a leader that stepped down is not.
        futures.append(js.publish_async("moving", b"%d" % i, msg_id=f"m{i}", timeout=30, retry_attempts=-1))
    for t in steppers:
        t.join(40)
    assert problems == [] and len(stepped) == 2
    assert js.publish_async_complete(timeout=60)
    acks = [f.result(timeout=0) for f in futures]
    assert all(isinstance(a, jss.PubAck) for a in acks)
    assert js.stream_info("MOVING").state.messages == 10_000


def _once_the_first_attempt_met_no_responders(nc, send, create):
    """Run ``send()`` in a thread; once the 503 of its first attempt came
    back, ``create()`` the stream; ``send()``'s result."""
    before = nc.stats["in_msgs"]
    out = []
    sender = threading.Thread(target=lambda: out.append(send()))
    sender.start()
    wait_until(lambda: nc.stats["in_msgs"] > before, timeout=10)
    create()
    sender.join(25)
    assert len(out) == 1, "the send did not return"
    return out[0]


def test_an_atomic_batch_sent_before_its_stream_exists_is_stored_once(nc, js):
    ack = _once_the_first_attempt_met_no_responders(
        nc,
        lambda: js.publish_batch([("atom.a", b"1"), ("atom.b", b"2"), ("atom.c", b"3")], retry_attempts=-1, retry_wait=0.1, timeout=20),
        lambda: js.create_stream(name="ATOM", subjects=["atom.>"], allow_atomic=True),
    )
    assert (ack.stream, ack.seq, ack.batch_size) == ("ATOM", 3, 3)
    assert js.stream_info("ATOM").state.messages == 3


def test_a_fast_batch_whose_first_message_came_before_its_stream_is_stored_once(nc, js):
    def send():
        with js.fast_batch(retry_attempts=-1, retry_wait=0.1, ack_timeout=20) as batch:
            for i in range(5):
                batch.add("quick.x", b"%d" % i)
            return batch.commit("quick.x", b"last")

    ack = _once_the_first_attempt_met_no_responders(
        nc, send, lambda: js.create_stream(name="QUICK", subjects=["quick.>"], allow_batched=True)
    )
    assert (ack.stream, ack.batch_size) == ("QUICK", 6)
    assert [m.data for m in js.stream("QUICK").ordered_consumer().fetch(6, expires=2)] == [b"0", b"1", b"2", b"3", b"4", b"last"]


def test_retry_attempts_zero_fails_at_once_and_a_subject_no_stream_takes_fails_after_the_retries(server, js):
    start = time.monotonic()
    with pytest.raises(jss.NoRespondersError, match=r"\(1 attempt\)"):
        js.publish("nobody.takes.this", b"", retry_attempts=0)
    assert time.monotonic() - start < 0.2  # no wait: not retried
    start = time.monotonic()
    with pytest.raises(jss.NoRespondersError, match=r"\(4 attempts\)"):
        js.publish("nobody.takes.this", b"", retry_attempts=3, retry_wait=0.1)
    assert 0.3 <= time.monotonic() - start < 2.0
    start = time.monotonic()
    with pytest.raises(jss.NoRespondersError):
        js.publish("nobody.takes.this", b"", retry_attempts=-1, retry_wait=0.1, timeout=1.0)
    assert 0.8 <= time.monotonic() - start <= 1.5  # until the timeout, no longer
    fut = js.publish_async("nobody.takes.this", b"", retry_attempts=1, retry_wait=0.1)
    with pytest.raises(jss.NoRespondersError, match=r"\(2 attempts\)"):
        fut.result(timeout=5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(retry_attempts=-2), "retry_attempts"),
        (dict(retry_attempts=1.5), "retry_attempts"),
        (dict(retry_attempts=True), "retry_attempts"),
        (dict(retry_wait=-0.1), "retry_wait"),
        (dict(retry_wait="1"), "retry_wait"),
    ],
)
def test_bad_retry_options_are_refused_before_anything_is_sent(js, kwargs, match):
    for call in (js.publish, js.publish_async):
        with pytest.raises(jss.InvalidOptionError, match=match):
            call("nobody.takes.this", b"", **kwargs)
