"""Ordered consumers on a real server: every stream message once, in order,
whatever happens to the server consumer behind them (the cases of nats.go's
ordered_test.go and nats.py's OrderedConsumerTest, in blocking form)."""

from __future__ import annotations

import asyncio
import datetime
import threading
import time

import pytest

import jetstream_sync as jss
from jetstream_sync._engines import ordered as _ordered

from ..helpers import Bounded, loop_held, wait_blocked, wait_until


RECONNECT = dict(reconnect_time_wait=0.2, max_reconnect_attempts=-1)
# A pull the server had queued but not yet taken when its consumer is deleted
# gets no answer at all (no 409, no 503; most pulls sent just before a delete,
# nats-server 2.15): only missing heartbeats tell. Reads that delete their
# consumer while pulling use 1 s heartbeats so that recovery (2 heartbeats)
# fits the bounds below; the default (15 s) recovers the same way, later.
QUICK_HB = dict(idle_heartbeat=1.0)


def seqs(msgs):
    return [m.metadata.sequence.stream for m in msgs]


def fill(js, subject, n):
    for i in range(n):
        js.publish_async(subject, str(i).encode())
    assert js.publish_async_complete(timeout=30)


def take(ctx, n, timeout=10.0):
    return [ctx.next(timeout=timeout) for _ in range(n)]


# -- messages() / consume() ----------------------------------------------------------


def test_messages_in_order_across_consumer_deletions(js, stream, subj):
    fill(js, subj, 300)
    oc = stream.ordered_consumer()
    seen = []
    with oc.messages(max_messages=20, **QUICK_HB) as ctx:
        for msg in ctx:
            seen.append(msg.metadata.sequence.stream)
            if len(seen) in (50, 150):
                js.delete_consumer(stream.name, oc.name)
            if len(seen) == 300:
                break
        assert ctx.stats.resets >= 2
    assert seen == list(range(1, 301))


def test_last_per_subject_whose_first_messages_were_superseded_before_the_first_pull(js):
    """The server consumer is made at messages(), the first pull goes out at
    the first read. Messages it was to start with, removed meanwhile by the
    per-subject limit, leave it delivering nothing with messages pending and a
    pull waiting (nats-server 2.15); the engine sees that and makes it again."""
    js.create_stream(name="LPS", subjects=["lps.>"], max_msgs_per_subject=2)
    js.publish("lps.k", b"first")
    js.publish("lps.other", b"x")
    oc = js.ordered_consumer("LPS", deliver_policy="last_per_subject", filter_subjects=["lps.k"])
    with oc.messages() as ctx:
        for i in range(2):  # "first" leaves the stream
            js.publish("lps.k", b"%d" % i)
            js.publish("lps.other", b"x")
        start = time.monotonic()
        assert ctx.next(timeout=10).data == b"1"  # the last of lps.k, as a new consumer starts
        assert time.monotonic() - start < 5
        assert ctx.stats.resets == 1


def test_reset_before_any_message(js, stream, subj):
    oc = stream.ordered_consumer(name_prefix="early")
    with oc.messages() as ctx:
        first = oc.name
        js.delete_consumer(stream.name, first)
        fill(js, subj, 10)
        assert seqs(take(ctx, 10)) == list(range(1, 11))
        assert oc.name not in (None, first)
        assert ctx.stats.resets >= 1


def test_a_pull_the_server_never_answers_is_noticed_by_the_heartbeats_and_reading_goes_on(nc, js, stream, subj):
    """A pull sent just before its consumer is deleted is often dropped with
    no answer (QUICK_HB). Made certain here: once the first pull is complete,
    a plain subscription swallows every later pull to the deleted consumer."""
    fill(js, subj, 20)
    oc = stream.ordered_consumer()
    with oc.messages(max_messages=10, **QUICK_HB) as ctx:
        got = take(ctx, 1)
        first = oc.name

        def first_pull_complete():
            info = stream.consumer_info(first)
            return info.num_waiting == 0 and info.delivered.consumer_seq == 10

        wait_until(first_pull_complete, timeout=10)
        hole = nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream.name}.{first}")
        js.delete_consumer(stream.name, first)
        got += take(ctx, 19, timeout=10)
        assert seqs(got) == list(range(1, 21))
        assert ctx.stats.resets == 1
        assert oc.name != first
        assert hole.pending() >= 1  # a pull did go unanswered
        hole.unsubscribe()


