"""Push consumers on a real server (ADR-15): the right handle kind, delivery
through messages()/consume(), queue groups, heartbeats, flow control,
consumer-sequence gaps, stop/drain and faults."""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter

import pytest

import jetstream_sync as jss
from jetstream_sync._engines.push import PushEngine

from ..helpers import publish, wait_until


def push(stream, name="p", **cfg):
    cfg.setdefault("deliver_subject", f"deliver.{stream.name}.{name}")
    cfg.setdefault("ack_policy", "explicit")
    return stream.create_push_consumer(durable_name=name, **cfg)


def take_all(ctx, n, timeout=10.0):
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        out.append(ctx.next(timeout=max(deadline - time.monotonic(), 0.0)))
    return out


# -- handles --------------------------------------------------------------------


def test_lookups_return_the_kind_of_consumer(js, stream):
    created = push(stream, "p", deliver_group="g")
    pull = stream.create_consumer(durable_name="q")
    assert isinstance(created, jss.PushConsumer) and not isinstance(created, jss.Consumer)
    assert isinstance(stream.push_consumer("p"), jss.PushConsumer)
    assert isinstance(js.push_consumer(stream.name, "p"), jss.PushConsumer)
    assert type(stream.consumer("q")) is jss.Consumer is jss.PullConsumer
    assert isinstance(pull, jss.BaseConsumer) and isinstance(created, jss.BaseConsumer)
    p = stream.push_consumer("p")
    assert (p.name, p.stream_name) == ("p", stream.name)
    assert p.deliver_subject == f"deliver.{stream.name}.p" and p.deliver_group == "g"
    assert repr(p) == f"<PushConsumer {stream.name!r}/'p'>"
    assert p.info().config.deliver_subject == p.deliver_subject
    p.delete()
    with pytest.raises(jss.ConsumerNotFoundError):
        stream.push_consumer("p")


def test_consumer_lookup_refuses_a_push_consumer_and_push_consumer_a_pull_one(js, stream):
    push(stream, "p")
    stream.create_consumer(durable_name="q")
    for lookup in (lambda: stream.consumer("p"), lambda: js.consumer(stream.name, "p")):
        with pytest.raises(jss.ConsumerPushBasedError) as ei:
            lookup()
        assert f"{stream.name}/p" in str(ei.value) and "push_consumer()" in str(ei.value)
    for lookup in (lambda: stream.push_consumer("q"), lambda: js.push_consumer(stream.name, "q")):
        with pytest.raises(jss.ConsumerPullBasedError) as pe:
            lookup()
        assert f"{stream.name}/q" in str(pe.value) and "consumer()" in str(pe.value)
    assert jss.ConsumerPullBasedError is jss.errors.ConsumerPullBasedError
    assert type(stream.push_consumer("p")) is jss.PushConsumer is type(js.push_consumer(stream.name, "p"))
    assert type(stream.consumer("q")) is jss.Consumer is type(js.consumer(stream.name, "q"))
    with pytest.raises(jss.ConsumerNotFoundError):
        stream.push_consumer("nope")


def test_push_creators_return_push_consumers_and_pull_creators_refuse_a_deliver_subject(js, stream):
    cfg = jss.ConsumerConfig(durable_name="pc", deliver_subject="dlv.pc", ack_policy="explicit")
    created = stream.create_push_consumer(cfg)
    assert type(created) is jss.PushConsumer and created.deliver_subject == "dlv.pc"
    assert type(js.create_push_consumer(stream.name, cfg)) is jss.PushConsumer  # same config: idempotent
    cfg.description = "changed"
    assert stream.update_push_consumer(cfg).cached_info.config.description == "changed"
    both = js.create_or_update_push_consumer(stream.name, durable_name="po", deliver_subject="dlv.po")
    assert type(both) is jss.PushConsumer
    for call in (stream.create_push_consumer, stream.create_or_update_push_consumer):
        with pytest.raises(jss.InvalidOptionError, match="deliver_subject"):
            call(durable_name="nodlv")
    assert sorted(stream.consumer_names()) == ["pc", "po"]  # nothing refused was sent


PULL_CREATORS = {
    "create_consumer": "create_push_consumer()",
    "update_consumer": "update_push_consumer()",
    "create_or_update_consumer": "create_or_update_push_consumer()",
}


