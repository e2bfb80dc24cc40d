"""The subscribe workflow (ADR-15, ADR-13) in blocking form: nats.py's
SubscribeTest and PullSubscribeTest cases, and one test per binding error."""

from __future__ import annotations

import datetime
import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import publish, wait_blocked, wait_until


@pytest.fixture
def multi(js):
    js.create_stream(name="TEST2", subjects=["a1", "a2", "a3", "a4"])
    return "TEST2"


# -- pull_subscribe ------------------------------------------------------------------


def test_pull_subscribe_creates_a_consumer_filtered_on_the_subject(js, multi):
    for i in range(1, 10):
        js.publish("a1", f"a1:{i}".encode())
    sub = js.pull_subscribe("a2", "auto")
    js.publish("a2", b"one")
    for i in range(10, 20):
        js.publish("a3", f"a3:{i}".encode())
    msgs = sub.fetch(1)
    assert [m.data for m in msgs] == [b"one"]
    msgs[0].ack()
    with pytest.raises(jss.TimeoutError):
        sub.fetch(1, timeout=0.5)
    sub2 = js.pull_subscribe("a2", "auto2", config=jss.ConsumerConfig(max_waiting=10))
    assert sub2.consumer_info().config.max_waiting == 10
    assert sub2.fetch(1)[0].data == b"one"
    sub3 = js.pull_subscribe("a3", "auto3")
    assert sub3.fetch(1)[0].data == b"a3:10"
    everything = js.pull_subscribe("", "all", stream=multi)
    first = everything.fetch(1)[0]
    assert first.data == b"a1:1"


def test_fetch_returns_what_is_there_without_waiting_for_the_batch(js, multi):
    publish(js, "a1", 10)
    sub = js.pull_subscribe("a1", "dn", config=jss.ConsumerConfig(max_waiting=3))
    msgs = sub.fetch(5)
    assert [m.data for m in msgs] == [str(i).encode() for i in range(5)]
    for m in msgs:
        m.ack()
    assert sub.consumer_info().num_pending == 5
    t0 = time.monotonic()
    msgs = sub.fetch(10, timeout=20)  # five are there: no wait for ten
    assert len(msgs) == 5 and time.monotonic() - t0 < 10
    for m in msgs:
        m.ack_sync()
    info = sub.consumer_info()
    assert info.num_ack_pending == 0 and info.num_pending == 0


def test_fetch_waits_for_the_first_and_returns_with_it(js, multi):
    sub = js.pull_subscribe("a1", "dw")
    out = []
    t = threading.Thread(target=lambda: out.append(sub.fetch(3, timeout=10)))
    t.start()
    wait_until(lambda: sub.consumer_info().num_waiting >= 1)
    js.publish("a1", b"late")
    t.join(10)
    assert [m.data for m in out[0]] == [b"late"]
    out[0][0].ack_sync()
    info = sub.consumer_info()
    assert info.num_ack_pending == 0 and info.num_redelivered == 0


def test_fetch_one_acks_nak_term(js, multi):
    js.publish("a1", b"Hello")
    sub = js.pull_subscribe("a1", "dur")
    msg = sub.fetch(1)[0]
    md = msg.metadata
    assert (md.sequence.stream, md.sequence.consumer, md.num_pending, md.num_delivered) == (1, 1, 0, 1)
    msg.ack()
    with pytest.raises(jss.TimeoutError):
        sub.fetch(timeout=0.5)
    for i in range(3):
        js.publish("a1", f"i:{i}".encode(), headers={"hello": "world"})
    msg = sub.fetch()[0]
    assert msg.headers == {"hello": "world"}
    msg.nak()
    again = sub.fetch()[0]
    assert again.data == msg.data and again.metadata.num_delivered == 2
    again.term()
    nxt = sub.fetch()[0]
    assert nxt.data == b"i:1"


def test_pull_subscribe_deletes_only_what_it_created(js, multi):
    sub = js.pull_subscribe("a1", "made")
    assert "made" in js.consumer_names(multi)
    sub.unsubscribe()
    assert "made" not in js.consumer_names(multi)
    with pytest.raises(jss.SubscriptionClosedError):
        sub.unsubscribe()
    with pytest.raises(jss.SubscriptionClosedError):
        sub.fetch(1)
    js.create_consumer(multi, durable_name="kept", filter_subject="a1")
    sub = js.pull_subscribe("a1", "kept")
    sub.unsubscribe()
    assert "kept" in js.consumer_names(multi)


def test_ephemeral_pull_subscribe_is_deleted_on_unsubscribe(js, multi):
    with js.pull_subscribe("a1") as sub:
        name = sub.consumer
        assert name in js.consumer_names(multi)
    assert name not in js.consumer_names(multi)