def test_custom_start_seq_survives_deletion(js, stream, subj):
    fill(js, subj, 10)
    oc = stream.ordered_consumer(opt_start_seq=3)
    with oc.messages(**QUICK_HB) as ctx:
        got = take(ctx, 4)
        js.delete_consumer(stream.name, oc.name)
        got += take(ctx, 4)
    assert seqs(got) == list(range(3, 11))


def test_consume_handler_sees_each_message_once_in_order(js, stream, subj):
    fill(js, subj, 200)
    oc = stream.ordered_consumer()
    seen = []
    done = threading.Event()

    def handler(msg):
        seen.append(msg.metadata.sequence.stream)
        if len(seen) == 80:
            js.delete_consumer(stream.name, oc.name)
        if len(seen) == 200:
            done.set()

    cc = oc.consume(handler, max_messages=25, **QUICK_HB)
    assert done.wait(20)
    cc.stop()
    assert cc.wait(5)
    assert seen == list(range(1, 201))


def test_a_consume_opened_again_goes_on_after_the_last_handled_message(js, stream, subj):
    fill(js, subj, 50)
    oc = stream.ordered_consumer()
    seen = []
    some, done = threading.Event(), threading.Event()

    def handler(msg):
        seen.append(msg.metadata.sequence.stream)
        if len(seen) == 10:
            some.set()
        if len(seen) == 50:
            done.set()

    cc = oc.consume(handler, max_messages=20)
    assert some.wait(10)
    cc.stop()
    assert cc.wait(5)
    first = len(seen)
    cc = oc.consume(handler, max_messages=20)
    try:
        assert done.wait(10), seen
    finally:
        cc.stop()
        assert cc.wait(5)
    assert seen == list(range(1, 51)), f"{first} handled before the stop"


def test_a_dropped_message_is_noticed_and_never_skipped(js, stream, subj, monkeypatch):
    """A message lost on the way (the consumer sequence jumps) makes the
    engine recreate the consumer from the last one it handed out."""
    fill(js, subj, 100)
    real = _ordered.OrderedPullEngine.on_msgs
    dropped, seen = [], []

    def lossy(self, msgs):
        kept = []
        for msg in msgs:  # the 3rd message to arrive is lost (one read or one message per call)
            seen.append(msg)
            if len(seen) == 3:
                dropped.append(msg.metadata.sequence.stream)
            else:
                kept.append(msg)
        real(self, kept)

    monkeypatch.setattr(_ordered.OrderedPullEngine, "on_msgs", lossy)
    oc = stream.ordered_consumer()
    with oc.messages() as ctx:
        got = take(ctx, 100)
        assert ctx.stats.resets >= 1
    assert dropped
    assert seqs(got) == list(range(1, 101))


def test_drain_hands_over_what_arrived_then_the_next_read_continues(js, stream, subj):
    fill(js, subj, 50)
    oc = stream.ordered_consumer()
    ctx = oc.messages(max_messages=10)
    got = take(ctx, 5)
    ctx.drain()
    got += list(ctx)
    assert ctx.wait_closed(10)
    with oc.messages() as ctx2:
        got += take(ctx2, 50 - len(got))
    assert seqs(got) == list(range(1, 51))


