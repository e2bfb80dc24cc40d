"""read_messages(SeqRange) on executors, without Spark: a partition ends only
when its range is read, and otherwise raises a retryable error."""

from __future__ import annotations

import datetime
import json
from typing import List, Optional, Tuple

import pytest

import jetstream_sync as jss
from jetstream_sync.options.connection import ConnectionSettings
from jetstream_sync.spark import _read
from jetstream_sync.spark._clients import close_all
from jetstream_sync.spark._read import SeqRange, read_messages

from ..helpers import publish, spark_clients_closed_after, wait_until  # noqa: F401 (an autouse fixture)

# A reader that only ends by timing out waits LONG, longer than each test's bound.
LONG = 60.0



def seq_range(url: str, stream: str, start: int, end: int, *, subjects: Tuple[str, ...] = (),
              batch: int = 7, timeout: float = LONG) -> SeqRange:
    return SeqRange(stream, start, end, subjects, True, batch, timeout, ConnectionSettings(servers=(url,)))


def seqs(r: SeqRange) -> List[int]:
    return [m.metadata.sequence.stream for m in read_messages(r)]


@pytest.mark.timeout(90)
def test_reader_raises_instead_of_returning_short_when_server_stalls(private_server):
    with jss.connect(private_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="STALL", subjects=["stall.>"])
        publish(js, "stall.x", 200)
    r = seq_range(private_server.url, "STALL", 1, 201, batch=10, timeout=1.0)

    got: List[int] = []
    error: Optional[BaseException] = None
    try:
        for msg in read_messages(r):
            got.append(msg.metadata.sequence.stream)
            if len(got) == 50:
                private_server.pause()
    except jss.JetStreamError as exc:
        error = exc
    finally:
        private_server.resume()

    assert len(got) < 200, "the pause came too late to test anything"
    assert got == list(range(1, len(got) + 1))
    assert error is not None, f"returned {len(got)} of 200 rows without an error"
    assert isinstance(error, _read.PartitionIncompleteError), f"returned {len(got)} of 200 rows without an error: {error!r}"
    text = str(error)
    assert "STALL" in text and "[1, 201)" in text and str(got[-1]) in text

    # What Spark's task retry does: read the partition again, now complete. On a
    # fresh connection: a flush cancelled during the stall can leave the old one dead.
    wait_until(lambda: _answers(private_server.url), timeout=20)
    close_all()
    assert seqs(r) == list(range(1, 201))


def _answers(url: str) -> bool:
    try:
        with jss.connect(url) as nc:
            nc.jetstream().stream_info("STALL")
        return True
    except jss.JetStreamError:
        return False


@pytest.mark.timeout(30)
def test_reader_raises_when_server_answers_but_delivers_nothing(server, nc, js, stream_name):
    p = stream_name.lower()
    js.create_stream(name=stream_name, subjects=[f"{p}.>"])
    publish(js, f"{p}.x", 100)
    r = seq_range(server.url, stream_name, 1, 101, batch=5, timeout=1.0)

    got: List[int] = []
    with pytest.raises(jss.JetStreamError) as caught:
        for msg in read_messages(r):
            got.append(msg.metadata.sequence.stream)
            if len(got) == 10:  # the server keeps the reader's consumer but stops delivering
                until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5)
                body = json.dumps({"pause_until": until.isoformat().replace("+00:00", "Z")}).encode()
                (name,) = js.consumer_names(stream_name)
                reply = json.loads(nc.request(f"$JS.API.CONSUMER.PAUSE.{stream_name}.{name}", body, timeout=5).data)
                assert reply.get("paused"), reply
    assert 10 <= len(got) < 100 and got == list(range(1, len(got) + 1))
    assert isinstance(caught.value, _read.PartitionIncompleteError)
    assert f"after sequence {got[-1]}" in str(caught.value) and "pending" in str(caught.value)


@pytest.mark.timeout(30)
def test_filtered_range_whose_last_sequence_does_not_match_ends_cleanly(server, js, stream_name):
    p = stream_name.lower()
    js.create_stream(name=stream_name, subjects=[f"{p}.>"])
    for i in range(1, 41):  # odd sequences on .a, even on .b
        js.publish(f"{p}.{'a' if i % 2 else 'b'}", b"%d" % i)

    # The range ends on a .b sequence, with .a messages after it in the stream.
    assert seqs(seq_range(server.url, stream_name, 5, 21, subjects=(f"{p}.a",))) == list(range(5, 21, 2))
    # ... and at the end of the stream: nothing on .a follows.
    assert seqs(seq_range(server.url, stream_name, 21, 41, subjects=(f"{p}.a",))) == list(range(21, 41, 2))
    # Two filters, and a range with no match at all.
    both = seq_range(server.url, stream_name, 1, 41, subjects=(f"{p}.a", f"{p}.b"))
    assert seqs(both) == list(range(1, 41))
    assert seqs(seq_range(server.url, stream_name, 1, 41, subjects=(f"{p}.c",))) == []