def test_pull_subscribe_bind(js, multi):
    with pytest.raises(jss.ConsumerNotFoundError):
        js.pull_subscribe_bind("nobody", multi)
    js.create_consumer(multi, durable_name="b", filter_subject="a4")
    js.publish("a4", b"x")
    sub = js.pull_subscribe_bind("b", multi)
    assert sub.fetch(1)[0].data == b"x"
    sub.unsubscribe()
    assert "b" in js.consumer_names(multi)


def test_fetch_heartbeat_and_validation(js, multi):
    sub = js.pull_subscribe("a1", "hb")
    with pytest.raises(jss.InvalidOptionError):
        sub.fetch(0)
    with pytest.raises(jss.InvalidOptionError):
        sub.fetch(1, timeout=1, heartbeat=0.9)
    with pytest.raises(jss.TimeoutError):
        sub.fetch(1, timeout=1, heartbeat=0.2)


# -- binding errors (ADR-15), each before anything is consumed --------------------------


def test_pull_subscribe_to_a_push_consumer_is_refused(js, multi):
    js.create_push_consumer(multi, durable_name="p", deliver_subject="dlv.p", filter_subject="a1")
    with pytest.raises(jss.SubscribeError, match="push based"):
        js.pull_subscribe("a1", "p")


def test_filter_mismatch_is_refused(js, multi):
    js.create_consumer(multi, durable_name="f", filter_subject="a1")
    with pytest.raises(jss.SubscribeError, match="filter subject"):
        js.pull_subscribe("a2", "f")


def test_config_mismatch_is_refused(js, multi):
    js.create_consumer(multi, durable_name="c", filter_subject="a1", max_ack_pending=10)
    with pytest.raises(jss.SubscribeError, match="max_ack_pending"):
        js.pull_subscribe("a1", "c", config=jss.ConsumerConfig(max_ack_pending=20))
    js.pull_subscribe("a1", "c", config=jss.ConsumerConfig(max_ack_pending=10)).unsubscribe()


def test_subject_in_no_stream_or_two_streams(js, multi):
    with pytest.raises(jss.StreamNotFoundError):
        js.pull_subscribe("nowhere", "x")
    js.create_stream(name="OTHER", subjects=["b.>"])
    js.create_stream(name="OTHER2", subjects=["c.>"])
    with pytest.raises(jss.SubscribeError, match="more than one stream"):
        js.pull_subscribe(">", "x")


def test_pull_subscribe_with_no_subject_binds_to_the_only_stream(js, multi):
    # nats-py's pull_subscribe("", "all"): the server names the stream.
    publish(js, "a2", 3)
    sub = js.pull_subscribe("", "all")
    assert sub.consumer_info().stream_name == multi
    assert len(sub.fetch(3, timeout=5)) == 3
    sub.unsubscribe()
    js.create_stream(name="OTHER", subjects=["b.>"])
    with pytest.raises(jss.SubscribeError, match="OTHER.*TEST2|TEST2.*OTHER"):
        js.pull_subscribe("", "all")
    assert js.consumer_names(multi) == []


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("a..b",), {}),
        (("a1", "bad.name"), {}),
        (("a1",), {"stream": "bad.stream"}),
        (("a1",), {"config": {"max_waiting": 3}}),
        (("a1",), {"config": jss.ConsumerConfig(deliver_subject="x")}),
    ],
)
def test_pull_subscribe_bad_input_sends_nothing(js, multi, args, kwargs):
    with pytest.raises(jss.InvalidOptionError):
        js.pull_subscribe(*args, **kwargs)
    assert js.consumer_names(multi) == []


# -- subscribe (push) ------------------------------------------------------------------


@pytest.fixture
def quux(js):
    js.create_stream(name="qsub", subjects=["quux"])
    return "qsub"


def test_queue_subscribe_shares_one_consumer(js, quux):
    got = {1: [], 2: [], 3: []}
    subs = [js.subscribe("quux", "wg", cb=got[i].append) for i in (1, 2, 3)]
    assert len({s.subject for s in subs}) == 1
    assert js.consumer_names(quux) == ["wg"]
    for i in range(100):
        js.publish("quux", f"Hello World {i}".encode())
    wait_until(lambda: sum(len(v) for v in got.values()) == 100, timeout=10)
    assert sorted(m.data for v in got.values() for m in v) == sorted(f"Hello World {i}".encode() for i in range(100))
    assert all(len(v) for v in got.values())  # the queue group spreads the work
    wait_until(lambda: js.consumer_info(quux, "wg").num_ack_pending == 0)  # auto-acked after each callback
    subs[0].unsubscribe()  # created the consumer: deletes it
    assert subs[1].drain(timeout=10)
    subs[2].unsubscribe()
    with pytest.raises(jss.SubscriptionClosedError):
        subs[0].unsubscribe()
    with pytest.raises(jss.SubscriptionClosedError):
        subs[1].drain()
    assert js.consumer_names(quux) == []