def test_a_read_begun_while_the_last_ones_reset_was_under_way_keeps_its_consumer(js, stream, subj, monkeypatch):
    """The reset of a read that was stopped meanwhile finishes late: it must
    leave the state to the read that began since (it clobbered its consumer,
    whose messages were then dropped as stale, every later one)."""
    real = _ordered.OrderedState._make
    calls, late_done = [], threading.Event()

    async def answered_late_the_second_time(self, start_seq):
        calls.append(start_seq)
        nth = len(calls)  # counted on entry: the next read's call may begin before this one returns
        info = await real(self, start_seq)
        if nth == 2:  # the first read's reset: the server's answer comes late
            await asyncio.sleep(1.0)
            asyncio.get_running_loop().call_soon(late_done.set)  # once the reset went on with it
        return info

    monkeypatch.setattr(_ordered.OrderedState, "_make", answered_late_the_second_time)
    fill(js, subj, 1)
    oc = stream.ordered_consumer()
    ctx = oc.messages(**QUICK_HB)
    assert seqs([ctx.next(timeout=10)]) == [1]
    js.delete_consumer(stream.name, oc.name)  # the engine resets; its create answers late
    wait_until(lambda: ctx.stats.resets == 1, timeout=10)
    ctx.stop()
    assert ctx.wait_closed(10)
    with oc.messages(**QUICK_HB) as again:
        assert late_done.wait(10)
        fill(js, subj, 5)
        assert seqs(take(again, 5)) == [2, 3, 4, 5, 6]


def test_stop_during_reset_never_hangs(js, stream, subj):
    fill(js, subj, 20)
    oc = stream.ordered_consumer()
    for _ in range(10):
        ctx = oc.messages()
        ctx.next(timeout=10)
        js.delete_consumer(stream.name, oc.name)
        t0 = time.monotonic()
        ctx.stop()
        assert ctx.wait_closed(10)
        assert time.monotonic() - t0 < 10


def test_stream_deleted_ends_iteration(js, stream, subj):
    fill(js, subj, 5)
    oc = stream.ordered_consumer(max_reset_attempts=3)
    with oc.messages() as ctx:
        take(ctx, 5)
        js.delete_stream(stream.name)
        with pytest.raises(jss.JetStreamError):
            ctx.next(timeout=30)
        assert ctx.wait_closed(10)


def test_stream_deleted_and_made_again_ends_iteration_instead_of_skipping(server, js, stream, subj):
    """The reset that follows the delete finds a stream of the same name made
    again meanwhile: its sequences start over, so going on after the last
    sequence taken would skip what the new stream holds, silently."""
    fill(js, subj, 5)
    reader = jss.connect(server.url)
    try:
        oc = reader.jetstream().ordered_consumer(stream.name)
        with oc.messages(**QUICK_HB) as ctx:  # no 409 for a pull the server had not taken: heartbeats tell
            assert seqs(take(ctx, 5)) == [1, 2, 3, 4, 5]
            with loop_held(reader):  # the delete is seen after the new stream exists
                js.delete_stream(stream.name)
                js.create_stream(name=stream.name, subjects=[subj])
                js.publish(subj, b"new")
            with pytest.raises(jss.StreamNotFoundError, match="made again"):
                ctx.next(timeout=20)
            assert ctx.wait_closed(10)
    finally:
        reader.close()


_NO_STREAM_INFO_CONF = """
listen: 127.0.0.1:{port}
jetstream { store_dir: "{store}" }
authorization { users = [
  {user: admin, password: a}
  {user: reader, password: r, permissions: {publish: {allow: [">"], deny: ["$JS.API.STREAM.INFO.>"]}}}
] }
"""


