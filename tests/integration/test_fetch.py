"""fetch(), fetch_no_wait() and next() against a real server (nats.go TestPullConsumerFetch*)."""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import Bounded, Publishing, PullSpy, end_with_the_loop_busy, left_for_ack_wait, publish, sized_payload, wait_until


def test_fetch_no_options(js, subj, cons):
    publish(js, subj, 5)
    msgs = list(cons.fetch(5))
    assert [m.data for m in msgs] == [b"0", b"1", b"2", b"3", b"4"]
    assert [m.metadata.sequence.stream for m in msgs] == [1, 2, 3, 4, 5]


def test_fetch_blocks_per_message_and_returns_when_batch_full(js, subj, cons):
    publish(js, subj, 3)
    start = time.monotonic()
    assert len(list(cons.fetch(3, expires=10))) == 3
    assert time.monotonic() - start < 2  # did not wait for expiry


def test_delete_consumer_during_fetch(js, stream, subj, cons):
    publish(js, subj, 5)
    got = []
    # The fetch may see "409 Consumer Deleted" before the deleting call has its
    # answer: that call ends before the test does (and its client closes).
    deleter = threading.Thread(target=stream.delete_consumer, args=("c",))
    with pytest.raises(jss.ConsumerDeletedError):
        for msg in cons.fetch(10, expires=10):
            got.append(msg)
            if len(got) == 5:
                deleter.start()
    deleter.join(10)
    assert len(got) == 5 and not deleter.is_alive()


def test_fetch_single_messages_one_by_one(js, subj, cons):
    got = []

    def consume():
        while len(got) < 5:
            got.extend(m.data for m in cons.fetch(1, expires=5))

    t = threading.Thread(target=consume)
    t.start()
    wait_until(lambda: cons.info().num_waiting == 1)  # the first fetch waits on the server before anything is published
    publish(js, subj, 5)
    t.join(20)
    assert got == [b"0", b"1", b"2", b"3", b"4"]


def test_fetch_no_wait_with_nothing_available(js, subj, cons):
    result = cons.fetch_no_wait(5)
    publish(js, subj, 5)
    start = time.monotonic()
    assert list(result) == []
    assert time.monotonic() - start < 1.5


def test_fetch_no_wait_with_some_available(js, subj, cons):
    publish(js, subj, 5)
    # The server sends the publish ack before it tells the consumer about the
    # message, so a no-wait pull right after the ack can still get 404 (seen
    # once in CI). Wait until the consumer itself counts them.
    wait_until(lambda: cons.info().num_pending == 5)
    result = cons.fetch_no_wait(10)
    assert [m.data for m in result] == [b"0", b"1", b"2", b"3", b"4"]


def test_fetch_with_short_expiry_on_empty_consumer(cons):
    start = time.monotonic()
    assert list(cons.fetch(5, expires=0.05)) == []
    assert time.monotonic() - start < 1.5


def test_invalid_fetch_options_send_nothing(nc, stream, cons):
    spy = PullSpy(nc, stream.name, "c")
    for kwargs in ({"expires": -0.05}, {"idle_heartbeat": 20}, {"expires": 3, "idle_heartbeat": 2}, {"idle_heartbeat": -1}):
        with pytest.raises(jss.InvalidOptionError):
            cons.fetch(5, **kwargs)
    with pytest.raises(jss.InvalidOptionError):
        cons.fetch(5, max_bytes=0)
    with pytest.raises(jss.InvalidOptionError):
        cons.fetch()
    assert spy.count == 0


def test_fetch_consumer_does_not_exist(js, stream, subj, cons):
    publish(js, subj, 2)
    assert len(list(cons.fetch(2))) == 2
    assert list(cons.fetch(1, expires=0.2)) == []
    stream.delete_consumer("c")
    start = time.monotonic()
    with pytest.raises(jss.NoRespondersError):
        list(cons.fetch(1))
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize("max_bytes, expected", [(300, 5), (250, 4), (30, 0)])
def test_fetch_bytes(js, stream, max_bytes, expected):
    subj = f"{stream.name.lower()}.x"
    payload = sized_payload(stream.name, "c", subj, 60)
    publish(js, subj, 5, payload)
    cons = stream.create_consumer(durable_name="c")
    start = time.monotonic()
    msgs = list(cons.fetch(max_bytes=max_bytes, expires=5))  # no error raised
    assert len(msgs) == expected
    assert all(m.size == 60 for m in msgs)
    assert time.monotonic() - start < 2  # ended by the server's status, not the expiry


def test_fetch_with_both_limits_ends_at_whichever_comes_first(js, stream):
    subj = f"{stream.name.lower()}.x"
    publish(js, subj, 5, sized_payload(stream.name, "c", subj, 60))
    cons = stream.create_consumer(durable_name="c")
    start = time.monotonic()
    assert len(list(cons.fetch(10, max_bytes=250, expires=5))) == 4  # the bytes first
    assert len(list(cons.fetch(1, max_bytes=1500, expires=5))) == 1  # the count first
    assert time.monotonic() - start < 2  # neither ran to its expiry