def test_push_bound_durable_refuses_a_second_subscriber(js, quux):
    publish(js, "quux", 10)
    got = []
    sub = js.subscribe("quux", cb=got.append, durable="singleton")
    wait_until(lambda: js.consumer_info(quux, "singleton").push_bound)
    with pytest.raises(jss.SubscribeError, match="already bound"):
        js.subscribe("quux", durable="singleton")
    with pytest.raises(jss.SubscribeError, match="queue subscription 'foo': consumer 'singleton' was created without a deliver group"):
        js.subscribe("quux", queue="foo", durable="singleton")
    wait_until(lambda: len(got) == 10)
    two = js.subscribe("quux", durable="two")
    for i in range(10):
        msg = two.next_msg(timeout=5)
        assert msg.data == str(i).encode()
        assert (msg.metadata.sequence.stream, msg.metadata.sequence.consumer) == (i + 1, i + 1)
        msg.ack()
    sub.unsubscribe()
    two.unsubscribe()


def test_ephemeral_subscribers_read_at_their_own_pace(js, quux):
    publish(js, "quux", 10)
    sub1 = js.subscribe("quux")
    sub2 = js.subscribe("quux")
    for n, msg in enumerate(sub1, 1):
        msg.ack_sync()
        if n == 10:
            break
    info1, info2 = sub1.consumer_info(), sub2.consumer_info()
    assert info1.stream_name == quux and info1.num_ack_pending == 0
    assert info2.num_ack_pending + info2.num_pending == 10
    assert info1.name != info2.name
    names = (info1.name, info2.name)
    sub1.unsubscribe()
    sub2.unsubscribe()
    assert not set(names) & set(js.consumer_names(quux))


def test_subscribe_bind_uses_the_consumers_deliver_subject(js, nc):
    js.create_stream(name="hello-stream", subjects=["hello-subject"])
    inbox = nc.new_inbox()
    js.create_push_consumer("hello-stream", durable_name="alice", deliver_subject=inbox)
    sub = js.subscribe_bind("hello-stream", "alice")
    assert (sub.subject, sub.filter_subject, sub.consumer) == (inbox, "", "alice")
    publish(js, "hello-subject", 10)
    for _ in range(10):
        sub.next_msg(timeout=5).ack()
    wait_until(lambda: sub.consumer_info().num_ack_pending == 0)
    sub.unsubscribe()
    assert "alice" in js.consumer_names("hello-stream")  # bound, not created: kept
    with pytest.raises(jss.ConsumerNotFoundError):
        js.subscribe_bind("hello-stream", "bob")
    info = js.consumer_info("hello-stream", "alice")
    again = js.subscribe_bind(info.stream_name, info.config, info.name)  # nats-py's argument order
    publish(js, "hello-subject", 1)
    again.next_msg(timeout=5).ack()
    again.unsubscribe()
    with pytest.raises(jss.SubscribeError, match="max_ack_pending"):
        js.subscribe_bind("hello-stream", jss.ConsumerConfig(max_ack_pending=7), "alice")


def test_subscribe_with_a_deliver_subject_in_the_config(js, nc, quux):
    plain = nc.subscribe("pconfig-deliver")
    got = []
    sub = js.subscribe("quux", stream=quux, cb=got.append, config=jss.ConsumerConfig(name="pconfig-ps", deliver_subject="pconfig-deliver"))
    assert (sub.subject, sub.filter_subject) == ("pconfig-deliver", "quux")
    assert js.consumer_info(quux, "pconfig-ps").config.deliver_subject == "pconfig-deliver"
    publish(js, "quux", 10)
    wait_until(lambda: len(got) == 10)
    seen = [plain.next_msg(timeout=5).data for _ in range(10)]
    assert sorted(seen) == sorted(m.data for m in got)
    sub.unsubscribe()
    plain.unsubscribe()


