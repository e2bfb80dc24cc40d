"""Fast-ingest batch publish (ADR-50, server 2.14+) on a real server: what
orbit.go's jetstreamext fast publisher tests check, in blocking form, plus
flow control observed on the wire and failures that report what was stored."""

from __future__ import annotations

import json
import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import wait_until


@pytest.fixture
def fast(js, stream_name):
    name = f"FAST{stream_name}"  # a stream of the test's own: batch sequences match stream sequences
    js.create_stream(name=name, subjects=["fast.>"], allow_batched=True, max_msg_size=1024)
    yield name
    js.delete_stream(name)


def test_basic_add_and_commit(js, fast):
    batch = js.fast_batch()
    assert batch.add("fast.1", b"message 1") == jss.FastPubAck(1, 0)  # the server's first ack is "seq 0"
    ack = batch.add("fast.2", "message 2")
    assert (ack.batch_seq, ack.ack_seq) == (2, 0)
    done = batch.commit("fast.3", b"message 3")
    assert (done.stream, done.batch_size, done.seq) == (fast, 3, 3)
    assert done.batch_id == batch.batch_id and batch.closed
    with pytest.raises(jss.BatchClosedError):
        batch.add("fast.4", b"message 4")
    assert js.stream_info(fast).state.messages == 3
    assert [js.get_msg(fast, seq=i).data for i in (1, 2, 3)] == [b"message 1", b"message 2", b"message 3"]


def test_ten_thousand_messages_in_one_batch_are_stored_in_order(js, fast):
    n = 10_000
    ack = js.publish_fast_batch([("fast.bulk", b"%d" % i) for i in range(n)])
    assert (ack.batch_size, ack.seq) == (n, n)
    info = js.stream_info(fast)
    assert (info.state.messages, info.state.first_seq, info.state.last_seq) == (n, 1, n)
    got = [m.data for m in js.ordered_consumer(fast).fetch(n, expires=10.0)]
    assert got == [b"%d" % i for i in range(n)]


def test_flow_control_waits_for_the_servers_acks(js, fast, server):
    # A second client sees, in the order the server wrote them, the batch's
    # messages and the flow acks on its control inbox.
    flow, outstanding, n = 5, 2, 60
    seen, replies = [], []
    lock = threading.Lock()

    def record(msg):
        with lock:
            if msg.subject == "fast.fc":
                seen.append(("msg", int(msg.data)))
                replies.append(msg.reply)
            elif b'"type":"ack"' in msg.data:
                seen.append(("ack", json.loads(msg.data)["seq"]))

    with jss.connect(server.url) as observer:
        observer.subscribe(">", cb=record)  # one subscription: one ordered stream of events
        observer.flush()
        batch = js.fast_batch(flow=flow, max_outstanding_acks=outstanding)
        results = [batch.add("fast.fc", b"%d" % i) for i in range(1, n + 1)]
        assert batch.commit("fast.fc", b"%d" % (n + 1)).batch_size == n + 1
        wait_until(lambda: len([e for e in seen if e[0] == "msg"]) == n + 1)
    acked = 0
    for kind, seq in list(seen):
        if kind == "ack":
            acked = max(acked, seq)
        elif seq > 1:  # message 1 waits for the first ack ("seq 0")
            # message seq was sent only once seq-1 < acked + flow * outstanding
            assert seq - 1 < acked + flow * outstanding, (seq, acked)
    acks = [seq for kind, seq in seen if kind == "ack"]
    assert acks[0] == 0 and len(acks) >= n // flow  # an ack every `flow` messages
    assert batch.flow_acks >= n // flow
    assert all(r.ack_seq <= r.batch_seq for r in results)
    # The flow asked for stays in every reply subject, whatever the server set since (ADR-50).
    assert all(f".{flow}.fail.{i}." in reply for i, reply in enumerate(replies, 1))
    assert replies[0].endswith(".1.0.$FI") and replies[-1].endswith(f".{n + 1}.2.$FI")


