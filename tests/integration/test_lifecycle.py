"""Consumer lifecycle on a real server: pause/resume, reset, and stop_after."""

from __future__ import annotations

import datetime
import threading

import pytest

import jetstream_sync as jss

from ..helpers import PullSpy, publish, wait_until

pytestmark = pytest.mark.timeout(60)

UTC = datetime.timezone.utc


# -- pause / resume -------------------------------------------------------------------


def test_a_paused_consumer_delivers_nothing_until_resumed(js, stream, subj, cons):
    resp = cons.pause(60)
    assert resp.paused and 50 < resp.pause_remaining <= 60
    assert resp.pause_until > datetime.datetime.now(UTC)
    info = cons.info()
    assert info.paused and info.config.pause_until is not None
    publish(js, subj, 3)
    assert list(cons.fetch(3, expires=1)) == []  # the pull waited and expired

    # The server serves pulls waiting since before the resume at its next
    # heartbeat for them: keep that short.
    with cons.messages(expires=2) as ctx:
        with pytest.raises(jss.TimeoutError):
            ctx.next(timeout=1.0)
        resumed = cons.resume()
        assert not resumed.paused and resumed.pause_until is None and resumed.pause_remaining == 0
        assert not cons.info().paused
        got = [ctx.next(timeout=5).metadata.sequence.stream for _ in range(3)]
    assert got == [1, 2, 3]


def test_a_pause_ends_by_itself(js, stream, subj, cons):
    until = datetime.datetime.now(UTC) + datetime.timedelta(seconds=1.5)
    resp = cons.pause(until)
    assert resp.paused and abs((resp.pause_until - until).total_seconds()) < 0.001
    publish(js, subj, 1)
    msg = cons.next(timeout=10)  # waits out the pause
    assert datetime.datetime.now(UTC) >= until - datetime.timedelta(milliseconds=50)
    assert msg.metadata.sequence.stream == 1
    assert not cons.info().paused


def test_pause_through_the_jetstream_context(js, stream, cons):
    resp = js.pause_consumer(stream.name, "c", 30)
    assert resp.paused
    info = js.consumer_info(stream.name, "c")
    assert info.paused
    assert 0 < info.pause_remaining <= 30  # seconds, as in the pause response
    assert isinstance(info.config.pause_until, datetime.datetime)
    assert abs((info.config.pause_until - resp.pause_until).total_seconds()) < 0.001
    assert not js.resume_consumer(stream.name, "c").paused
    assert not js.consumer_info(stream.name, "c").paused


def test_pause_validation_sends_nothing(nc, js, stream, cons):
    sub = nc.subscribe(f"$JS.API.CONSUMER.PAUSE.{stream.name}.>")
    nc.flush()
    for bad in (0, -5, float("inf"), "10", datetime.datetime.now()):  # the last is naive
        with pytest.raises(jss.InvalidOptionError):
            cons.pause(bad)
    with pytest.raises(jss.InvalidOptionError):
        js.pause_consumer("", "c", 5)
    with pytest.raises(jss.InvalidOptionError):
        js.resume_consumer(stream.name, "a.b")
    with pytest.raises(jss.TimeoutError):
        sub.next_msg(timeout=0.2)
    with pytest.raises(jss.ConsumerNotFoundError):
        js.pause_consumer(stream.name, "nope", 5)


# -- reset ------------------------------------------------------------------------------


def test_reset_to_the_ack_floor_and_to_a_sequence(js, stream, subj, cons):
    publish(js, subj, 10)
    unacked = list(cons.fetch(5, expires=5))
    assert [m.metadata.sequence.stream for m in unacked] == [1, 2, 3, 4, 5]

    resp = cons.reset()
    assert resp.reset_seq == 1 and resp.info.name == "c"
    assert cons.cached_info is resp.info
    assert cons.next(timeout=5).metadata.sequence.stream == 1  # delivered again at once

    resp = cons.reset(seq=7)
    assert resp.reset_seq == 7 and resp.info.num_pending == 4
    assert cons.next(timeout=5).metadata.sequence.stream == 7