def test_push_subscription_subject_is_the_consumers_deliver_subject(js, nc, quux):
    """As nats-py's Subscription.subject; the subject asked for is filter_subject."""
    named = js.subscribe("quux", stream=quux, config=jss.ConsumerConfig(name="pconfig", deliver_subject="pconfig-deliver"))
    made = js.subscribe("quux", durable="inboxed")  # the deliver subject is an inbox made here
    queued = [js.subscribe("quux", "wq") for _ in range(2)]
    try:
        assert named.subject == "pconfig-deliver" and named.filter_subject == "quux"
        assert made.subject == js.consumer_info(quux, "inboxed").config.deliver_subject != "quux"
        assert made.filter_subject == "quux" and made.subject.startswith("_INBOX.")
        assert queued[0].subject == queued[1].subject == js.consumer_info(quux, "wq").config.deliver_subject
        assert "pconfig-deliver" in repr(named)
        pulled = js.pull_subscribe("quux", "pulled")  # no deliver subject: the filter subject, as before
        assert pulled.subject == pulled.filter_subject == "quux"
        pulled.unsubscribe()
    finally:
        for sub in (named, made, *queued):
            sub.unsubscribe()


def test_subscribe_filter_subjects(js):
    js.create_stream(name="events", subjects=["events.>"])
    got = []
    sub = js.subscribe("events.>", "filter", cb=got.append, config=jss.ConsumerConfig(filter_subjects=["events.1", "events.2"]))
    for i in range(15):
        js.publish(f"events.{i}", b"i:%d" % i)
    wait_until(lambda: len(got) == 2)
    wait_until(lambda: sub.consumer_info().num_pending == 0)
    sub.unsubscribe()


def test_manual_ack_leaves_acking_to_the_callback(js, quux):
    publish(js, "quux", 3)
    got = []
    sub = js.subscribe("quux", cb=got.append, durable="m", manual_ack=True)
    wait_until(lambda: len(got) == 3)
    assert js.consumer_info(quux, "m").num_ack_pending == 3
    for m in got:
        m.ack()
    wait_until(lambda: js.consumer_info(quux, "m").num_ack_pending == 0)
    sub.unsubscribe()


def test_next_msg_times_out_and_refuses_on_a_callback_subscription(js, quux):
    sub = js.subscribe("quux")
    t0 = time.monotonic()
    with pytest.raises(jss.TimeoutError):
        sub.next_msg(timeout=0.3)
    assert time.monotonic() - t0 < 3
    sub.unsubscribe()
    cb_sub = js.subscribe("quux", cb=lambda m: None)
    with pytest.raises(jss.SubscribeError):
        cb_sub.next_msg()
    cb_sub.unsubscribe()


def test_heartbeats_and_flow_control(js, quux):
    publish(js, "quux", 200, payload=b"x" * 1000)
    sub = js.subscribe("quux", durable="fc", idle_heartbeat=0.5, flow_control=True)
    info = js.consumer_info(quux, "fc")
    assert info.config.flow_control and info.config.idle_heartbeat == pytest.approx(0.5)
    for _ in range(200):
        sub.next_msg(timeout=5).ack()
    sub.unsubscribe()


def test_ordered_subscribe(js, quux):
    publish(js, "quux", 50)
    sub = js.subscribe("quux", ordered_consumer=True)
    seqs = []
    for msg in sub:
        seqs.append(msg.metadata.sequence.stream)
        if len(seqs) == 20:
            js.delete_consumer(quux, sub.consumer_info().name)
        if len(seqs) == 50:
            break
    assert seqs == list(range(1, 51))
    sub.unsubscribe()
    got = []
    cb_sub = js.subscribe("quux", cb=got.append, ordered_consumer=True, idle_heartbeat=1)
    wait_until(lambda: len(got) == 50)
    assert [m.metadata.sequence.stream for m in got] == list(range(1, 51))
    cb_sub.drain(timeout=10)


# -- binding errors and bad input (push) --------------------------------------------------


def test_subscribe_to_a_pull_consumer_is_refused(js, quux):
    js.create_consumer(quux, durable_name="pull")
    with pytest.raises(jss.SubscribeError, match="pull based"):
        js.subscribe("quux", durable="pull")


def test_queue_on_a_consumer_without_deliver_group_is_refused(js, quux):
    js.create_push_consumer(quux, durable_name="wg", deliver_subject="dlv.wg")
    with pytest.raises(jss.SubscribeError, match="without a deliver group"):
        js.subscribe("quux", "wg")


def test_plain_subscribe_to_a_queue_consumer_is_refused(js, quux):
    js.create_push_consumer(quux, durable_name="grp", deliver_subject="dlv.grp", deliver_group="grp")
    with pytest.raises(jss.SubscribeError, match="deliver group 'grp'"):
        js.subscribe("quux", durable="grp")