def test_fetch_no_wait_with_expires_waits_for_the_first_messages(js, subj, cons):
    start = time.monotonic()
    assert list(cons.fetch_no_wait(10, expires=0.5)) == []  # nothing came: ends at the expiry
    assert 0.4 < time.monotonic() - start < 2
    result = cons.fetch_no_wait(10, expires=10)
    publish(js, subj, 1)
    start = time.monotonic()
    got = [m.data for m in result]
    assert got == [b"0"]
    assert time.monotonic() - start < 5  # returned with the first, not at the expiry
    publish(js, subj, 5, start=1)
    wait_until(lambda: cons.info().num_pending == 5)
    start = time.monotonic()
    assert [m.data for m in cons.fetch_no_wait(10, expires=10)] == [b"1", b"2", b"3", b"4", b"5"]
    assert time.monotonic() - start < 5


def test_fetch_bytes_until_timeout(js, subj, cons):
    publish(js, subj, 5)
    start = time.monotonic()
    assert len(list(cons.fetch(max_bytes=100_000, expires=0.3))) == 5
    assert 0.25 < time.monotonic() - start < 2


def test_breaking_out_of_a_fetch_naks_the_rest(js, subj, cons):
    publish(js, subj, 5)
    for msg in cons.fetch(5):
        msg.ack()
        break
    # The 4 received and never handed out come back at once, not after AckWait.
    again = [m.metadata.sequence.stream for m in cons.fetch(4, expires=2)]
    assert again == [2, 3, 4, 5]


def test_a_completed_fetch_not_yet_read_is_given_back_by_close(server, js, subj, cons):
    """close() NAKs what a fetch received and never handed out, also once the
    pull itself is over; reading it afterwards says the client is closed."""
    publish(js, subj, 3)
    other = jss.connect(server.url, name="fetcher")
    try:
        theirs = other.jetstream().consumer(cons.stream_name, cons.name)
        before = _subscriptions(server, "fetcher")
        result = theirs.fetch(3, expires=30)
        wait_until(lambda: cons.info().num_ack_pending == 3)  # all three delivered to the fetch
        wait_until(lambda: _subscriptions(server, "fetcher") == before)  # the pull is over: its inbox is gone
        other.close()
        with pytest.raises(jss.ConnectionClosedError):
            list(result)
        # Given back at once, not after AckWait (30 s).
        assert [m.metadata.sequence.stream for m in cons.fetch(3, expires=2)] == [1, 2, 3]
    finally:
        other.close()


def _subscriptions(server, name):
    (conn,) = [c for c in server.monitor("connz")["connections"] if c.get("name") == name]
    return conn["subscriptions"]


@pytest.mark.parametrize("taken", [1, 137])
def test_an_abandoned_fetch_leaves_nothing_pending_for_ack_wait(js, stream, taken):
    publish(js, f"{stream.name.lower()}.x", 2_000, b"m")
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit")  # AckWait 30 s
    handed = []
    for msg in cons.fetch(500, expires=5):
        handed.append(msg.metadata.sequence.stream)
        msg.ack()
        if len(handed) == taken:
            break  # the rest of the pull, received or on its way, is given back
    assert left_for_ack_wait(cons, handed, 2_000) == 0


@pytest.mark.timeout(60)
def test_a_fetch_abandoned_while_delivering_with_a_busy_loop_leaves_nothing_for_ack_wait(server, nc, stream):
    subj = f"{stream.name.lower()}.x"
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit")
    handed = []
    # Large messages: what comes after the PONG takes many socket reads.
    with Publishing(server.url, subj, b"x" * 4096):
        result = cons.fetch(2000, expires=10)  # still delivering when given up
        messages = iter(result)
        for _ in range(5):
            msg = next(messages)
            handed.append(msg.metadata.sequence.stream)
            msg.ack()
        nc.flush()  # the acks are out: nothing queued delays the busy spell
        end_with_the_loop_busy(nc, result, "close")
        assert list(messages) == []
    assert left_for_ack_wait(cons, handed, stream.info().state.last_seq) == 0


def test_next(js, subj, cons):
    publish(js, subj, 5)
    assert [cons.next(timeout=5).data for _ in range(5)] == [b"0", b"1", b"2", b"3", b"4"]


def test_next_with_custom_timeout(cons):
    start = time.monotonic()
    with pytest.raises(jss.TimeoutError):
        cons.next(timeout=0.05)
    assert time.monotonic() - start < 1.5