@pytest.mark.parametrize("creator", sorted(PULL_CREATORS))
@pytest.mark.parametrize("form", ["keyword", "config"])
@pytest.mark.parametrize("on", ["stream", "js"])
def test_pull_creators_refuse_a_deliver_subject_in_either_form(js, stream, creator, form, on):
    """One rule for the keyword and the config object: a pull creator returns a
    pull Consumer or refuses, before sending, naming the push creator to use."""
    call = getattr(stream, creator) if on == "stream" else functools.partial(getattr(js, creator), stream.name)
    fields = dict(durable_name="p", deliver_subject="dlv.p", ack_policy="explicit")
    with pytest.raises(jss.InvalidOptionError) as ei:
        call(**fields) if form == "keyword" else call(jss.ConsumerConfig(**fields))
    assert "deliver_subject 'dlv.p'" in str(ei.value) and PULL_CREATORS[creator] in str(ei.value)
    assert stream.consumer_names() == []  # nothing was sent
    # An empty deliver subject is no deliver subject: a pull consumer, in either form.
    empty = dict(durable_name="q", deliver_subject="")
    if creator == "update_consumer":
        stream.create_consumer(durable_name="q")
    made = call(**empty) if form == "keyword" else call(jss.ConsumerConfig(**empty))
    assert type(made) is jss.Consumer and not made.info().config.deliver_subject


def test_pulls_on_a_push_consumer_are_refused(stream):
    p = push(stream)
    for call in (lambda: p.fetch(1), lambda: p.fetch_no_wait(1), lambda: p.next(timeout=1)):
        with pytest.raises(jss.ConsumerPushBasedError) as ei:
            call()
        assert "messages() or consume()" in str(ei.value)


def test_options_are_checked_before_subscribing(stream):
    p = push(stream, idle_heartbeat=1.0)
    with pytest.raises(jss.InvalidOptionError, match="max_messages"):
        p.messages(max_messages=10)
    with pytest.raises(jss.InvalidOptionError, match="heartbeat_alarm"):
        p.consume(lambda m: None, heartbeat_alarm=0.5)  # below the idle heartbeat
    with pytest.raises(jss.InvalidOptionError):
        p.consume("not callable")
    assert not p.info().push_bound  # nothing subscribed
    with p.messages(heartbeat_alarm=5.0) as ctx:
        assert ctx.options.heartbeat_alarm == 5.0
        wait_until(lambda: p.info().push_bound)


# -- delivery -------------------------------------------------------------------


def test_messages_delivers_in_order_and_next_times_out(js, stream, subj):
    p = push(stream)
    publish(js, subj, 100)
    with p.messages() as ctx:
        got = take_all(ctx, 100)
        for m in got:
            m.ack()
        assert [m.data for m in got] == [str(i).encode() for i in range(100)]
        assert [m.metadata.sequence.consumer for m in got] == list(range(1, 101))
        with pytest.raises(jss.TimeoutError):
            ctx.next(timeout=0.2)
        assert ctx.stats.delivered == 100 and ctx.stats.sequence_gaps == 0
    assert ctx.closed
    wait_until(lambda: p.info().num_ack_pending == 0)


def test_one_active_reader_per_handle_without_a_deliver_group(stream):
    p = push(stream)
    ctx = p.messages()
    with pytest.raises(jss.ConsumerAlreadyConsumingError):
        p.consume(lambda m: None)
    ctx.stop()
    cc = p.consume(lambda m: None)  # the first one is gone: allowed again
    cc.stop()
    grouped = push(stream, "g", deliver_group="workers")
    a, b = grouped.messages(), grouped.messages()  # queue members
    a.stop()
    b.stop()


def test_consume_handles_everything_and_drains(js, stream, subj):
    p = push(stream)
    seen = []
    done = threading.Event()

    def handler(msg):
        seen.append(int(msg.data))
        msg.ack()
        if len(seen) == 500:
            done.set()

    cc = p.consume(handler)
    publish(js, subj, 500)
    assert done.wait(20)
    cc.drain()
    assert cc.wait(10)
    assert seen == list(range(500))
    assert cc.stats.delivered == 500


