"""Each ack kind, verified on the server."""

from __future__ import annotations

import time

import pytest

import jetstream_sync as jss

from ..helpers import raw_pull, wait_until


@pytest.fixture
def loaded(js, stream):
    subj = f"{stream.name.lower()}.x"
    for i in range(5):
        js.publish(subj, f"m{i}".encode())
    return stream


def consumer(stream, **kw):
    return stream.create_consumer(durable_name="c", ack_policy="explicit", ack_wait=30.0, **kw)


def test_ack_clears_ack_pending(nc, loaded):
    c = consumer(loaded)
    msgs = raw_pull(nc, loaded.name, "c", 5)
    assert [m.data for m in msgs] == [f"m{i}".encode() for i in range(5)]
    assert c.info().num_ack_pending == 5
    for m in msgs[:3]:
        m.ack()
    wait_until(lambda: c.info().num_ack_pending == 2)
    assert c.info().ack_floor.stream_seq == 3
    with pytest.raises(jss.MsgAlreadyAckedError):
        msgs[0].ack()
    with pytest.raises(jss.MsgAlreadyAckedError):
        msgs[0].nak()


def test_ack_sync_is_confirmed(nc, loaded):
    c = consumer(loaded)
    (msg,) = raw_pull(nc, loaded.name, "c", 1)
    msg.ack_sync(timeout=5)
    assert msg.is_acked
    assert c.info().num_ack_pending == 0  # no polling needed: the server confirmed
    with pytest.raises(jss.MsgAlreadyAckedError):
        msg.ack_sync()


def test_nak_redelivers_now_and_counts_redelivered(nc, loaded):
    c = consumer(loaded)
    (msg,) = raw_pull(nc, loaded.name, "c", 1)
    msg.nak()
    # The server applies the NAK asynchronously, so a pull may first get the
    # next message; the NAK'd one must come back long before AckWait (30 s).
    rest = raw_pull(nc, loaded.name, "c", 5, expires=5.0)
    again = [m for m in rest if m.metadata.sequence.stream == msg.metadata.sequence.stream]
    assert len(again) == 1 and again[0].metadata.num_delivered == 2
    assert c.info().num_redelivered == 1


def test_nak_with_delay_redelivers_no_sooner(nc, loaded):
    consumer(loaded, max_ack_pending=1)
    (msg,) = raw_pull(nc, loaded.name, "c", 1)
    seq = msg.metadata.sequence.stream
    naked = time.monotonic()
    msg.nak(delay=1.0)
    nc.flush()
    # With max_ack_pending=1 the next delivery must be the delayed message.
    got = raw_pull(nc, loaded.name, "c", 1, expires=3.0, timeout=4.0)
    elapsed = time.monotonic() - naked
    assert got and got[0].metadata.sequence.stream == seq
    assert elapsed >= 1.0


def test_term_with_reason_is_seen_on_the_ack_subject(nc, loaded):
    c = consumer(loaded)
    spy = nc.subscribe(f"$JS.ACK.{loaded.name}.c.>")
    nc.flush()
    a, b = raw_pull(nc, loaded.name, "c", 2)
    a.term()
    b.term(reason="bad payload")
    bodies = {spy.next_msg(timeout=5).data, spy.next_msg(timeout=5).data}
    assert bodies == {b"+TERM", b"+TERM bad payload"}
    wait_until(lambda: c.info().num_ack_pending == 0)
    assert c.info().num_redelivered == 0


def test_in_progress_is_repeatable_and_extends_ack_wait(nc, js, stream):
    js.publish(f"{stream.name.lower()}.x", b"slow")
    c = stream.create_consumer(durable_name="c", ack_wait=1.0)
    spy = nc.subscribe(f"$JS.ACK.{stream.name}.c.>")
    nc.flush()
    (msg,) = raw_pull(nc, stream.name, "c", 1)
    for _ in range(3):
        time.sleep(0.5)  # working; the point is that 1.5 s > ack_wait passes
        msg.in_progress()
    assert [spy.next_msg(timeout=5).data for _ in range(3)] == [b"+WPI"] * 3
    msg.ack()
    wait_until(lambda: c.info().num_ack_pending == 0)
    assert c.info().num_redelivered == 0


def test_ack_bodies_on_the_wire(nc, loaded):
    consumer(loaded)
    spy = nc.subscribe(f"$JS.ACK.{loaded.name}.c.>")
    nc.flush()
    a, b, c = raw_pull(nc, loaded.name, "c", 3)
    a.ack()
    b.nak()
    c.nak(delay=0.000000123)
    assert [spy.next_msg(timeout=5).data for _ in range(3)] == [b"+ACK", b"-NAK", b'-NAK {"delay": 123}']


def test_acks_are_flushed_by_close(server, js, stream):
    js.publish(f"{stream.name.lower()}.x", b"1")
    js.publish(f"{stream.name.lower()}.x", b"2")
    c = stream.create_consumer(durable_name="c", ack_wait=30)
    other = jss.connect(server.url)
    msg, late = raw_pull(other, stream.name, "c", 2)
    msg.ack()
    other.close()  # the queued ack must go out before the socket closes
    wait_until(lambda: c.info().num_ack_pending == 1)
    with pytest.raises(jss.ConnectionClosedError):
        late.ack()