def test_reset_below_the_configured_start_is_refused(js, stream, subj):
    publish(js, subj, 10)
    cons = stream.create_consumer(durable_name="late", deliver_policy="by_start_sequence", opt_start_seq=5)
    with pytest.raises(jss.APIError) as ei:
        cons.reset(seq=2)
    assert ei.value.err_code == 10204 and "below start seq" in ei.value.description
    assert cons.reset(seq=6).reset_seq == 6


def test_reset_validation_and_errors(nc, stream):
    js = nc.jetstream(timeout=1)  # a missing consumer does not answer a reset: the timeout says how long
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(jss.InvalidOptionError):
            js.reset_consumer(stream.name, "c", bad)
    with pytest.raises(jss.InvalidOptionError):
        js.reset_consumer("", "c")
    with pytest.raises(jss.ConsumerNotFoundError):
        js.reset_consumer(stream.name, "nope")


# -- stop_after --------------------------------------------------------------------------


def test_messages_stop_after_never_pulls_more(nc, js, stream, subj, cons):
    publish(js, subj, 100)
    spy = PullSpy(nc, stream.name, "c")
    seqs = []
    with cons.messages(stop_after=50, max_messages=40) as ctx:
        for msg in ctx:
            msg.ack()
            seqs.append(msg.metadata.sequence.stream)
        assert ctx.wait_closed(5)
        with pytest.raises(jss.ConsumerStoppedError):
            ctx.next(timeout=1)
    assert seqs == list(range(1, 51))
    assert sum(b["batch"] for b in spy.collect()) == 50
    wait_until(lambda: cons.info().num_ack_pending == 0)
    info = cons.info()
    assert (info.num_pending, info.num_waiting, info.num_redelivered) == (50, 0, 0)


def test_messages_stop_after_shared_by_threads(js, stream, subj, cons):
    publish(js, subj, 100)
    taken = []
    lock = threading.Lock()
    with cons.messages(stop_after=30, max_messages=7) as ctx:

        def work():
            for msg in ctx:
                msg.ack()
                with lock:
                    taken.append(msg.metadata.sequence.stream)

        threads = [threading.Thread(target=work, daemon=True) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert not any(t.is_alive() for t in threads)
    assert sorted(taken) == list(range(1, 31))
    wait_until(lambda: cons.info().num_ack_pending == 0)
    assert cons.info().num_pending == 70


def test_consume_stop_after_calls_the_handler_n_times(js, stream, subj, cons):
    publish(js, subj, 25)
    seen = []
    cc = cons.consume(lambda m: (seen.append(m.metadata.sequence.stream), m.ack()), stop_after=10, max_messages=4)
    assert cc.wait(10)
    assert seen == list(range(1, 11)) and cc.stats.delivered == 10
    wait_until(lambda: cons.info().num_ack_pending == 0)
    info = cons.info()
    assert (info.num_pending, info.num_waiting) == (15, 0)


def test_stop_after_waits_for_messages_still_to_come(js, stream, subj, cons):
    with cons.messages(stop_after=3, expires=1) as ctx:
        got = []
        publish(js, subj, 1)
        got.append(ctx.next(timeout=5))
        publish(js, subj, 5)
        got += [ctx.next(timeout=5), ctx.next(timeout=5)]
        assert [m.metadata.sequence.stream for m in got] == [1, 2, 3]
        with pytest.raises(jss.ConsumerStoppedError):
            ctx.next(timeout=1)
    for m in got:
        m.ack_sync()
    assert cons.info().num_pending == 3


def test_stop_after_in_bytes_mode(js, stream, subj, cons):
    publish(js, subj, 20, payload=b"z" * 50)
    with cons.messages(stop_after=6, max_bytes=100_000) as ctx:
        seqs = [m.metadata.sequence.stream for m in ctx]
    assert seqs == [1, 2, 3, 4, 5, 6]
    wait_until(lambda: cons.info().num_ack_pending == 0 or cons.info().num_waiting == 0)
    assert cons.info().num_waiting == 0