@pytest.mark.timeout(60)
def test_a_reader_not_allowed_stream_info_still_reads_across_a_reset(tmp_path):
    """The check for a stream made again asks for the stream's info; a user
    who may create consumers but not ask that goes on as before."""
    from ..helpers import config_server

    srv = config_server(tmp_path, "noinfo", _NO_STREAM_INFO_CONF)
    try:
        with jss.connect(srv.url, user="admin", password="a") as admin, jss.connect(
            srv.url, user="reader", password="r"
        ) as reader:
            ajs = admin.jetstream()
            ajs.create_stream(name="S", subjects=["s.>"])
            fill(ajs, "s.x", 5)
            # The path that needs no stream info to begin: subscribe() with the stream named.
            sub = reader.jetstream().subscribe("s.>", ordered_consumer=True, stream="S", idle_heartbeat=1.0)
            try:
                assert [sub.next_msg(timeout=10).metadata.sequence.stream for _ in range(5)] == [1, 2, 3, 4, 5]
                (name,) = ajs.consumer_names("S")
                ajs.delete_consumer("S", name)  # a reset, which asks for the stream's info
                fill(ajs, "s.x", 5)
                assert [sub.next_msg(timeout=15).metadata.sequence.stream for _ in range(5)] == [6, 7, 8, 9, 10]
                wait_until(lambda: ajs.consumer_names("S") not in ([], [name]), timeout=10)  # made again
            finally:
                sub.unsubscribe()
    finally:
        srv.cleanup()


def test_fetch_after_the_stream_is_made_again_raises_instead_of_skipping(js, stream, subj):
    fill(js, subj, 5)
    oc = stream.ordered_consumer()
    assert seqs(oc.fetch(5, expires=2)) == [1, 2, 3, 4, 5]
    js.delete_stream(stream.name)
    js.create_stream(name=stream.name, subjects=[subj])
    js.publish(subj, b"new")
    with pytest.raises(jss.StreamNotFoundError, match="made again"):
        for _ in range(2):  # the first may end short: its reused consumer went with the old stream
            list(oc.fetch(5, expires=1))
    with pytest.raises(jss.StreamNotFoundError, match="made again"):
        oc.next(timeout=2)  # and stays so: a new ordered consumer reads the new stream
    assert stream.ordered_consumer().next(timeout=5).data == b"new"


def test_connection_closed_ends_iteration(server):
    nc = jss.connect(server.url)
    js = nc.jetstream()
    js.create_stream(name="OCC", subjects=["occ.>"])
    try:
        oc = js.ordered_consumer("OCC")
        ctx = oc.messages()
        nc2 = jss.connect(server.url)
        nc.close()
        with pytest.raises(jss.ConnectionClosedError):
            ctx.next(timeout=10)
        assert ctx.closed
    finally:
        nc2.jetstream().delete_stream("OCC")
        nc2.close()


# -- fetch / next --------------------------------------------------------------------


def test_fetches_continue_where_the_last_left_off(js, stream, subj):
    fill(js, subj, 25)
    oc = stream.ordered_consumer()
    first = seqs(oc.fetch(10, expires=2))
    name = oc.name
    second = seqs(oc.fetch(10, expires=2))
    assert oc.name == name  # a fetch that ended cleanly keeps the consumer
    rest = seqs(oc.fetch(10, expires=1))
    assert first + second + rest == list(range(1, 26))


def test_fetch_broken_off_early_loses_nothing(js, stream, subj):
    fill(js, subj, 30)
    oc = stream.ordered_consumer()
    got = []
    for msg in oc.fetch(10, expires=2):
        got.append(msg)
        if len(got) == 4:
            break
    got += list(oc.fetch(10, expires=2))
    got += list(oc.fetch(20, expires=1))
    assert seqs(got) == list(range(1, 31))


def test_fetch_survives_consumer_deletion(js, stream, subj):
    fill(js, subj, 20)
    oc = stream.ordered_consumer()
    got = list(oc.fetch(5, expires=2))
    js.delete_consumer(stream.name, oc.name)
    while len(got) < 20:
        got += list(oc.fetch(5, expires=2))
    assert seqs(got) == list(range(1, 21))


def test_next_in_order_while_publishing(js, stream, subj):
    oc = stream.ordered_consumer()
    pub = threading.Thread(target=fill, args=(js, subj, 300))
    pub.start()
    got = [oc.next(timeout=10) for _ in range(300)]
    pub.join(10)
    assert seqs(got) == list(range(1, 301))


def test_next_times_out_when_nothing_comes(js, stream):
    oc = stream.ordered_consumer()
    t0 = time.monotonic()
    with pytest.raises(jss.TimeoutError):
        oc.next(timeout=0.5)
    assert time.monotonic() - t0 < 5


