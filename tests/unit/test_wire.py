"""The fast MSG/HMSG parser: same messages as nats-py's, whatever the read boundaries."""

import asyncio
import logging
import random

import pytest

from jetstream_sync._core import wire as _wire
from jetstream_sync._core.wire import FastParser
from jetstream_sync._core.writer import pub_command
from jetstream_sync._core.message import Msg, WireMsg

C_SCAN = _wire.load_speedups()


@pytest.fixture(autouse=True, params=["c", "python"])
def parser_kind(request, monkeypatch):
    """Every test runs with the C accelerator's scan and with the Python loop alone."""
    if request.param == "c":
        if C_SCAN is None:
            pytest.skip("the C accelerator is not built here")
    else:
        monkeypatch.setattr(_wire, "load_speedups", lambda: None)
    return request.param


class FakeClient:
    def __init__(self):
        self.stats = {"in_msgs": 0, "in_bytes": 0}
        self.generic = []
        self.pings = 0

    async def _process_msg(self, sid, subject, reply, data, headers):
        self.generic.append((sid, subject, reply, data, headers))
        self.stats["in_msgs"] += 1  # as nats-py counts what it reads itself: payload bytes, no headers
        self.stats["in_bytes"] += len(data)

    async def _process_ping(self):
        self.pings += 1

    async def _process_pong(self):
        pass


def stream_bytes():
    out = []
    expected = []
    for i in range(200):
        data = bytes([65 + i % 26]) * (i % 40)
        if i % 3 == 0:
            hdr = b"NATS/1.0\r\nX-I: %d\r\n\r\n" % i
            out.append(b"HMSG s.%d 1 $JS.ACK.S.C.1.%d.%d.1.0 %d %d\r\n%s%s\r\n" % (i, i, i, len(hdr), len(hdr) + len(data), hdr, data))
            expected.append((b"s.%d" % i, b"$JS.ACK.S.C.1.%d.%d.1.0" % (i, i), data, hdr))
        elif i % 3 == 1:
            out.append(b"MSG s.%d 1 %d\r\n%s\r\n" % (i, len(data), data))
            expected.append((b"s.%d" % i, b"", data, None))
        else:
            out.append(b"MSG s.%d 1 r.%d %d\r\n%s\r\n" % (i, i, len(data), data))
            expected.append((b"s.%d" % i, b"r.%d" % i, data, None))
        if i % 50 == 25:
            out.append(b"PING\r\n")
        if i % 70 == 0:
            status = b"NATS/1.0 408 Request Timeout\r\nA: 1\r\n\r\n"
            out.append(b"HMSG status 1 %d %d\r\n%s\r\n" % (len(status), len(status), status))
            expected.append((b"status", b"", b"", status))
        if i % 40 == 0:
            out.append(b"MSG other 2 3\r\nabc\r\n")  # not ours: nats-py's path
        if i % 45 == 7:
            # Payloads that look like protocol: CRLFs inside, at the ends, a fake control line.
            for data in (b"\r\n", b"a\r", b"\nb", b"\r\r\n\n", b"x\r\nMSG s.1 1 3\r\nabc\r\nPING\r\n", b"\r\n\r\n"):
                out.append(b"MSG tricky 1 r.t %d\r\n%s\r\n" % (len(data), data))
                expected.append((b"tricky", b"r.t", data, None))
                hdr = b"NATS/1.0\r\nX: \r\r\n\r\n"
                out.append(b"HMSG tricky 1 r.t %d %d\r\n%s%s\r\n" % (len(hdr), len(hdr) + len(data), hdr, data))
                expected.append((b"tricky", b"r.t", data, hdr))
    return b"".join(out), expected


class RecordingSink:
    """A bulk sink that records messages and statuses in arrival order."""

    conn = "conn"

    def __init__(self):
        self.got = []
        self.calls = 0

    @staticmethod
    def make(subject, reply, data, conn, hdrs):
        assert conn == "conn"
        return (subject, reply, data, hdrs)

    def on_msgs(self, msgs):
        self.calls += 1
        self.got.extend(msgs)

    def on_status(self, hdrs):
        self.got.append(("status", hdrs))


def as_sink_sees(expected):
    return [("status", e[3]) if e[0] == b"status" else e for e in expected]


def feed(chunks, sink=None):
    nc = FakeClient()
    got = []
    parser = FastParser(nc, {} if sink else {1: lambda *a: got.append(a)}, {1: sink} if sink else {})

    async def run():
        for chunk in chunks:
            await parser.parse(chunk)

    asyncio.run(run())
    return nc, got


def test_whole_buffer():
    data, expected = stream_bytes()
    nc, got = feed([data])
    assert got == expected
    assert [g[0] for g in nc.generic] == [2] * 5
    assert nc.pings == 4


