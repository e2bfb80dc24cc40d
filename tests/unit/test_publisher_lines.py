"""The async publisher's wire work: the C accelerator's batch of PUB lines
and its PubAck reader give exactly what the Python code gives."""

import collections
import random

import pytest

from jetstream_sync._core import publisher as _publisher
from jetstream_sync._core.publisher import PubAckFuture, _command, parse_puback, plain_puback
from jetstream_sync._core.wire import load_speedups

SPEEDUPS = load_speedups()
needs_c = pytest.mark.skipif(SPEEDUPS is None, reason="the C accelerator is not built here")


class Publisher:
    def kick_quietly(self):
        pass

    def check_not_loop_thread(self):
        pass


def entries():
    out = []
    for i in range(300):
        subject = ["orders.new", "zählung.ü", "a" * 200, "x.y.z"][i % 4]
        data = bytes([i % 256]) * (i % 70)
        hdr = b"" if i % 3 else b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n" % i
        out.append(PubAckFuture(Publisher(), subject, data, None, hdr, 1.0))
    return out


@needs_c
def test_a_batch_of_lines_is_what_the_python_send_makes():
    queue = collections.deque(entries())
    expected = [_command(e, b"_INBOX.abc.%d" % n) for n, e in enumerate(queue, 42)]
    inflight = {b"7": "earlier"}
    commands, count, size, next_id, failed = SPEEDUPS.pub_batch(queue, b"_INBOX.abc.", 41, inflight)
    assert failed is None
    assert commands == b"".join(expected)
    assert (count, next_id, len(queue)) == (300, 341, 0)
    assert size == sum(len(e._data) for e in entries())
    assert list(inflight) == [b"7"] + [b"%d" % n for n in range(42, 342)]
    assert [inflight[b"%d" % n]._data for n in (42, 43)] == [b"", b"\x01"]


@needs_c
def test_an_empty_queue_makes_no_lines():
    assert SPEEDUPS.pub_batch(collections.deque(), b"p.", 5, {}) == (b"", 0, 0, 5, None)


@needs_c
def test_a_publish_it_cannot_take_is_handed_back_with_what_was_made_before_it():
    good = entries()[:4]
    bad = PubAckFuture(Publisher(), "s", "not bytes", None, b"", 1.0)
    queue = collections.deque(good[:2] + [bad] + good[2:])
    inflight = {}
    commands, count, size, next_id, failed = SPEEDUPS.pub_batch(queue, b"p.", 100, inflight)
    assert commands == _command(good[0], b"p.101") + _command(good[1], b"p.102")
    assert (count, next_id, list(inflight)) == (2, 102, [b"101", b"102"])
    assert failed[0] is bad and isinstance(failed[1], TypeError)
    assert list(queue) == good[2:]  # the rest waits for the next call
    commands, count, _, next_id, failed = SPEEDUPS.pub_batch(queue, b"p.", next_id, inflight)
    assert (count, next_id, failed, list(inflight)) == (2, 104, None, [b"101", b"102", b"103", b"104"])


def test_the_publisher_sends_around_a_publish_it_cannot_take(monkeypatch):
    """The loop side: what comes before and after a bad entry is sent and
    tracked, the bad one fails at once (with or without the accelerator)."""
    import asyncio

    sent = []

    class Conn:
        fast = True

        def send_commands(self, data, msgs, size):
            sent.append((data, msgs))
            return True

    pub = _publisher.AsyncPublisher.__new__(_publisher.AsyncPublisher)
    pub.conn = Conn()
    pub._prefix = b"p."
    pub._next_id = 0
    pub._inflight = {}
    pub._sweep_handle = None
    pub._completed = pub._submitted = pub._waiters = 0
    pub._max = 10
    pub._pub_batch = SPEEDUPS.pub_batch if SPEEDUPS is not None else None
    good = entries()[:3]
    bad = PubAckFuture(Publisher(), "s", "not bytes", None, b"", 1.0)
    queue = collections.deque([good[0], bad, good[1], good[2]])

    async def run():
        try:
            pub._send_batch(queue)
        finally:
            if pub._sweep_handle is not None:
                pub._sweep_handle.cancel()

    if SPEEDUPS is None:
        with pytest.raises(TypeError):
            asyncio.run(run())
        return
    asyncio.run(run())
    assert b"".join(d for d, _ in sent) == b"".join(_command(e, b"p.%d" % i) for i, e in zip((1, 2, 3), good))
    assert list(pub._inflight) == [b"1", b"2", b"3"] and not queue
    assert isinstance(bad.exception(timeout=0), TypeError) and pub._completed == 1


def pubacks():
    yield from (
        b'{"stream":"S","seq":3}',
        b'{"stream":"ORDERS","seq":18446744073}',
        b'{"stream":"S", \t"seq":1}\n ',
        b'{"stream":"S","seq":123456789012345678}',
        b'{"stream":"S","seq":1234567890123456789}',  # 19 digits: JSON's job
        b'{"stream":"S","seq":3,"duplicate":true}',
        b'{"stream":"S","seq":3,"domain":"hub"}',
        b'{"stream":"a\\"b","seq":3}',
        b'{"stream":"","seq":3}',
        b'{"stream":"S","seq":}',
        b'{"stream":"S","seq":-3}',
        b'{"stream":"S","seq":3} x',
        b'{"stream":"S","seq":0000000000000000001}',  # leading zeros: the value counts
        b'{"stream":"S","seq":0}',
        b'{"stream":"S","seq":00}',
        b'{"stream":"S","seq":3',
        b'{"stream":"S"',
        b"",
        b'{"error":{"code":503,"description":"x"}}',
        '{"stream":"zählung","seq":9}'.encode(),
    )
    rng = random.Random(3)
    base = b'{"stream":"KV_x","seq":42}'
    for _ in range(2000):
        b = bytearray(base)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(b) + 1)
            if rng.random() < 0.5 and at < len(b):
                b[at] = rng.choice(b' \t\r\n"\\,:{}0123456789sqe')
            else:
                b.insert(at, rng.choice(b' \t"\\9}'))
        yield bytes(b)


@needs_c
def test_the_plain_acknowledgement_is_read_alike():
    """Alike, except that sequences past 18 digits are left to the JSON path."""
    for data in pubacks():
        plain = plain_puback(data)
        if plain is not None and plain[1] >= 10**18:
            plain = None
        assert SPEEDUPS.puback(data) == plain, data


def outcome(data, plain_of):
    try:
        ack = parse_puback(data, plain_of)
    except Exception as exc:
        return type(exc), str(exc)
    return ack


@needs_c
def test_parse_puback_gives_the_same_acks_and_errors_either_way():
    for data in pubacks():
        assert outcome(data, SPEEDUPS.puback) == outcome(data, plain_puback), data


def test_the_future_lets_go_of_its_payload_once_resolved(monkeypatch):
    class Conn:
        loop_thread = None

        def add_listener(self, *a):
            pass

    pub = _publisher.AsyncPublisher.__new__(_publisher.AsyncPublisher)
    pub._completed = pub._submitted = 0
    pub._waiters = 0
    pub._max = 10
    pub._make_reply = None  # a JetStream publisher (PubAcks)
    f = PubAckFuture(Publisher(), "s", b"x" * 1000, {"A": "b"}, b"NATS/1.0\r\nA: b\r\n\r\n", 1.0)
    pub._done(f, "ack", None)
    assert f.result(timeout=0) == "ack"
    assert (f._data, f._hdr, f._headers) == (b"", b"", None)