# -- the server consumer and misuse ----------------------------------------------------


def test_generated_consumer_config_and_names(js, stream, subj):
    fill(js, subj, 3)
    oc = js.ordered_consumer(stream.name, name_prefix="test", filter_subjects=[subj], headers_only=True)
    with pytest.raises(jss.OrderedConsumerError):
        oc.info()
    assert len(list(oc.fetch(1, expires=1))) == 1
    info = oc.info()
    assert info.name == "test_1"
    cfg = info.config
    assert cfg.ack_policy == jss.AckPolicy.NONE
    assert cfg.mem_storage is True
    assert cfg.num_replicas in (0, 1)
    assert cfg.inactive_threshold == pytest.approx(300.0)
    assert cfg.filter_subjects == [subj] or cfg.filter_subject == subj
    assert cfg.headers_only is True
    assert cfg.durable_name is None
    js.delete_consumer(stream.name, "test_1")
    msg = oc.next(timeout=10)
    assert msg.metadata.sequence.stream == 2
    assert oc.name == "test_2"


def test_start_time(js, stream, subj):
    fill(js, subj, 3)
    time.sleep(0.01)  # distinct timestamps on either side of the cut, not synchronisation
    cut = datetime.datetime.now(datetime.timezone.utc)
    fill(js, subj, 2)
    oc = stream.ordered_consumer(opt_start_time=cut)
    assert seqs(oc.fetch(5, expires=1)) == [4, 5]


def test_one_mode_and_one_read_at_a_time(js, stream, subj):
    oc = stream.ordered_consumer()
    ctx = oc.messages()
    with pytest.raises(jss.OrderedConsumerError):
        oc.messages()
    with pytest.raises(jss.OrderedConsumerError):
        oc.fetch(1, expires=1)
    ctx.stop()
    oc.messages().stop()  # a new read once the first is over
    oc2 = stream.ordered_consumer()
    result = oc2.fetch(1, expires=5)
    with pytest.raises(jss.OrderedConsumerError):
        oc2.fetch(1, expires=1)
    with pytest.raises(jss.OrderedConsumerError):
        oc2.consume(lambda m: None)
    result.close()


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(deliver_policy="sideways"),
        dict(opt_start_seq=0),
        dict(opt_start_seq="3"),
        dict(deliver_policy="by_start_sequence"),
        dict(deliver_policy="by_start_time"),
        dict(deliver_policy="last", opt_start_seq=4),
        dict(opt_start_time="yesterday"),
        dict(replay_policy="fast-forward"),
        dict(inactive_threshold=-1),
        dict(headers_only="yes"),
        dict(max_reset_attempts=-1),
        dict(max_reset_attempts=True),
        dict(name_prefix="a.b"),
        dict(name_prefix=""),
        dict(filter_subjects=["a..b"]),
        dict(durable_name="d"),
        dict(deliver_subject="x"),
    ],
)
def test_bad_options_refused_before_anything_is_sent(js, stream, kwargs):
    with pytest.raises((jss.InvalidOptionError, TypeError)):
        stream.ordered_consumer(**kwargs)
    assert js.consumer_names(stream.name) == []


def test_bad_read_options_refused_before_a_consumer_is_created(js, stream):
    oc = stream.ordered_consumer()
    for call in (
        lambda: oc.messages(max_messages=0),
        lambda: oc.messages(bogus=1),
        lambda: oc.consume("not callable"),
        lambda: oc.fetch(0),
        lambda: oc.next(timeout=-1),
    ):
        with pytest.raises(jss.InvalidOptionError):
            call()
    assert js.consumer_names(stream.name) == []
    assert oc.name is None


def test_ordered_consumer_on_a_missing_stream(js):
    with pytest.raises(jss.StreamNotFoundError):
        js.ordered_consumer("NOPE")


# -- faults ------------------------------------------------------------------------