def test_sink_gets_the_same_messages_in_bulk_with_statuses_in_order():
    data, expected = stream_bytes()
    sink = RecordingSink()
    nc, _ = feed([data], sink)
    assert sink.got == as_sink_sees(expected)
    assert sink.calls < 20  # in bulk: once per status or PING boundary, not per message
    assert [g[0] for g in nc.generic] == [2] * 5
    rng = random.Random(11)
    for _ in range(10):
        cuts = sorted(rng.sample(range(1, len(data)), 60))
        sink = RecordingSink()
        feed([data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])], sink)
        assert sink.got == as_sink_sees(expected)


def with_large_first(data, expected):
    """The same stream behind one 5000-byte message: the parser then finds
    control lines one by one instead of splitting the read (large-message mode)."""
    big = bytes(range(256)) * 20 + b"\r\nMSG fake 1 3\r\nabc\r\n"
    head = b"MSG big 1 r.b %d\r\n%s\r\n" % (len(big), big)
    return head + data, [(b"big", b"r.b", big, None)] + expected


def test_large_message_mode_parses_the_same():
    data, expected = with_large_first(*stream_bytes())
    nc, got = feed([data])
    assert got == expected
    sink = RecordingSink()
    feed([data], sink)
    assert sink.got == as_sink_sees(expected)
    rng = random.Random(5)
    for _ in range(10):
        cuts = sorted(rng.sample(range(1, len(data)), 60))
        nc, got = feed([data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])])
        assert got == expected


def test_every_split_point_pattern():
    data, expected = stream_bytes()
    rng = random.Random(7)
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(data)), 60))
        chunks = [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]
        nc, got = feed(chunks)
        assert got == expected
        assert len(nc.generic) == 5 and nc.pings == 4


@pytest.mark.parametrize("reads", ["whole", "split", "byte by byte", "large first"])
@pytest.mark.parametrize("to", ["handler", "sink"])
def test_each_message_is_counted_once_with_its_payload_bytes(reads, to):
    """in_msgs / in_bytes as nats-py counts them: every MSG/HMSG once (those
    of nats-py's own subscriptions too), payload bytes without the headers."""
    data, expected = stream_bytes()
    if reads == "large first":
        data, expected = with_large_first(data, expected)
    if reads == "split":
        cuts = sorted(random.Random(11).sample(range(1, len(data)), 60))
        chunks = [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]
    elif reads == "byte by byte":
        chunks = [data[i : i + 1] for i in range(len(data))]
    else:
        chunks = [data]
    nc, _ = feed(chunks, RecordingSink() if to == "sink" else None)
    payloads = [e[2] for e in expected] + [b"abc"] * len(nc.generic)  # nats-py's: sid 2
    assert len(nc.generic) == 5
    assert nc.stats == {"in_msgs": len(payloads), "in_bytes": sum(map(len, payloads))}


def test_byte_by_byte():
    data, expected = stream_bytes()
    nc, got = feed([data[i : i + 1] for i in range(len(data))])
    assert got == expected


def test_pub_command():
    assert pub_command("a.b", "", b"xy") == b"PUB a.b 2\r\nxy\r\n"
    assert pub_command("a.b", "_INBOX.1", b"") == b"PUB a.b _INBOX.1 0\r\n\r\n"


class CountingBuffer(bytearray):
    """A read buffer that counts how often the parser copies it whole."""

    copies = 0

    def __bytes__(self):
        CountingBuffer.copies += 1
        return bytes(memoryview(self))


def test_large_message_split_over_many_reads_is_copied_once():
    """A 16 MiB message in 32 KiB reads: the buffer is not copied per read
    (that made a large message cost the square of its size)."""
    payload = bytes(range(256)) * (16 * 4096)
    data = b"MSG big 1 %d\r\n%s\r\nMSG s.1 1 2\r\nok\r\n" % (len(payload), payload)
    nc = FakeClient()
    got = []
    parser = FastParser(nc, {1: lambda *a: got.append(a)}, {})
    parser.buf = CountingBuffer()
    CountingBuffer.copies = 0

    async def run():
        for i in range(0, len(data), 32 * 1024):
            await parser.parse(data[i : i + 32 * 1024])

    asyncio.run(run())
    assert [g[0] for g in got] == [b"big", b"s.1"]
    assert got[0][2] == payload and got[1][2] == b"ok"
    assert CountingBuffer.copies <= 3, CountingBuffer.copies


def test_accelerator_matches_its_switch(parser_kind):
    parser = FastParser(FakeClient(), {}, {})
    assert (parser._scan is not None) == (parser_kind == "c")


class WireSink(RecordingSink):
    make = WireMsg


def msg_slots(msg):
    return {name: getattr(msg, name) for name in Msg.__slots__}