def test_queue_name_must_match_the_deliver_group(js, quux):
    js.create_push_consumer(quux, durable_name="other", deliver_subject="dlv.o", deliver_group="grp")
    with pytest.raises(jss.SubscribeError, match="deliver group 'grp'"):
        js.subscribe("quux", "other")


def test_queue_that_is_not_the_durables_deliver_group_names_both(js, quux):
    """durable= names the consumer, queue= must be its deliver group (ADR-15):
    a mismatch is a SubscribeError naming the queue, the consumer and its group."""
    js.create_push_consumer(quux, durable_name="qd", deliver_subject="dlv.qd", deliver_group="grp")
    js.create_push_consumer(quux, durable_name="solo", deliver_subject="dlv.solo")
    with pytest.raises(jss.SubscribeError, match="queue subscription 'other': consumer 'qd' has deliver group 'grp'"):
        js.subscribe("quux", queue="other", durable="qd")
    with pytest.raises(jss.SubscribeError, match="queue subscription 'other': consumer 'qd' has deliver group 'grp'"):
        js.subscribe_bind(quux, "qd", queue="other")
    with pytest.raises(jss.SubscribeError, match="queue subscription 'q': consumer 'solo' was created without a deliver group"):
        js.subscribe("quux", queue="q", durable="solo")
    with pytest.raises(jss.SubscribeError, match="consumer 'qd' has deliver group 'grp': subscribe with queue='grp'"):
        js.subscribe("quux", durable="qd")
    with pytest.raises(jss.InvalidOptionError, match="queue 'q'.*deliver_group 'cfg'"):
        js.subscribe("quux", queue="q", config=jss.ConsumerConfig(deliver_group="cfg"))  # checked before sending
    with pytest.raises(jss.InvalidOptionError, match="queue subscription 'workers' to consumer 'new': there is no such"):
        js.subscribe("quux", queue="workers", durable="new")  # one made for a queue is named after it (nats-py)
    assert sorted(js.consumer_names(quux)) == ["qd", "solo"]
    sub = js.subscribe("quux", queue="grp", durable="qd")  # the group fits: bound (as nats.go)
    try:
        assert sub.queue == "grp" and sub.consumer == "qd"
        js.publish("quux", b"one")
        assert sub.next_msg(timeout=5).data == b"one"
    finally:
        sub.unsubscribe()
    assert sorted(js.consumer_names(quux)) == ["qd", "solo"]  # bound, not created: kept


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("qu..ux",), {}),
        (("quux", "bad queue"), {}),
        (("quux",), {"cb": "not callable"}),
        (("quux", "wg"), {"flow_control": True, "idle_heartbeat": 1}),
        (("quux", "wg"), {"idle_heartbeat": 1}),
        (("quux",), {"flow_control": True}),
        (("quux",), {"ordered_consumer": True, "durable": "d"}),
        (("quux", "q"), {"ordered_consumer": True}),
        (("quux",), {"idle_heartbeat": -1}),
        (("quux",), {"manual_ack": "yes"}),
        (("quux",), {"deliver_policy": "sideways"}),
        (("quux",), {"config": {"durable_name": "x"}}),
        (("quux", "a"), {"durable": "b"}),
        (("quux",), {"durable": "a", "config": jss.ConsumerConfig(durable_name="b")}),
        (("quux",), {"ordered_consumer": True, "config": jss.ConsumerConfig(max_deliver=5)}),
        (("quux",), {"headers_only": "yes"}),
        (("quux", "q"), {"config": jss.ConsumerConfig(durable_name="other")}),
        (("quux",), {"headers_only": 1, "ordered_consumer": True}),
        (("quux",), {"ordered_consumer": True, "config": jss.ConsumerConfig(name="n")}),
        (("quux",), {"ordered_consumer": True, "config": jss.ConsumerConfig(ack_policy="all")}),
    ],
)
def test_subscribe_bad_input_sends_nothing(js, quux, args, kwargs):
    with pytest.raises(jss.InvalidOptionError):
        js.subscribe(*args, **kwargs)
    assert js.consumer_names(quux) == []