def test_fifty_thousand_through_two_deletions_and_a_restart(private_server):
    """The acceptance case: stream sequences 1..50,000 in order, exactly once,
    while the consumer is deleted twice and the server restarted once."""
    n = 50_000
    nc = jss.connect(private_server.url, **RECONNECT)
    try:
        js = nc.jetstream()
        stream = js.create_stream(name="OB", subjects=["ob.>"])
        fill(js, "ob.x", n)
        oc = stream.ordered_consumer()
        expected = 1
        with oc.messages(max_messages=500, expires=2.0) as ctx:
            while expected <= n:
                msg = ctx.next(timeout=30)
                seq = msg.metadata.sequence.stream
                assert seq == expected, f"got {seq}, expected {expected}"
                expected += 1
                if seq in (10_000, 25_000):
                    js.delete_consumer("OB", oc.name)
                elif seq == 40_000:
                    nc.flush()
                    private_server.restart()
            stats = ctx.stats
        assert expected == n + 1
        assert stats.resets >= 3
        assert stats.reconnects >= 1
    finally:
        nc.close()


def test_reset_attempts_are_bounded(js, stream, subj, monkeypatch):
    """Failures to recreate the consumer are retried with backoff, then end
    the read with OrderedConsumerResetError after max_reset_attempts."""
    fill(js, subj, 3)
    real = _ordered.OrderedState._make  # every creation, the first one and each reset's
    calls = []

    async def failing(self, start_seq):
        calls.append(start_seq)
        if len(calls) > 1:  # the first creation works; every reset fails
            raise jss.APIError(500, 10026, "maximum consumers limit reached")
        return await real(self, start_seq)

    monkeypatch.setattr(_ordered.OrderedState, "_make", failing)
    monkeypatch.setattr(_ordered, "RESET_BACKOFF_START", 0.05)
    errs = []
    oc = stream.ordered_consumer(max_reset_attempts=2)
    ctx = oc.messages(error_handler=errs.append, **QUICK_HB)
    take(ctx, 3)
    js.delete_consumer(stream.name, oc.name)
    with pytest.raises(jss.OrderedConsumerResetError):
        ctx.next(timeout=30)
    assert ctx.wait_closed(10)
    assert calls == [0, 4, 4]
    assert sum(isinstance(e, jss.APIError) for e in errs) == 2


def test_stop_after_spans_a_reset_and_the_next_read_goes_on(js, stream, subj):
    fill(js, subj, 300)
    oc = stream.ordered_consumer()
    got = []
    ctx = oc.messages(max_messages=40, stop_after=150, **QUICK_HB)
    for msg in ctx:
        got.append(msg)
        if len(got) == 60:
            js.delete_consumer(stream.name, oc.name)
    assert len(got) == 150
    assert ctx.wait_closed(10)
    assert ctx.stats.resets >= 1
    with oc.messages() as ctx2:
        got += take(ctx2, 150)
    assert seqs(got) == list(range(1, 301))


def test_a_second_fetch_while_the_first_holds_unread_messages_is_refused(js, stream, subj):
    """A pull complete on the server with messages nobody took is still an open read."""
    fill(js, subj, 10)
    oc = stream.ordered_consumer()
    first = oc.fetch(5, expires=2)
    wait_until(lambda: first.stats.delivered == 0 and first._receiver.closed_event.is_set())
    with pytest.raises(jss.OrderedConsumerError):
        oc.fetch(5, expires=2)
    got = list(first) + list(oc.fetch(5, expires=2))
    assert seqs(got) == list(range(1, 11))


def test_next_from_two_threads_never_duplicates(js, stream, subj):
    fill(js, subj, 300)
    oc = stream.ordered_consumer()
    got, refused = [], []

    def reader():
        while True:
            try:
                got.append(oc.next(timeout=1).metadata.sequence.stream)
            except jss.OrderedConsumerError:
                refused.append(1)  # the other thread's read is open
            except jss.TimeoutError:
                return

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(got) == list(range(1, 301))