def test_one_outstanding_ack_per_message_stalls_on_every_message(js, fast):
    batch = js.fast_batch(flow=1, max_outstanding_acks=1, ack_timeout=5)
    for i in range(1, 51):
        ack = batch.add("fast.stall", b"data")
        assert ack.ack_seq >= ack.batch_seq == i  # waited at the exact boundary
    assert batch.commit("fast.stall", b"commit").batch_size == 51


def test_close_ends_the_batch_without_another_message(js, fast):
    with js.fast_batch() as batch:
        batch.add("fast.c", b"1")
        batch.add("fast.c", b"2")
        ack = batch.close()
    assert ack.batch_size == 2 and batch.closed and batch.size == 2
    with pytest.raises(jss.BatchClosedError):
        batch.add("fast.c", b"3")
    assert js.stream_info(fast).state.messages == 2
    with js.fast_batch() as empty:
        assert empty.close() is None  # nothing was sent


def test_leaving_the_block_closes_the_batch(js, fast):
    with js.fast_batch() as batch:
        for i in range(7):
            batch.add("fast.w", b"%d" % i)
    assert batch.closed and js.stream_info(fast).state.messages == 7


def test_a_single_message_commit(js, fast):
    ack = js.fast_batch().commit("fast.one", b"only")
    assert (ack.stream, ack.seq) == (fast, 1)
    assert js.get_msg(fast, seq=1).data == b"only"


def test_continue_on_gap_goes_past_a_refused_message(js, fast):
    notices = []
    batch = js.fast_batch(continue_on_gap=True, error_handler=notices.append)
    for i in range(5):
        batch.add("fast.gap", b"data", headers={"Nats-Expected-Last-Subject-Sequence": "999"} if i == 2 else None)
    ack = batch.commit("fast.gap", b"final")
    assert ack.batch_size >= 5
    assert js.stream_info(fast).state.messages == 5  # all but the refused one
    assert any(isinstance(n, jss.APIError) and n.err_code == 10071 for n in notices)


def test_a_wrong_expected_sequence_mid_batch_reports_what_was_stored(js, fast):
    batch = js.fast_batch(flow=2, max_outstanding_acks=1)
    for i in range(5):
        batch.add("fast.mid", b"%d" % i)
    with pytest.raises(jss.FastBatchError) as info:
        batch.add("fast.mid", b"bad", headers={"Nats-Expected-Last-Subject-Sequence": "1"})
        for _ in range(20):
            batch.add("fast.mid", b"more")
        batch.commit("fast.mid", b"never")
    err = info.value
    assert (err.stored, err.last_seq, err.failed_seq) == (5, 5, 6)
    assert isinstance(err.__cause__, jss.APIError) and err.__cause__.err_code == 10071
    assert "5 of" in str(err) and "stream sequence 5" in str(err)
    assert batch.closed
    assert js.stream_info(fast).state.messages == 5


def test_a_message_too_large_for_the_stream_mid_batch_reports_what_was_stored(js, fast):
    js.publish("fast.before", b"x")  # the batch's stream sequences start at 2
    with pytest.raises(jss.FastBatchError) as info:
        js.publish_fast_batch([("fast.big", b"ok")] * 3 + [("fast.big", b"x" * 2000)] + [("fast.big", b"ok")] * 30,
                              flow=2, max_outstanding_acks=1)  # fmt: skip
    err = info.value
    assert (err.stored, err.last_seq, err.failed_seq) == (3, 4, 4)
    assert err.__cause__.err_code == 10054  # message size exceeds maximum
    assert js.stream_info(fast).state.messages == 4


def test_a_stream_without_allow_batched_refuses_clearly(js):
    js.create_stream(name="NOFAST", subjects=["nofast.>"])
    try:
        with pytest.raises(jss.FastBatchError, match="allow_batched") as info:
            js.publish_fast_batch([("nofast.a", b"1"), ("nofast.a", b"2")])
        assert (info.value.stored, info.value.__cause__.err_code) == (0, jss.ErrorCode.BATCH_PUBLISH_DISABLED)
        assert js.stream_info("NOFAST").state.messages == 0
    finally:
        js.delete_stream("NOFAST")