def test_concurrent_fetches_see_only_messages_or_timeouts(js, multi):
    """Six threads fetching from one subscription while a seventh publishes:
    no API-level errors, each message to one fetch (nats.py test_fetch_concurrent)."""
    sub = js.pull_subscribe("a1", "durable-1", config=jss.ConsumerConfig(max_waiting=3))
    stop = threading.Event()
    published = []

    def publisher():
        i = 0
        while not stop.is_set():
            js.publish("a1", str(i).encode())
            published.append(i)
            i += 1
            stop.wait(0.01)

    got, errs = [], []

    def fetcher():
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                for m in sub.fetch(2, timeout=1):
                    got.append(int(m.data))
                    m.ack()
            except jss.TimeoutError:
                continue
            except Exception as exc:  # anything else is a defect
                errs.append(exc)

    pub = threading.Thread(target=publisher)
    pub.start()
    threads = [threading.Thread(target=fetcher) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    stop.set()
    pub.join(5)
    assert not errs, errs[:3]
    assert len(got) == len(set(got))  # never the same message to two fetches
    rest = []
    while True:
        try:
            rest += [int(m.data) for m in sub.fetch(100, timeout=0.5)]
        except jss.TimeoutError:
            break
    assert sorted(set(got) | set(rest)) == published  # nothing lost


def test_a_timed_out_fetch_leaves_no_orphan_pull(js, multi):
    """The next fetch gets a message published while it waits promptly, not
    after an earlier fetch's abandoned pull swallowed it (nats.py test_fetch_no_orphan_on_timeout)."""
    sub = js.pull_subscribe("a1", "durable-orphan")
    with pytest.raises(jss.TimeoutError):
        sub.fetch(100, timeout=0.1)
    out = []
    t = threading.Thread(target=lambda: out.append(sub.fetch(100, timeout=20.0)))
    t.start()
    wait_until(lambda: sub.consumer_info().num_waiting >= 1)
    t0 = time.monotonic()
    js.publish("a1", b"hello")
    t.join(25)
    assert [m.data for m in out[0]] == [b"hello"]
    assert time.monotonic() - t0 < 10.0  # with the message, not at the fetch's timeout


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(ordered_consumer=True, idle_heartbeat=0.1),  # below the pull heartbeat floor: checked before the stream lookup
        dict(ordered_consumer=True, idle_heartbeat=100),
        dict(idle_heartbeat=0.0001, durable="hb"),
    ],
)
def test_heartbeats_the_server_would_refuse_are_refused_first(js, quux, kwargs):
    spy = js.client.subscribe("$JS.API.>")
    with pytest.raises(jss.InvalidOptionError):
        js.subscribe("quux", **kwargs)
    with pytest.raises(jss.TimeoutError):
        spy.next_msg(timeout=0.2)  # no API request went out
    spy.unsubscribe()


def test_names_and_errors_after_the_fact(js, quux):
    publish(js, "quux", 30)
    sub = js.subscribe("quux", ordered_consumer=True)
    first = sub.consumer
    msg = sub.next_msg(timeout=5)
    assert msg.header == msg.headers  # nats-py's name
    js.delete_consumer(quux, first)
    for _ in range(29):
        sub.next_msg(timeout=10)
    wait_until(lambda: sub.consumer != first)  # recreated under a new name (all 30 may have come before)
    assert sub.consumer
    assert sub.consumer in repr(sub)
    blocked = []
    t = threading.Thread(target=lambda: blocked.append(pytest.raises(jss.SubscriptionClosedError, sub.next_msg, 10)))
    t.start()
    wait_blocked(t)
    sub.unsubscribe()
    t.join(10)
    assert blocked  # the reader got SubscriptionClosedError, not an internal "context stopped"
    with pytest.raises(jss.SubscriptionClosedError):
        sub.unsubscribe()
    with pytest.raises(jss.SubscriptionClosedError):
        sub.next_msg(timeout=0.1)


# -- what the caller asked for: keyword options and config defaults --------------------


def test_deliver_policy_keyword_shapes_the_consumer_created(js, quux):
    publish(js, "quux", 3)
    sub = js.subscribe("quux", deliver_policy="new")
    assert sub.consumer_info().config.deliver_policy == "new"
    with pytest.raises(jss.TimeoutError):
        sub.next_msg(timeout=0.3)  # the three before it are not delivered
    publish(js, "quux", 1, start=3)
    assert sub.next_msg(timeout=5).data == b"3"
    sub.unsubscribe()
    ordered = js.subscribe("quux", ordered_consumer=True, config=jss.ConsumerConfig(deliver_policy="last"))
    assert ordered.next_msg(timeout=5).metadata.sequence.stream == 4
    ordered.unsubscribe()


def test_a_config_naming_only_the_consumer_binds_whatever_its_policies(js, quux):
    # ConsumerConfig() says deliver all / ack explicit / replay instant by
    # default: that is not the caller asking for them.
    js.create_push_consumer(quux, durable_name="n", deliver_subject="dlv.n", deliver_policy="new", ack_policy="none")
    js.subscribe_bind(quux, jss.ConsumerConfig(durable_name="n")).unsubscribe()
    js.subscribe("quux", durable="n", config=jss.ConsumerConfig(max_deliver=-1)).unsubscribe()
    js.create_consumer(quux, durable_name="pn", deliver_policy="last", replay_policy="original")
    js.pull_subscribe("quux", "pn", config=jss.ConsumerConfig()).unsubscribe()
    assert sorted(js.consumer_names(quux)) == ["n", "pn"]