def test_stop_naks_the_buffer_and_another_reader_gets_it_at_once(js, stream, subj):
    # AckWait 60 s: anything back within seconds came back through the NAK.
    a_handle = push(stream, "p", deliver_group="g", ack_wait=60.0)
    b_handle = stream.push_consumer("p")
    publish(js, subj, 50)
    a = a_handle.messages()
    a.next(timeout=5).ack()
    wait_until(lambda: a.stats.buffered_high_water >= 49)  # everything arrived, one taken
    with b_handle.messages() as b:
        wait_until(lambda: b_handle.info().push_bound)
        a.stop()
        assert a.stats.nakd_on_stop == 49
        again = take_all(b, 49, timeout=10)
        assert all(m.metadata.num_delivered == 2 for m in again)
        assert sorted(int(m.data) for m in again) == list(range(1, 50))
        for m in again:
            m.ack()
    wait_until(lambda: b_handle.info().num_ack_pending == 0)


def test_drain_hands_over_everything_received(js, stream, subj):
    p = push(stream)
    publish(js, subj, 200)
    ctx = p.messages()
    first = ctx.next(timeout=5)
    wait_until(lambda: ctx.stats.buffered_high_water >= 199)
    ctx.drain()
    rest = list(ctx)  # ends once the buffer is handed over
    assert len(rest) == 199 and ctx.stats.nakd_on_stop == 0
    assert ctx.wait_closed(5)
    for m in [first, *rest]:
        m.ack()
    assert not p.info().push_bound or wait_until(lambda: not p.info().push_bound)
    with pytest.raises(jss.ConsumerStoppedError):
        ctx.next(timeout=0.1)


@pytest.mark.timeout(180)
def test_three_clients_in_a_queue_group_handle_each_message_once(server, js, stream, subj):
    total = 30_000
    push(stream, "work", deliver_group="workers", flow_control=True, idle_heartbeat=1.0, max_ack_pending=-1)
    clients = [jss.connect(server.url, name=f"worker{i}") for i in range(3)]
    counts = [Counter() for _ in clients]
    reports = []
    handled = Counter()
    lock = threading.Lock()

    def handler_for(i):
        def handle(msg):
            counts[i][int(msg.data)] += 1
            msg.ack()
            with lock:
                handled["n"] += 1

        return handle

    try:
        ccs = [
            c.jetstream().push_consumer(stream.name, "work").consume(handler_for(i), error_handler=reports.append)
            for i, c in enumerate(clients)
        ]
        publish(js, subj, total)
        wait_until(lambda: handled["n"] >= total, timeout=120)
        wait_until(lambda: stream.consumer_info("work").num_ack_pending == 0, timeout=30)
        merged = sum(counts, Counter())
        assert set(merged) == set(range(total))
        assert max(merged.values()) == 1  # nobody got a message twice
        assert all(counts), "each worker got a share"
        info = stream.consumer_info("work")
        assert info.num_redelivered == 0 and info.delivered.consumer_seq == total
        for cc in ccs:
            cc.drain()
        assert all(cc.wait(10) for cc in ccs)
        # Gap checks are off in a group; silence between one member's
        # heartbeats is confirmed with the server, not reported.
        assert not [e for e in reports if isinstance(e, (jss.ConsumerSequenceMismatchError, jss.NoHeartbeatError))]
        assert sum(cc.stats.statuses.get("100 FlowControl Request", 0) for cc in ccs) >= 1
    finally:
        for c in clients:
            c.close()


# -- flow control ---------------------------------------------------------------


def test_flow_control_is_answered_once_the_user_took_what_came_before(js, stream, subj):
    # idle_heartbeat 5 s: no stalled heartbeat answers for us in this test's window.
    p = push(stream, flow_control=True, idle_heartbeat=5.0, max_ack_pending=-1)
    publish(js, subj, 3000, payload=b"x" * 2000)
    with p.messages() as ctx:
        wait_until(lambda: ctx.stats.statuses.get("100 FlowControl Request"))
        held = ctx.stats
        assert held.flow_control_replies == 0 and held.stalled_replies == 0  # nothing taken yet
        # Take until the reply goes out: how many arrived before the request
        # depends on socket reads (one message per read without the fast paths).
        deadline, taken = time.monotonic() + 10, 0
        while ctx.stats.flow_control_replies == 0:
            assert time.monotonic() < deadline, f"flow control not answered after {taken} taken"
            try:
                ctx.next(timeout=0.05).ack()
                taken += 1
            except jss.TimeoutError:
                pass  # all taken: the reply is on its way from the loop thread
        assert taken >= 1