def test_a_subject_without_a_stream_fails_at_once(js):
    with pytest.raises(jss.FastBatchError, match="no stream") as info:
        js.publish_fast_batch([("nowhere.a", b"1"), ("nowhere.a", b"2")], ack_timeout=2.0)
    assert info.value.stored == 0 and info.value.__cause__.code == 503


BAD = [
    (dict(flow=0), "flow"),
    (dict(flow=70000), "flow"),
    (dict(max_outstanding_acks=4), "max_outstanding_acks"),
    (dict(ack_timeout=-1), "ack_timeout"),
    (dict(continue_on_gap="no"), "continue_on_gap"),
    (dict(error_handler=3), "error_handler"),
]


@pytest.mark.parametrize("kwargs, says", BAD)
def test_bad_options_are_refused_before_anything_is_sent(js, fast, kwargs, says):
    with pytest.raises(jss.InvalidOptionError, match=says):
        js.publish_fast_batch([("fast.o", b"1")], **kwargs)
    with pytest.raises(jss.InvalidOptionError, match=says):
        js.fast_batch(**kwargs)
    assert js.stream_info(fast).state.messages == 0


@pytest.mark.parametrize(
    "messages, says",
    [
        ([], "one or more"),
        ([("fast.a", b"1"), ("fast.*", b"2")], "wildcards"),
        ([("fast.a", b"1"), ("fast.a",)], "batch item 2"),
        ([("fast.a", b"1"), ("fast.a", 5)], "data"),
        ([("fast.a", b"1"), ("fast.a", b"2", "h")], "headers of batch item 2"),
        ([("fast.a", b"1"), ("fast.a", b"x" * (2 * 1024 * 1024))], "max_payload"),
    ],
)
def test_bad_messages_are_refused_before_anything_is_sent(js, fast, messages, says):
    with pytest.raises(jss.InvalidOptionError, match=says):
        js.publish_fast_batch(messages)
    assert js.stream_info(fast).state.messages == 0


def test_a_batch_from_several_threads_one_batch_each(js, fast):
    errors = []

    def publish(k):
        try:
            assert js.publish_fast_batch([(f"fast.t{k}", b"%d" % i) for i in range(500)], flow=50).batch_size == 500
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and not any(t.is_alive() for t in threads)
    wait_until(lambda: js.stream_info(fast).state.messages == 2000)


def test_a_server_that_stops_answering_fails_the_batch_within_ack_timeout(fnc, private_server):
    js = fnc.jetstream()
    js.create_stream(name="FASTP", subjects=["fastp.>"], allow_batched=True)
    batch = js.fast_batch(ack_timeout=1.0)
    batch.add("fastp.a", b"1")
    with private_server.paused():
        started = time.monotonic()
        with pytest.raises(jss.FastBatchError, match="no answer") as info:
            batch.commit("fastp.a", b"2")
        assert time.monotonic() - started < 3.0
    assert info.value.stored == 0 and batch.closed


