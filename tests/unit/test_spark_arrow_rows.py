"""The Spark reader's RecordBatches: the rows the C accelerator fills in are
the rows the Python path makes, for any subject, payload and header block,
and the accelerator declines only what it must leave to Python."""

from __future__ import annotations

import random
from typing import List, Optional, Tuple

import pytest

from jetstream_sync._core import wire as _wire
from jetstream_sync._core.message import WireMsg
from jetstream_sync.spark import _read
from jetstream_sync.spark._read import _arrow_batch_py, arrow_batch

pa = pytest.importorskip("pyarrow")
C = _wire.load_speedups()
pytestmark = pytest.mark.skipif(C is None, reason="the C accelerator is not built here")

STREAM = "ORDERS"


def schema():
    from jetstream_sync.spark.datasource import _arrow_schema

    return _arrow_schema()


# Header lines, each with whether the accelerator reads it (False: a value
# that is not UTF-8, which Python decodes with U+FFFD and C leaves to it).
LINES: List[Tuple[bytes, bool]] = [
    (b"Nats-Msg-Id: abc-1", True),
    (b"A: 1", True),
    (b"A: 2", True),  # a repeated name: first place, last value
    (b"a: lower", True),  # names are case-sensitive here, as in nats-py
    (b"  Spaced  :   around   ", True),
    (b"Inner Space: skipped", True),
    (b"Sep\x1cName: skipped (str.isspace)", True),
    (b"no colon at all", True),
    (b": empty name", True),
    (b"Colons: a:b:c", True),
    (b"Tab:\tvalue\t", True),
    (b"Empty:", True),
    (b"Caf\xc3\xa9: skipped (not ASCII)", True),
    (b"Utf8: caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac", True),
    (b"Lone-CR: a\rb", True),
    (b"Lone-LF: a\nb", True),
    (b"", True),
]
BAD = [(b"Bad: \xff\xfe", False), (b"Cut: caf\xc3", False)]
STATUS = [b"NATS/1.0", b"NATS/1.0 100 FlowControl Request", b"NATS/1.0 408 Request Timeout", b"NATS/1.0 503"]
SUBJECT_TOKENS = ["orders", "eu", "x", "caf\u00e9", "\u65e5\u672c", "a-b_c", "*", ">", "1"]


def header_block(rng: random.Random) -> Tuple[Optional[bytes], bool]:
    kind = rng.random()
    if kind < 0.3:
        return None, True
    if kind < 0.35:
        return b"", True
    if kind < 0.4:
        return rng.choice(STATUS) + b"\r\n\r\n", True  # a status line and no headers: null
    if kind < 0.42:
        return b"NATS/1.0", True  # no line end at all: null
    lines = [rng.choice(BAD if rng.random() < 0.003 else LINES) for _ in range(rng.randint(0, 8))]
    block = rng.choice(STATUS) + b"\r\n" + b"\r\n".join(line for line, _ in lines)
    if rng.random() < 0.8:
        block += b"\r\n\r\n"
    return block, all(ok for _, ok in lines)


Spec = Tuple[bytes, bytes, bytes, None, Optional[bytes]]  # WireMsg's arguments


def message(rng: random.Random, v2: bool, seq: int) -> Tuple[Spec, bool]:
    subject = ".".join(rng.choice(SUBJECT_TOKENS) for _ in range(rng.randint(1, 4)))
    size = rng.choice([0, 0, 1, 7, 200, 1000, 65536]) if rng.random() > 0.02 else 1 << 20
    data = rng.randbytes(size)
    nanos = rng.randint(0, 9_223_372_036_854_775_807) if rng.random() < 0.1 else 1_795_960_269_205_946_385 + seq
    pending = rng.randint(0, 10**6)
    if v2:
        reply = f"$JS.ACK.hub.ACCHASH.{STREAM}.cons.1.{seq}.{seq}.{nanos}.{pending}.tok"
    else:
        reply = f"$JS.ACK.{STREAM}.cons.1.{seq}.{seq}.{nanos}.{pending}"
    hdr, plain = header_block(rng)
    return (subject.encode(), reply.encode(), data, None, hdr), plain


def made(specs: List[Spec]) -> List[WireMsg]:
    """Messages as the parser makes them. Each path gets its own: reading a
    message's headers in Python keeps them parsed, and C leaves such a
    message to Python."""
    return [WireMsg(*spec) for spec in specs]