@pytest.mark.parametrize(
    "kwargs, text",
    [
        ({"deliver_policy": "new"}, "deliver_policy"),
        ({"headers_only": True}, "headers_only"),
        ({"idle_heartbeat": 2.0}, "idle_heartbeat"),
        ({"idle_heartbeat": 1.0, "flow_control": True}, "flow control"),
        ({"config": jss.ConsumerConfig(filter_subject="quux.other")}, "filter subjects"),
        ({"config": jss.ConsumerConfig(mem_storage=True)}, "memory"),
        ({"config": jss.ConsumerConfig(backoff=[1.0, 2.0], max_deliver=3)}, "backoff"),
    ],
)
def test_binding_checks_what_the_caller_asked_for(js, quux, kwargs, text):
    js.create_stream(name="wide", subjects=["quux.>"])
    js.create_push_consumer("wide", durable_name="d", deliver_subject="dlv.d", filter_subject="quux.a", max_deliver=3)
    publish(js, "quux.a", 2)
    with pytest.raises(jss.SubscribeError, match=text):
        js.subscribe("quux.a", durable="d", **kwargs)
    info = js.consumer_info("wide", "d")
    assert info.delivered.consumer_seq == 0 and not info.push_bound  # nothing consumed, nothing left bound


def test_pull_binding_checks_request_limits(js, multi):
    js.create_consumer(multi, durable_name="lim", filter_subject="a1")
    with pytest.raises(jss.SubscribeError, match="max_batch"):
        js.pull_subscribe("a1", "lim", config=jss.ConsumerConfig(max_batch=10))


def test_drain_returns_once_the_callbacks_acks_are_processed(server, js, quux):
    js.create_push_consumer(quux, durable_name="dr", deliver_subject="dlv.dr", max_ack_pending=20)
    publish(js, "quux", 600)
    handled = []

    def slow(msg):
        time.sleep(0.002)
        handled.append(msg.metadata.sequence.stream)

    with jss.connect(server.url) as other:
        ojs = other.jetstream()
        # The server takes acks in on its own time: without drain() waiting
        # for that, another client's view lags now and then; so many rounds.
        for _ in range(15):
            before = len(handled)
            sub = js.subscribe("quux", durable="dr", cb=slow)
            wait_until(lambda: len(handled) >= before + 10)
            assert sub.drain(timeout=10)
            # Seen from another client at once: every handled message's ack is in.
            info = ojs.consumer_info(quux, "dr")
            assert info.ack_floor.stream_seq >= max(handled)


def test_next_msg_hands_over_what_was_received_before_drain(js, quux):
    js.create_push_consumer(quux, durable_name="nd", deliver_subject="dlv.nd", max_ack_pending=20)
    publish(js, "quux", 50)
    sub = js.subscribe("quux", durable="nd")
    got, ended = [], []
    go_on = threading.Event()

    def reader():
        while True:
            try:
                msg = sub.next_msg(timeout=5)
            except jss.JetStreamError as exc:
                ended.append(exc)
                return
            got.append(msg)
            if len(got) == 5:
                go_on.wait(10)  # the rest stays in the client's buffer until drain()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    # Nothing is acked, so the server stops at max_ack_pending: all 20 are
    # sent before drain(), and no more can follow it.
    wait_until(lambda: len(got) == 5 and js.consumer_info(quux, "nd").num_ack_pending == 20)
    ended_drain = []
    drainer = threading.Thread(target=lambda: ended_drain.append(sub.drain(timeout=10)), daemon=True)
    drainer.start()
    wait_until(lambda: not js.consumer_info(quux, "nd").push_bound)  # drain() has removed the interest
    go_on.set()
    drainer.join(15)
    thread.join(10)
    assert ended_drain == [True]
    assert not thread.is_alive() and isinstance(ended[0], jss.SubscriptionClosedError)
    # All that reached the client was handed over: none left waiting for AckWait.
    assert [m.metadata.sequence.stream for m in got] == list(range(1, 21))
    for m in got:
        m.ack()


_NOW = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