def test_a_server_restart_mid_batch_reports_what_the_flow_acks_confirmed(fnc, private_server):
    # The server holds a batch's state in memory: restarted (with its store), it answers the
    # next message with "batch publish ID unknown" and cannot say how many it stored. `stored`
    # is then what its flow acks confirmed; the stream holds messages 1 to k, stored <= k <= sent.
    js = fnc.jetstream()
    js.create_stream(name="FASTR", subjects=["fastr.>"], allow_batched=True)
    flow, outstanding = 100, 2
    batch = js.fast_batch(flow=flow, max_outstanding_acks=outstanding, ack_timeout=4)
    acked = 0
    with pytest.raises(jss.FastBatchError) as info:
        for i in range(1, 20_001):
            if i == 5_001:
                private_server.restart()
            acked = max(acked, batch.add("fastr.x", b"%d" % i).ack_seq)
    err = info.value
    assert acked >= 4_800 and err.stored >= acked  # never less than the flow acks confirmed
    assert err.sent == batch.size and err.stored <= err.sent <= err.stored + flow * outstanding
    # Which the client meets first depends on how far the restarted server got: the batch
    # unknown to it, or its stream not loaded yet. Either way it cannot say what was stored.
    assert ("no longer knows the batch" in str(err) or "no stream answered" in str(err)) and batch.closed
    assert f"{err.stored} of {err.sent} messages confirmed stored" in str(err)
    held = js.stream_info("FASTR").state.messages
    got = [m.data for m in js.ordered_consumer("FASTR").fetch(held, expires=10.0)]
    assert got == [b"%d" % i for i in range(1, held + 1)]  # messages 1 to k, in order, once each
    assert err.stored <= held <= err.sent


def test_a_batch_resumed_after_a_restart_with_message_ids_stores_every_message_once(fnc, private_server):
    # What docs/fast-batch.md advises: with a Nats-Msg-Id on each message, a new batch from
    # stored + 1 stores only what the stream lacks of the messages that may be stored already.
    js = fnc.jetstream()
    js.create_stream(name="FASTM", subjects=["fastm.>"], allow_batched=True)
    n = 3_000
    items = [("fastm.x", b"%d" % i, {"Nats-Msg-Id": f"m-{i}"}) for i in range(1, n + 1)]
    batch = js.fast_batch(flow=100, ack_timeout=4)
    with pytest.raises(jss.FastBatchError) as info:
        for i, (subject, data, headers) in enumerate(items, 1):
            if i == 1_001:
                private_server.restart()
            batch.add(subject, data, headers=headers)
    assert info.value.stored >= 800
    ack = js.publish_fast_batch(items[info.value.stored:])
    assert ack.seq == n
    got = [m.data for m in js.ordered_consumer("FASTM").fetch(n + 1, expires=2.0)]
    assert got == [b"%d" % i for i in range(1, n + 1)]


def test_a_connection_closed_mid_batch_ends_it_with_what_the_flow_acks_confirmed(fnc, private_server):
    js = fnc.jetstream()
    js.create_stream(name="FASTC", subjects=["fastc.>"], allow_batched=True)
    batch = js.fast_batch(flow=10, ack_timeout=4)
    acked = max(batch.add("fastc.x", b"%d" % i).ack_seq for i in range(1, 101))
    fnc.close()
    with pytest.raises(jss.FastBatchError, match="connection closed") as info:
        batch.add("fastc.x", b"101")
    err = info.value
    assert isinstance(err.__cause__, jss.ConnectionClosedError)
    assert (err.sent, err.last_seq, err.failed_seq) == (100, None, None) and 80 <= acked <= err.stored <= 100
    assert batch.closed
    with jss.connect(private_server.url) as nc:
        assert err.stored <= nc.jetstream().stream_info("FASTC").state.messages <= err.sent


def test_a_connection_lost_for_good_mid_batch_fails_at_once(private_server):
    # No reconnect: the batch waiting for a flow ack learns of the closed connection at once,
    # not after ack_timeout.
    with jss.connect(private_server.url, allow_reconnect=False) as nc:
        js = nc.jetstream()
        js.create_stream(name="FASTG", subjects=["fastg.>"], allow_batched=True)
        batch = js.fast_batch(flow=10, max_outstanding_acks=1, ack_timeout=30)
        for i in range(50):
            batch.add("fastg.x", b"%d" % i)
        private_server.stop()
        started = time.monotonic()
        with pytest.raises(jss.FastBatchError, match="connection closed") as info:
            for _ in range(1000):
                batch.add("fastg.x", b"more")
        assert time.monotonic() - started < 10
        assert isinstance(info.value.__cause__, jss.ConnectionClosedError) and info.value.stored >= 40