def both(specs: List[Spec], include_headers: bool, monkeypatch) -> Tuple[object, object]:
    """(the batch arrow_batch() makes, the batch of the Python path)."""
    got = arrow_batch(made(specs), STREAM, include_headers, schema())
    with monkeypatch.context() as m:
        m.setattr(_read, "load_speedups", lambda: None)
        py = _arrow_batch_py(made(specs), STREAM, include_headers, schema())
        fallback = arrow_batch(made(specs), STREAM, include_headers, schema())  # without C: the same function
    assert fallback.equals(py)
    return got, py


@pytest.mark.timeout(120)
def test_rows_from_c_equal_rows_from_python(monkeypatch):
    rng = random.Random(30)
    filled_by_c = 0
    for round_ in range(300):
        v2 = rng.random() < 0.3
        start = rng.randint(1, 10**12)
        drawn = [message(rng, v2, start + i) for i in range(rng.randint(1, 40))]
        specs = [spec for spec, _ in drawn]
        include_headers = rng.random() < 0.8
        plain = all(ok for _, ok in drawn) or not include_headers
        taken = C.arrow_rows(made(specs), include_headers, STREAM.encode()) is not None
        assert taken == plain, f"round {round_}: C {'took' if taken else 'declined'} a batch it should not have"
        filled_by_c += taken
        got, want = both(specs, include_headers, monkeypatch)
        got.validate(full=True)
        assert got.schema == want.schema
        assert got.to_pylist() == want.to_pylist(), f"round {round_}"
        assert got.equals(want)
    assert filled_by_c > 200  # most batches are C's: the comparison is not with Python on both sides


def test_a_header_block_as_nats_py_reads_it(monkeypatch):
    block = b"NATS/1.0 100 Idle\r\nB: 1\r\nA: x\r\nB: 2\r\n Bad Key : no\r\nnocolon\r\n\r\n"
    specs = [(b"s", f"$JS.ACK.{STREAM}.c.1.5.5.1000.0".encode(), b"d", None, block)]
    assert C.arrow_rows(made(specs), True, STREAM.encode()) is not None
    got, want = both(specs, True, monkeypatch)
    assert got.column("headers").to_pylist() == want.column("headers").to_pylist() == [[("B", "2"), ("A", "x")]]
    assert got.column("seq").to_pylist() == [5]


def test_messages_it_does_not_read_exactly_are_left_to_python(monkeypatch):
    ack = f"$JS.ACK.{STREAM}.c.1.5.5.1000.0".encode()
    cases = {
        "a subject that is not UTF-8": [WireMsg(b"caf\xe9", ack, b"", None, None)],
        "an ack subject of another shape": [WireMsg(b"s", b"$JS.ACK.x.y.1.2", b"", None, None)],
        "an ack subject with a token more than v2's": [
            WireMsg(b"s", f"$JS.ACK.d.h.{STREAM}.c.1.6.6.1000.0.t.x".encode(), b"", None, None)],
        "shapes mixed in one batch": [WireMsg(b"s", ack, b"", None, None),
                                      WireMsg(b"s", f"$JS.ACK.d.h.{STREAM}.c.1.6.6.1000.0.t".encode(), b"", None, None)],
        "a sequence that is not plain digits": [WireMsg(b"s", f"$JS.ACK.{STREAM}.c.1.+5.5.1000.0".encode(), b"", None, None)],
        "a timestamp beyond int64": [WireMsg(b"s", f"$JS.ACK.{STREAM}.c.1.5.5.9223372036854775808.0".encode(), b"", None, None)],
        "headers already parsed": [WireMsg(b"s", ack, b"", None, b"NATS/1.0\r\nA: 1\r\n\r\n")],
    }
    cases["headers already parsed"][0].headers  # noqa: B018 - parses and keeps them
    for what, msgs in cases.items():
        assert C.arrow_rows(msgs, True, STREAM.encode()) is None, what
    # Python reads those it can read (its own headers, U+FFFD for bad bytes).
    msg = cases["headers already parsed"][0]
    assert arrow_batch([msg], STREAM, True, schema()).column("headers").to_pylist() == [[("A", "1")]]