@pytest.mark.parametrize(
    "first, second, text",
    [  # nats.go TestJetStreamSubscribe_ConfigCantChange
        (dict(description="a"), dict(description="b"), "description"),
        (dict(deliver_policy="all"), dict(deliver_policy="last"), "deliver_policy"),
        (dict(deliver_policy="by_start_sequence", opt_start_seq=1), dict(deliver_policy="by_start_sequence", opt_start_seq=10), "opt_start_seq"),
        (
            dict(deliver_policy="by_start_time", opt_start_time=_NOW),
            dict(deliver_policy="by_start_time", opt_start_time=_NOW - datetime.timedelta(hours=2)),
            "opt_start_time",
        ),
        (dict(ack_wait=10.0), dict(ack_wait=15.0), "ack_wait"),
        (dict(max_deliver=3), dict(max_deliver=5), "max_deliver"),
        # Not original -> instant: ConsumerConfig() says instant by default,
        # so asking for it cannot be told from not asking.
        (dict(replay_policy="instant"), dict(replay_policy="original"), "replay_policy"),
        (dict(max_waiting=10), dict(max_waiting=20), "max_waiting"),
        (dict(max_ack_pending=10), dict(max_ack_pending=20), "max_ack_pending"),
        (dict(ack_policy="all"), dict(ack_policy="none"), "ack_policy"),
    ],
)
def test_a_durable_created_one_way_refuses_another(js, multi, first, second, text):
    js.pull_subscribe("a1", "dur", config=jss.ConsumerConfig(**first))
    with pytest.raises(jss.SubscribeError, match=text):
        js.pull_subscribe("a1", "dur", config=jss.ConsumerConfig(**second))
    js.pull_subscribe("a1", "dur")  # asking nothing binds


@pytest.mark.parametrize(
    "same",
    [dict(deliver_policy="all"), dict(ack_wait=30.0), dict(replay_policy="instant"), dict(max_waiting=512)],
)
def test_asking_for_the_server_default_binds(js, multi, same):
    js.pull_subscribe("a1", "dflt")
    js.pull_subscribe("a1", "dflt", config=jss.ConsumerConfig(**same))


@pytest.mark.parametrize("created", [False, True])
def test_drain_from_the_callback_calls_back_the_rest(js, quux, created):
    if not created:
        js.create_push_consumer(quux, durable_name="cbd", deliver_subject="dlv.cbd", max_ack_pending=20)
    publish(js, "quux", 50)
    handled, returned = [], []
    holder = {}
    subscribed = threading.Event()

    def cb(msg):
        subscribed.wait(5)  # holder filled
        handled.append(msg.metadata.sequence.stream)
        if len(handled) == 3:
            returned.append(holder["sub"].drain(timeout=10))  # must not wait for itself

    holder["sub"] = js.subscribe("quux", durable="cbd", cb=cb, config=jss.ConsumerConfig(max_ack_pending=20))
    subscribed.set()
    wait_until(lambda: returned, timeout=10)
    assert returned == [False]  # not ended yet: the rest comes after this callback
    if created:
        wait_until(lambda: "cbd" not in js.consumer_names(quux), timeout=10)  # deleted once drained
        assert len(handled) > 3
    else:
        wait_until(lambda: js.consumer_info(quux, "cbd").ack_floor.stream_seq == len(handled), timeout=10)
        assert handled == list(range(1, js.consumer_info(quux, "cbd").delivered.stream_seq + 1))


def test_a_drain_from_the_callback_ends_quietly_when_the_client_closes_meanwhile(server, js, quux, monkeypatch):
    """The end of such a drain runs in a thread of its own; the client closed
    before it deleted the consumer: nothing is deleted (as after a close) and
    the thread ends without an unhandled exception."""
    from jetstream_sync._core.jsapi import JsApi

    real = JsApi.delete_consumer
    reached, closed = threading.Event(), threading.Event()

    def delete_after_the_close(self, *args, **kwargs):
        reached.set()
        closed.wait(10)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(JsApi, "delete_consumer", delete_after_the_close)
    unhandled = []
    monkeypatch.setattr(threading, "excepthook", unhandled.append)
    publish(js, "quux", 5)
    other = jss.connect(server.url)
    holder, subscribed, drained = {}, threading.Event(), []

    def cb(msg):
        subscribed.wait(5)
        if not drained:
            drained.append(holder["sub"].drain(timeout=10))  # from the callback: its end runs behind

    holder["sub"] = other.jetstream().subscribe("quux", cb=cb)
    subscribed.set()
    assert reached.wait(10)
    ender = [t for t in threading.enumerate() if t.name == "jss-drain"]
    other.close()
    closed.set()
    for t in ender:
        t.join(10)
    assert not any(t.is_alive() for t in ender)
    assert drained == [False]
    assert [args.exc_value for args in unhandled] == []
    assert len(js.consumer_names(quux)) == 1  # not deleted: its inactive threshold removes it