def test_close_deletes_the_server_consumer_and_reading_goes_on(js, stream, subj):
    fill(js, subj, 10)
    with stream.ordered_consumer() as oc:
        got = list(oc.fetch(4, expires=2))
        name = oc.name
        assert name in js.consumer_names(stream.name)
        oc.close()
        assert name not in js.consumer_names(stream.name)
        got += list(oc.fetch(6, expires=2))
        assert seqs(got) == list(range(1, 11))
        result = oc.fetch(1, expires=5)
        with pytest.raises(jss.OrderedConsumerError):
            oc.close()
        result.close()
    assert js.consumer_names(stream.name) == []


@pytest.mark.parametrize(
    "kwargs",
    [dict(filter_subjects=123), dict(metadata=123), dict(metadata={"a": 1}), dict(opt_start_seq=2**70)],
)
def test_more_bad_options_refused_before_anything_is_sent(js, stream, kwargs):
    with pytest.raises(jss.InvalidOptionError):
        stream.ordered_consumer(**kwargs)
    assert js.consumer_names(stream.name) == []


def test_a_bad_error_handler_creates_nothing(js, stream):
    oc = stream.ordered_consumer()
    with pytest.raises(jss.InvalidOptionError):
        oc.messages(error_handler=1)
    assert js.consumer_names(stream.name) == []
    assert len(list(oc.fetch_no_wait(1))) == 0  # not locked into messages() mode


@pytest.mark.parametrize(
    "read, policy, want",
    [("messages", "new", [3, 4, 5]), ("messages", "last", [2, 3, 4, 5]), ("next", "new", [3, 4, 5]), ("next", "last", [2, 3, 4, 5])],
)
def test_a_reset_before_the_first_message_keeps_the_policys_position(server, js, stream, subj, read, policy, want):
    # "new"/"last" fix a position when the first server consumer is created;
    # replacing that consumer before anything was handed out must not move it
    # to what is new or last by then.
    fill(js, subj, 2)
    oc = stream.ordered_consumer(deliver_policy=policy)
    ctx = oc.messages() if read == "messages" else None
    if ctx is None:
        oc.fetch(1, expires=0.5).close()  # a consumer created, nothing handed out
    with jss.connect(server.url) as other:
        ojs = other.jetstream()
        ojs.delete_consumer(stream.name, oc.name)
        for i in range(3):
            ojs.publish(subj, f"after{i}".encode())
    take_one = ctx.next if ctx is not None else oc.next
    try:
        assert [take_one(timeout=10).metadata.sequence.stream for _ in want] == want
    finally:
        if ctx is not None:
            ctx.stop()


def one_read(fnc, stored):
    """Stream P with ``stored`` messages on the fault server, and an ordered
    consumer that has read the first."""
    js = fnc.jetstream()
    js.create_stream(name="P", subjects=["p.>"])
    fill(js, "p.x", stored)
    oc = js.ordered_consumer("P")
    assert oc.next(timeout=5).data == b"0"
    return js, oc


def test_next_keeps_its_timeout_when_the_server_does_not_answer(private_server, fnc):
    _, oc = one_read(fnc, 2)
    oc.close()  # the next read creates a server consumer
    private_server.pause()
    try:
        started = time.monotonic()
        with pytest.raises(jss.TimeoutError):
            oc.next(timeout=0.5)
        assert time.monotonic() - started < 2.0  # not the JetStream API timeout (5 s)
    finally:
        private_server.resume()
    assert oc.next(timeout=10).metadata.sequence.stream == 2  # a create cut short is made again