def test_next_delete_consumer_while_waiting(stream, cons):
    deleter = threading.Timer(0.3, stream.delete_consumer, args=("c",))
    deleter.start()
    with pytest.raises(jss.ConsumerDeletedError):
        cons.next(timeout=10)
    deleter.join(10)  # its call answered before the client closes
    assert not deleter.is_alive()


def test_fetch_heartbeat_and_stats(js, subj, cons):
    result = cons.fetch(1, expires=1.2, idle_heartbeat=0.25)
    assert list(result) == []
    assert result.stats.heartbeats >= 2
    assert result.stats.statuses.get("408 Request Timeout") == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.fetch(2**63),
        lambda c: c.fetch(max_bytes=2**63),
        lambda c: c.messages(max_bytes=2**63),
        lambda c: c.messages(max_messages=10**20),
        lambda c: c.reset(2**70),
    ],
)
def test_counts_beyond_64_bits_are_refused_before_anything_is_sent(cons, call):
    with pytest.raises(jss.InvalidOptionError, match="64 bits"):
        call(cons)
    assert cons.info().num_waiting == 0


def test_consumer_config_values_beyond_64_bits_are_refused(js, stream):
    with pytest.raises(jss.InvalidOptionError, match="64 bits"):
        stream.create_consumer(durable_name="big", max_ack_pending=2**70)
    assert js.consumer_names(stream.name) == []


@pytest.mark.timeout(120)
def test_heartbeats_under_cpu_load_are_not_missed(js, stream):
    """Heartbeats already read from the socket (or about to be) are traffic:
    a busy process must not call them missing."""
    cons = stream.create_consumer(durable_name="hb")
    stop = threading.Event()

    def burn() -> None:
        while not stop.is_set():
            sum(i * i for i in range(2000))

    burners = [threading.Thread(target=burn, daemon=True) for _ in range(3)]
    for t in burners:
        t.start()
    errors = []
    try:
        for _ in range(30):
            try:
                assert list(cons.fetch(1, expires=0.6, idle_heartbeat=0.1)) == []
            except jss.NoHeartbeatError as exc:
                errors.append(exc)
    finally:
        stop.set()
        for t in burners:
            t.join(5)
    assert errors == []


def _fetch_loop(cons, errors_seen, fetches):
    """fetch + iterate until the client is closed; NAK so the supply never runs out."""
    while True:
        try:
            result = cons.fetch(10, expires=5)
            fetches.append(1)
            for m in result:
                m.nak()
        except jss.ConnectionClosedError:
            return
        except BaseException as exc:
            errors_seen.append(exc)
            return


@pytest.mark.timeout(120)
def test_fetch_started_while_close_runs_never_blocks(server, js, stream, subj, cons):
    """fetch() calls and their iteration racing close() all end within a couple
    of seconds of close() returning, with ConnectionClosedError at worst.

    The race (a fetch registered after close() stopped the live ones, before
    the client counts as closed) is narrow: 16 threads, up to 30 closes."""
    publish(js, subj, 200)
    for attempt in range(30):
        client = jss.connect(server.url, name=f"fetch-vs-close-{attempt}")
        fcons = client.jetstream().consumer(stream.name, cons.name)
        errors_seen = []
        fetches = []
        workers = [Bounded(lambda: _fetch_loop(fcons, errors_seen, fetches), f"fetch-{i}") for i in range(16)]
        wait_until(lambda: len(fetches) >= 100 + 10 * attempt, timeout=20)  # close lands at a varying point
        closing = Bounded(client.close, "close").join(15)
        assert closing.finished, f"attempt {attempt}: close() did not return within 15s"
        closed_at = time.monotonic()
        for w in workers:
            w.join(max(0.0, closed_at + 3.0 - time.monotonic()))
        stuck = sum(not w.finished for w in workers)
        assert stuck == 0, (
            f"attempt {attempt}: {stuck} of {len(workers)} fetch threads still blocked 3s after close() returned"
        )
        assert not errors_seen, f"attempt {attempt}: fetch raised {errors_seen[:3]!r}, not ConnectionClosedError"


@pytest.mark.parametrize("read", ["fetch", "next"])
def test_a_fetch_whose_start_fails_raises_that_error_to_its_caller(nc, js, subj, cons, monkeypatch, read):
    """A failure while the loop subscribes and pulls reaches the caller,
    translated, without a wait; the message stays for the next pull."""
    import nats.errors

    publish(js, subj, 1)

    async def refuse(*args, **kwargs):
        raise nats.errors.ConnectionReconnectingError()

    monkeypatch.setattr(nc._conn, "subscribe", refuse)
    run = Bounded(lambda: list(cons.fetch(1, expires=5)) if read == "fetch" else cons.next(timeout=5)).join(10)
    assert run.finished, "the caller still waits"
    assert isinstance(run.error, jss.JetStreamError) and not isinstance(run.error, jss.TimeoutError), run.error
    monkeypatch.undo()
    assert cons.next(timeout=5).data  # the message is still there for the next pull