@pytest.mark.timeout(30)
def test_range_with_deleted_sequences_ends_cleanly(server, js, stream_name):
    p = stream_name.lower()
    stream = js.create_stream(name=stream_name, subjects=[f"{p}.>"])
    publish(js, f"{p}.x", 60)
    deleted = {10, 11, 12, 20, 29, 30, 51, 59, 60}
    for seq in sorted(deleted):
        stream.delete_msg(seq)

    def expected(a: int, b: int) -> List[int]:
        return [s for s in range(a, b) if s not in deleted]

    # First and last sequences of the range deleted, messages after it.
    assert seqs(seq_range(server.url, stream_name, 10, 31)) == expected(10, 31)
    # Last sequences of the stream deleted.
    assert seqs(seq_range(server.url, stream_name, 50, 61)) == expected(50, 61)
    # Nothing left in the range at all.
    assert seqs(seq_range(server.url, stream_name, 10, 13)) == []
    assert seqs(seq_range(server.url, stream_name, 59, 61)) == []


@pytest.mark.timeout(30)
def test_range_deleted_while_it_is_read_ends_cleanly(server, js, stream_name):
    p = stream_name.lower()
    stream = js.create_stream(name=stream_name, subjects=[f"{p}.>"])
    publish(js, f"{p}.x", 30)
    r = seq_range(server.url, stream_name, 1, 31, batch=1, timeout=1.0)
    it = read_messages(r)
    got = [next(it).metadata.sequence.stream]  # its pending count says 29 more are coming
    for seq in range(2, 31):
        stream.delete_msg(seq)
    got += [m.metadata.sequence.stream for m in it]
    # The server may have sent 2 (or a little more) before the deletes.
    assert got == list(range(1, len(got) + 1)) and len(got) <= 5


@pytest.mark.timeout(60)
def test_complete_range_returns_every_sequence_once(server, js, stream_name):
    p = stream_name.lower()
    js.create_stream(name=stream_name, subjects=[f"{p}.>"])
    publish(js, f"{p}.x", 500)

    assert seqs(seq_range(server.url, stream_name, 1, 501)) == list(range(1, 501))
    # A middle partition, messages on both sides of it.
    assert seqs(seq_range(server.url, stream_name, 123, 377, batch=1000)) == list(range(123, 377))
    # Partitions side by side cover every sequence once.
    edges = [1, 2, 100, 101, 333, 501]
    parts = [seqs(seq_range(server.url, stream_name, a, b, batch=50)) for a, b in zip(edges, edges[1:])]
    assert [s for part in parts for s in part] == list(range(1, 501))
    # A range reaching past the stream's end ends with the stream.
    assert seqs(seq_range(server.url, stream_name, 490, 600)) == list(range(490, 501))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("accelerator", ["c", "python"])
def test_record_batches_end_at_their_payload_bound(server, js, stream_name, monkeypatch, accelerator):
    # Arrow's binary columns hold 2 GiB at most: a batch ends once its payloads
    # reach ARROW_BYTES (here 1 KiB), at the end of the pulled group it is in.
    pa = pytest.importorskip("pyarrow")
    from jetstream_sync.spark.datasource import _arrow_schema

    if accelerator == "python":
        monkeypatch.setattr(_read, "load_speedups", lambda: None)
    elif _read.load_speedups() is None:
        pytest.skip("the C accelerator is not built here")
    js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
    for i in range(100):
        js.publish(f"{stream_name}.{i % 3}", bytes([i]) * 100, headers={"I": str(i)})
    monkeypatch.setattr(_read, "ARROW_BYTES", 1024)
    batches = list(_read.read_range_arrow(seq_range(server.url, stream_name, 1, 101, batch=4), _arrow_schema()))
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    assert max(sum(len(d) for d in b.column("data").to_pylist()) for b in batches) < 1024 + 4 * 100
    rows = [row for b in batches for row in b.to_pylist()]
    assert [r["seq"] for r in rows] == list(range(1, 101))
    assert [r["data"] for r in rows] == [bytes([i]) * 100 for i in range(100)]
    assert [r["headers"] for r in rows] == [[("I", str(i))] for i in range(100)]
    assert [r["subject"] for r in rows] == [f"{stream_name}.{i % 3}" for i in range(100)]