def test_messages_built_in_place_equal_the_constructed_ones():
    data, expected = stream_bytes()
    sink = WireSink()
    parser = FastParser(FakeClient(), {}, {1: sink})
    asyncio.run(parser.parse(data))
    msgs = [m for m in sink.got if not isinstance(m, tuple)]
    want = [WireMsg(s, r, d, "conn", h) for s, r, d, h in expected if s != b"status"]
    assert [type(m) for m in msgs] == [WireMsg] * len(want)
    assert [msg_slots(m) for m in msgs] == [msg_slots(m) for m in want]
    assert msgs[0].headers == {"X-I": "0"} and msgs[0].size == want[0].size


def test_a_failing_handler_is_logged_and_the_rest_delivered(caplog):
    got = []

    def handler(subject, reply, data, headers):
        got.append(data)
        if data == b"2":
            raise RuntimeError("boom")

    stream = b"".join(b"MSG s 1 1\r\n%d\r\n" % i for i in range(5))
    parser = FastParser(FakeClient(), {1: handler}, {})
    with caplog.at_level(logging.ERROR, logger="jetstream_sync._wire"):
        asyncio.run(parser.parse(stream))
    assert got == [b"0", b"1", b"2", b"3", b"4"]
    failed = [r for r in caplog.records if r.getMessage() == "message handler failed"]
    assert len(failed) == 1 and "boom" in str(failed[0].exc_info[1])


def outcome(chunks, use_c, monkeypatch):
    """What a parser made of a byte stream: sink messages, handler calls,
    nats-py's share, pings, and the error it raised (if any)."""
    nc = FakeClient()
    got = []
    sink = RecordingSink()

    async def run():
        parser = FastParser(nc, {3: lambda *a: got.append(a)}, {1: sink})
        for chunk in chunks:
            await parser.parse(chunk)

    with monkeypatch.context() as m:
        if not use_c:
            m.setattr(_wire, "load_speedups", lambda: None)
            # Payloads found by offset, as the accelerator does (split mode
            # reads a stream whose CRLF after a payload is mangled otherwise).
            m.setattr(_wire, "_SPLIT_BELOW", 0)
        try:
            asyncio.run(run())
            error = None
        except Exception as exc:
            error = type(exc)
    return sink.got, got, nc.generic, nc.pings, nc.stats, error


def test_mangled_streams_read_the_same_with_and_without_the_accelerator(parser_kind, monkeypatch):
    """Bytes flipped, dropped or doubled anywhere: the accelerator leaves what
    it does not read exactly to the Python loop, so both end the same."""
    if parser_kind != "c":
        pytest.skip("compares the two itself (in its [c] run)")
    data, _ = stream_bytes()
    data = data.replace(b"MSG other 2 ", b"MSG other 3 ")  # some for the plain handler
    rng = random.Random(23)
    noise = b" \t\r\n0123456789MSGHP+-.x"
    for _ in range(150):
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(b))
            kind = rng.random()
            if kind < 0.5:
                b[at] = rng.choice(noise)
            elif kind < 0.75:
                del b[at]
            else:
                b.insert(at, rng.choice(noise))
        b = bytes(b)
        cuts = sorted(rng.sample(range(1, len(b)), 20))
        chunks = [b[x:y] for x, y in zip([0] + cuts, cuts + [len(b)])]
        assert outcome(chunks, True, monkeypatch) == outcome(chunks, False, monkeypatch)


def test_an_interrupt_in_a_handler_ends_the_read_as_in_python():
    """KeyboardInterrupt (or SystemExit, a cancellation) is not logged and
    passed over: it ends parse() with the messages before it delivered."""
    got = []

    def handler(subject, reply, data, headers):
        got.append(data)
        if data == b"1":
            raise KeyboardInterrupt

    parser = FastParser(FakeClient(), {1: handler}, {})
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(parser.parse(b"".join(b"MSG s 1 1\r\n%d\r\n" % i for i in range(4))))
    assert got == [b"0", b"1"]


def test_a_type_that_only_borrows_the_slots_is_constructed_not_built_in_place():
    """A class given Msg's slot descriptors without their layout must not be
    written at those offsets: the accelerator calls it as a constructor."""

    class Borrowed:
        __slots__ = ()

    for name in Msg.__slots__:
        setattr(Borrowed, name, Msg.__dict__[name])

    class Sink(RecordingSink):
        make = Borrowed

    parser = FastParser(FakeClient(), {}, {1: Sink()})
    with monkeypatch_built_in_place(Borrowed), pytest.raises(TypeError):
        asyncio.run(parser.parse(b"MSG s 1 r 1\r\nx\r\n"))


class monkeypatch_built_in_place:
    def __init__(self, cls):
        self.cls = cls

    def __enter__(self):
        self.old = _wire._built_in_place
        _wire._built_in_place = self.cls

    def __exit__(self, *exc):
        _wire._built_in_place = self.old