@pytest.mark.parametrize("kind", ["fetch", "fetch_no_wait", "deleted_while_waiting"])
def test_a_fetch_after_the_consumer_vanished_is_not_empty(server, js, stream, subj, kind):
    # "while batch := oc.fetch(...)" must not stop early: an empty fetch says
    # there is nothing to read, not that the reused consumer was gone.
    fill(js, subj, 10)
    oc = stream.ordered_consumer()
    assert seqs(oc.fetch(5, expires=2)) == [1, 2, 3, 4, 5]
    if kind == "deleted_while_waiting":
        assert seqs(oc.fetch(5, expires=2)) == [6, 7, 8, 9, 10]  # ends cleanly: the consumer is kept
        result = oc.fetch(1, expires=5)  # waits: nothing new yet
        with jss.connect(server.url) as other:
            other.jetstream().delete_consumer(stream.name, oc.name)
            other.jetstream().publish(subj, b"late")
        assert seqs(result) == [11]
        return
    js.delete_consumer(stream.name, oc.name)
    got = oc.fetch(5, expires=2) if kind == "fetch" else oc.fetch_no_wait(5)
    assert seqs(got) == [6, 7, 8, 9, 10]


def test_a_fetch_with_heartbeats_after_the_consumer_vanished_delivers_in_the_same_call(js, stream, subj):
    # expires=10 asks for 5 s heartbeats: the pull sent again on the new
    # consumer has a little less than 10 s left and must still go out.
    fill(js, subj, 3000)
    oc = stream.ordered_consumer()
    assert seqs(oc.fetch(1000)) == list(range(1, 1001))
    js.delete_consumer(stream.name, oc.name)
    t0 = time.monotonic()
    got = seqs(oc.fetch(1000, expires=10))
    assert got == list(range(1001, 2001))
    assert time.monotonic() - t0 < 10  # the batch filled; the pull did not run to expiry
    assert seqs(oc.fetch(1000, expires=10)) == list(range(2001, 3001))


def test_last_per_subject_without_a_filter_reads_every_subjects_last(js, stream, subj):
    base = stream.name.lower()
    for key in ("a", "b", "a", "c", "b"):
        js.publish(f"{base}.{key}", key.encode())
    oc = stream.ordered_consumer(deliver_policy="last_per_subject")
    assert seqs(oc.fetch(10, expires=1)) == [3, 4, 5]
    assert oc.info().config.filter_subjects == [">"] or oc.info().config.filter_subject == ">"


@pytest.mark.parametrize("policy", ["by_start_sequence", "by_start_time"])
def test_the_deliver_policy_picks_between_both_start_options(js, stream, subj, policy):
    fill(js, subj, 3)
    time.sleep(0.01)  # distinct timestamps on either side of the cut, not synchronisation
    cut = datetime.datetime.now(datetime.timezone.utc)
    fill(js, subj, 2)
    oc = stream.ordered_consumer(deliver_policy=policy, opt_start_seq=2, opt_start_time=cut)
    want = [2, 3, 4, 5] if policy == "by_start_sequence" else [4, 5]
    assert seqs(oc.fetch(10, expires=1)) == want


def test_both_start_options_without_a_policy_are_refused(js, stream):
    cut = datetime.datetime.now(datetime.timezone.utc)
    with pytest.raises(jss.InvalidOptionError, match="not both"):
        stream.ordered_consumer(opt_start_seq=2, opt_start_time=cut)
    assert js.consumer_names(stream.name) == []


@pytest.mark.timeout(60)
def test_next_waits_through_a_server_restart(private_server, fnc):
    # The waiting pull ends with "409 Server Shutdown" and the memory consumer
    # is gone after the restart: next() goes on with a new one.
    js, oc = one_read(fnc, 1)
    waiting = Bounded(lambda: oc.next(timeout=30))
    wait_blocked(waiting.thread)
    private_server.restart()
    wait_until(lambda: fnc.is_connected, timeout=20)
    js.publish("p.x", b"1")
    waiting.join(35)
    assert waiting.finished and waiting.error is None
    assert waiting.result.metadata.sequence.stream == 2
    # A fetch waiting then ends short, with no error; the next one goes on.
    fetching = Bounded(lambda: list(oc.fetch(1, expires=20)))
    wait_blocked(fetching.thread)
    private_server.restart()
    fetching.join(30)
    assert fetching.finished and fetching.error is None and fetching.result == []
    wait_until(lambda: fnc.is_connected, timeout=20)
    js.publish("p.x", b"2")
    assert oc.next(timeout=20).metadata.sequence.stream == 3