def test_a_missing_flow_control_reply_never_stalls_delivery(monkeypatch, js, stream, subj):
    dropped = []
    answer = PushEngine._flow_control

    def drop_first(self, reply):
        if not dropped:
            dropped.append(reply)  # as if the request never reached us
            return
        answer(self, reply)

    monkeypatch.setattr(PushEngine, "_flow_control", drop_first)
    total = 5000
    p = push(stream, flow_control=True, idle_heartbeat=0.5, max_ack_pending=-1)
    publish(js, subj, total, payload=b"x" * 2000)
    started = time.monotonic()
    with p.messages() as ctx:
        got = take_all(ctx, total, timeout=30)
        for m in got:
            m.ack()
        stats = ctx.stats
    assert dropped and stats.stalled_replies >= 1  # the stalled heartbeat was answered
    assert sorted(int(m.metadata.sequence.stream) for m in got) == list(range(1, total + 1))
    assert time.monotonic() - started < 30


# -- heartbeats, gaps, faults -------------------------------------------------------


def test_a_paused_server_is_noticed_and_delivery_resumes(private_server, fnc):
    js = fnc.jetstream()
    stream = js.create_stream(name="P", subjects=["p.>"])
    p = push(stream, idle_heartbeat=0.5)
    reports = []
    with p.messages(error_handler=reports.append) as ctx:
        publish(js, "p.x", 1)
        ctx.next(timeout=5).ack()
        private_server.pause()
        try:
            deadline = time.monotonic() + 10  # alarm after 1.5 s, plus the PING check
            while not any(isinstance(e, jss.NoHeartbeatError) for e in reports):
                assert time.monotonic() < deadline, reports
                with pytest.raises(jss.TimeoutError):
                    ctx.next(timeout=0.25)  # error handlers run on the waiting thread
        finally:
            private_server.resume()
        assert ctx.stats.missed_heartbeats >= 1 and not ctx.closed
        publish(js, "p.x", 1, start=1)
        assert ctx.next(timeout=10).data == b"1"


def test_delivery_continues_after_a_server_restart(private_server, fnc):
    js = fnc.jetstream()
    stream = js.create_stream(name="P", subjects=["p.>"])
    p = push(stream, idle_heartbeat=1.0)
    with p.messages() as ctx:
        publish(js, "p.x", 10)
        for m in take_all(ctx, 10):
            m.ack_sync()
        private_server.restart()
        wait_until(lambda: fnc.is_connected, timeout=20)
        publish(js, "p.x", 10, start=10)
        got = take_all(ctx, 10, timeout=20)
        assert sorted(int(m.data) for m in got) == list(range(10, 20))
        assert ctx.stats.reconnects >= 1


def test_deleting_the_consumer_reports_no_heartbeat_then_ends(stream):
    p = push(stream, idle_heartbeat=0.2)
    reports = []
    cc = p.consume(lambda m: None, error_handler=reports.append)
    wait_until(lambda: cc.stats.heartbeats >= 1)
    p.delete()
    assert cc.wait(15)
    assert any(isinstance(e, jss.NoHeartbeatError) for e in reports)
    assert isinstance(reports[-1], jss.ConsumerDeletedError)


def lose_stream_seq(monkeypatch, seq):
    """Make the engine lose the delivery of stream sequence ``seq`` on its way in."""
    deliver = PushEngine.on_msgs

    def lossy(self, msgs):
        kept = [m for m in msgs if m.metadata.sequence.stream != seq]
        if kept:
            deliver(self, kept)

    monkeypatch.setattr(PushEngine, "on_msgs", lossy)


@pytest.mark.parametrize("revealed_by", ["next message", "heartbeat"])
def test_a_consumer_sequence_gap_is_reported(monkeypatch, js, stream, subj, revealed_by):
    # Lose the 3rd delivery: the 4th message shows the gap, or (with only 3
    # published) the next heartbeat's Nats-Last-Consumer does.
    lose_stream_seq(monkeypatch, 3)
    p = push(stream, idle_heartbeat=0.2, ack_wait=60.0)
    reports = []
    seen = []
    cc = p.consume(seen.append, error_handler=reports.append)
    publish(js, subj, 5 if revealed_by == "next message" else 3)
    wait_until(lambda: reports)
    gap = reports[0]
    assert isinstance(gap, jss.ConsumerSequenceMismatchError), reports
    assert (gap.expected, gap.received, gap.missed) == (3, 4, 1)
    assert "expected 3, got 4" in str(gap)
    assert cc.stats.sequence_gaps == 1 and not cc.closed
    cc.stop()


