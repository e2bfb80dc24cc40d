"""Each ack kind, verified on the server; an ack is on the server before the
next pull or API request of the same client, and acking a message that is
not a JetStream one is refused."""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import first, publish, raw_pull, timed, wait_until


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
    c = stream.create_consumer(durable_name="c", ack_wait=2.0)
    spy = nc.subscribe(f"$JS.ACK.{stream.name}.c.>")
    nc.flush()
    (msg,) = raw_pull(nc, stream.name, "c", 1)
    for _ in range(5):
        time.sleep(0.5)  # working; the point is that 2.5 s > ack_wait passes (each +WPI well within it)
        msg.in_progress()
    assert [spy.next_msg(timeout=5).data for _ in range(5)] == [b"+WPI"] * 5
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


@pytest.mark.timeout(60)
def test_nak_then_fetch_gets_the_redelivery(js, stream, subj):
    """fetch 1, nak it, fetch 1: the second fetch is the NAK'd message (the
    NAK is on the server before the pull), every time."""
    publish(js, subj, 2)
    mismatches = []
    for i in range(20):
        cons = stream.create_consumer(durable_name=f"nak{i}", ack_policy="explicit")
        m = first(cons.fetch(1, expires=2))
        m.nak()
        again = first(cons.fetch(1, expires=2))
        if again.metadata.sequence.stream != m.metadata.sequence.stream:
            mismatches.append((i, m.metadata.sequence.stream, again.metadata.sequence.stream))
        cons.delete()
    assert not mismatches, (
        f"{len(mismatches)}/20 times the fetch after a NAK did not return the NAK'd message "
        f"(iteration, nak'd seq, fetched seq): {mismatches[:5]}"
    )


@pytest.mark.timeout(60)
def test_ack_then_info_counts_it_acked(js, subj, cons):
    """msg.ack() then cons.info(): the ack is counted, every time."""
    publish(js, subj, 50)
    still_pending = []
    for i in range(50):
        m = first(cons.fetch(1, expires=2))
        m.ack()
        n = cons.info().num_ack_pending
        if n != 0:
            still_pending.append((i, n))
    assert not still_pending, (
        f"{len(still_pending)}/50 times cons.info() right after msg.ack() still counted it pending "
        f"(iteration, num_ack_pending): {still_pending[:5]}"
    )


@pytest.mark.timeout(60)
def test_ack_on_a_core_request_message_is_refused(server, nc):
    # A second connection sees everything sent to request inboxes, so an ack
    # protocol payload leaking to the requester is caught even after the first reply.
    spy_client = jss.connect(server.url, name="inbox-spy")
    try:
        spy = spy_client.subscribe("_INBOX.>")
        spy_client.flush()
        sub = nc.subscribe("svc")
        nc.flush()

        results = {}
        seen = {}

        def responder():
            try:
                m = sub.next_msg(timeout=10)
            except BaseException as exc:  # noqa: BLE001
                results["receive"] = exc
                return
            seen["reply"] = m.reply
            for name, call in [
                ("ack", m.ack),
                ("nak", m.nak),
                ("term", m.term),
                ("in_progress", m.in_progress),
                ("ack_sync", lambda: m.ack_sync(timeout=2)),
            ]:
                try:
                    call()
                    results[name] = None
                except BaseException as exc:  # noqa: BLE001
                    results[name] = exc
            nc.publish(m.reply, b"answer")

        t = threading.Thread(target=responder, name="responder", daemon=True)
        t.start()
        exc, _took = timed(lambda: seen.setdefault("response", nc.request("svc", b"q", timeout=5)))
        t.join(10)
        assert not t.is_alive(), "responder hung"
        assert "receive" not in results, f"responder got no request: {results.get('receive')!r}"

        for name in ("ack", "nak", "term", "in_progress", "ack_sync"):
            assert isinstance(results[name], jss.NotJSMessageError), (
                f"msg.{name}() on a core request message: expected NotJSMessageError, got {results[name]!r}"
            )
        # The requester got the explicit answer (or timed out), never an ack payload.
        if exc is None:
            assert seen["response"].data == b"answer", f"requester got {seen['response'].data!r}"
        else:
            assert isinstance(exc, jss.TimeoutError), f"request failed with {exc!r}"

        spy_client.flush()
        nc.flush()
        sent = []
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                m = spy.next_msg(timeout=0.2)
            except jss.TimeoutError:
                break
            if m.subject == seen["reply"]:
                sent.append(m.data)
        assert sent == [b"answer"], f"payloads sent to the request inbox: {sent!r}"
        assert nc.is_connected
    finally:
        spy_client.close()