def test_a_second_handle_on_a_bound_push_consumer_is_refused(js, stream, subj):
    """Without a deliver group two subscribers would each get every message."""
    cons = stream.create_push_consumer(durable_name="solo", deliver_subject="dlv.solo", ack_policy="explicit")
    other = js.push_consumer(stream.name, "solo")
    with cons.messages() as ctx:
        wait_until(lambda: js.consumer_info(stream.name, "solo").push_bound)
        with pytest.raises(jss.ConsumerAlreadyConsumingError, match="already bound"):
            other.messages()
        publish(js, subj, 3)
        assert [ctx.next(timeout=5).data for _ in range(3)] == [b"0", b"1", b"2"]
    wait_until(lambda: not js.consumer_info(stream.name, "solo").push_bound)
    with other.messages() as ctx2:  # free again once the first stopped
        with pytest.raises(jss.TimeoutError):
            ctx2.next(timeout=0.2)


@pytest.mark.parametrize("kind", ["push", "pull", "subscribe"])
def test_async_handlers_are_refused_before_anything_is_sent(js, stream, subj, kind):
    async def handler(msg):  # ported from nats-py: would never run on a thread
        pass

    with pytest.raises(jss.InvalidOptionError, match="plain function"):
        if kind == "push":
            stream.create_push_consumer(durable_name="p", deliver_subject="dlv.p").consume(handler)
        elif kind == "pull":
            stream.create_consumer(durable_name="q").consume(handler)
        else:
            js.subscribe(subj, cb=handler)
    assert js.consumer_names(stream.name) == (["p"] if kind == "push" else ["q"] if kind == "pull" else [])


def test_ack_types_as_the_server_sees_them(js, stream, subj):
    p = push(stream, ack_wait=1.0)
    publish(js, subj, 3)
    with p.messages() as ctx:
        a, b, c = take_all(ctx, 3)
        naked = time.monotonic()
        a.nak(delay=0.5)
        b.term("unusable")
        for _ in range(4):  # 1.6 s of work on c: past AckWait, kept alive by +WPI
            c.in_progress()
            time.sleep(0.4)  # the time that passes is what is tested
        again = ctx.next(timeout=5)
        assert again.metadata.sequence.stream == 1 and again.metadata.num_delivered == 2
        assert time.monotonic() - naked >= 0.5  # not before its delay
        info = p.info()
        assert info.num_redelivered == 1 and info.num_ack_pending == 2  # a again, c still ours
        again.ack_sync()
        c.ack_sync()
        assert p.info().num_ack_pending == 0 and p.info().ack_floor.stream_seq == 3
        with pytest.raises(jss.TimeoutError):
            ctx.next(timeout=1.5)  # b was terminated, c acked: nothing comes back


_DENY_GROUP_CONF = """
listen: 127.0.0.1:{port}
jetstream { store_dir: "{store}" }
authorization { users = [ {user: u, password: p, permissions: {subscribe: {allow: [">"], deny: ["dlv.x grp"]}}} ] }
"""


@pytest.mark.timeout(60)
def test_a_deliver_subject_refused_in_its_queue_group_ends_the_context(tmp_path):
    from ..helpers import config_server

    srv = config_server(tmp_path, "pushperm", _DENY_GROUP_CONF)
    try:
        with jss.connect(f"nats://127.0.0.1:{srv.port}", user="u", password="p") as nc:
            js = nc.jetstream()
            js.create_stream(name="S", subjects=["s.>"])
            pc = js.create_push_consumer("S", durable_name="grp", deliver_subject="dlv.x", deliver_group="grp")
            ctx = pc.messages()
            start = time.monotonic()
            with pytest.raises(jss.PermissionDeniedError, match="grp"):
                ctx.next(timeout=5)
            assert time.monotonic() - start < 2.0
    finally:
        srv.cleanup()
