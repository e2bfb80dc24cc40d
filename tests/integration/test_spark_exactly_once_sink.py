"""The exactly-once sink's partition writer (``publish_exactly_once``) without
Spark: however late, however often, and however concurrently a partition is
written again with the same rows, each row is stored once."""

from __future__ import annotations

import concurrent.futures
import signal
import subprocess
import sys
import textwrap
from typing import Iterator, List

import pytest

import jetstream_sync as jss
from jetstream_sync.spark._write import CHUNK_ROWS, Progress, progress_stream, publish_exactly_once

from ..helpers import spark_clients_closed_after  # noqa: F401 (an autouse fixture)

MARKER = "prog.w1.0"



@pytest.fixture
def sink(js):
    # No message ids: a replay is recognised by the progress marker alone, however late.
    return js.create_stream(name="SINK", subjects=["out.>", "prog.>"], allow_atomic=True)


def rows(n: int, start: int = 0) -> List[tuple]:
    return [(f"out.{i % 3}", f"row-{i}".encode(), {"I": str(i)}, None) for i in range(start, start + n)]


def stored_rows(js) -> List[bytes]:
    info = js.stream_info("SINK", subjects_filter="out.>")
    total = sum(info.state.subjects.values())
    oc = js.ordered_consumer("SINK", filter_subjects=["out.>"])
    with oc.messages() as it:
        return [it.next(timeout=10).data for _ in range(total)]


def test_a_partition_written_again_adds_nothing(server, nc, js, sink):
    n = 2 * CHUNK_ROWS + 500  # three chunks, the last one short
    first = publish_exactly_once(iter(rows(n)), nc, MARKER, 0, timeout=10)
    assert (first.published, first.duplicates) == (n, 0)
    again = publish_exactly_once(iter(rows(n)), nc, MARKER, 0, timeout=10)
    assert (again.published, again.duplicates) == (0, n)
    assert stored_rows(js) == [f"row-{i}".encode() for i in range(n)]
    assert Progress.read(js, "SINK", MARKER).done


def test_a_run_cut_short_is_completed_by_the_next(server, nc, js, sink):
    n = 3 * CHUNK_ROWS

    def failing() -> Iterator[tuple]:
        yield from rows(2 * CHUNK_ROWS + 10)  # a chunk goes once the rows after it are read
        raise RuntimeError("task killed")

    with pytest.raises(RuntimeError):
        publish_exactly_once(failing(), nc, MARKER, 0, timeout=10)
    assert len(stored_rows(js)) == CHUNK_ROWS  # the first chunk; the second never went
    again = publish_exactly_once(iter(rows(n)), nc, MARKER, 0, timeout=10)
    assert (again.published, again.duplicates) == (n - CHUNK_ROWS, CHUNK_ROWS)
    assert stored_rows(js) == [f"row-{i}".encode() for i in range(n)]


def test_later_batches_and_replays_of_earlier_ones(server, nc, js, sink):
    publish_exactly_once(iter(rows(100)), nc, MARKER, 0, timeout=10)
    publish_exactly_once(iter(rows(100, start=100)), nc, MARKER, 1, timeout=10)
    assert publish_exactly_once(iter(rows(100)), nc, MARKER, 0, timeout=10).published == 0  # batch 0 again
    assert publish_exactly_once(iter(rows(100, start=200)), nc, MARKER, 2, timeout=10).published == 100
    assert stored_rows(js) == [f"row-{i}".encode() for i in range(300)]


def test_two_runs_at_once_store_each_row_once(server, js, sink):
    """Speculative execution: two attempts of one task write at the same time."""
    n = 6 * CHUNK_ROWS
    clients = [jss.connect(server.url) for _ in range(2)]
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            runs = pool.map(lambda c: publish_exactly_once(iter(rows(n)), c, MARKER, 3, timeout=10), clients, timeout=60)
            results = list(runs)
    finally:
        for c in clients:
            c.close()
    assert sum(r.published for r in results) == n
    assert sorted(stored_rows(js)) == sorted(f"row-{i}".encode() for i in range(n))


@pytest.mark.timeout(60)
def test_a_writer_killed_between_a_chunks_messages_and_its_commit_leaves_none_of_them(server, js, sink):
    """The process dies after sending a chunk's rows and before the marker that
    commits them: none of those rows is ever stored (the server drops the
    batch), and the next run stores each row once."""
    child = textwrap.dedent(
        f"""
        import os, signal
        import jetstream_sync as jss
        from jetstream_sync.spark import _write

        def die_before_commit(self, items, **kw):
            items = list(items)
            if len(items) < {CHUNK_ROWS + 1}:  # the short last chunk: never reached
                raise AssertionError("expected a full chunk")
            if getattr(die_before_commit, "committed", False):
                nc = self.client
                for seq, (subject, data, *hdrs) in enumerate(items[:-1], 1):
                    headers = dict(hdrs[0] if hdrs else {{}})
                    headers.update({{"Nats-Batch-Id": "killed", "Nats-Batch-Sequence": str(seq)}})
                    nc.publish(subject, data, headers=headers)
                nc.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            die_before_commit.committed = True
            return real(self, items, **kw)

        real = jss.JetStream.publish_batch
        jss.JetStream.publish_batch = die_before_commit
        rows = [("out.%d" % (i % 3), b"row-%d" % i, {{"I": str(i)}}, None) for i in range({3 * CHUNK_ROWS})]
        _write.publish_exactly_once(iter(rows), jss.connect({server.url!r}), {MARKER!r}, 0, timeout=10)
        """
    )
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, timeout=45)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert len(stored_rows(js)) == CHUNK_ROWS  # the first chunk only
    nc = jss.connect(server.url)
    try:
        again = publish_exactly_once(iter(rows(3 * CHUNK_ROWS)), nc, MARKER, 0, timeout=10)
    finally:
        nc.close()
    assert again.published == 2 * CHUNK_ROWS
    assert stored_rows(js) == [f"row-{i}".encode() for i in range(3 * CHUNK_ROWS)]


def test_setups_that_cannot_be_exactly_once_are_refused_before_anything_is_sent(server, nc, js):
    js.create_stream(name="PLAIN", subjects=["plain.>"])
    with pytest.raises(jss.InvalidOptionError, match="no stream stores the progress subject"):
        publish_exactly_once(iter(rows(1)), nc, "nowhere.w.0", 0, timeout=5)
    with pytest.raises(jss.InvalidOptionError, match="allow_atomic=True"):
        publish_exactly_once(iter(rows(1)), nc, "plain.w.0", 0, timeout=5)
    js.create_stream(name="ATOMIC", subjects=["atomic.>"], allow_atomic=True)
    js.publish("atomic.p.w.0", b"not a marker")
    with pytest.raises(jss.InvalidOptionError, match="not a progress marker"):
        publish_exactly_once(iter([("atomic.x", b"x", None, None)]), nc, "atomic.p.w.0", 0, timeout=5)
    assert js.stream_info("PLAIN").state.messages == 0
    assert js.stream_info("ATOMIC").state.messages == 1


def test_the_drivers_check_refuses_markers_split_over_streams(server, js):
    # The driver checks every partition's marker at once (a wildcard) and hands
    # the stream to the tasks: partition 1's marker must not be elsewhere.
    js.create_stream(name="P0", subjects=["pp.w.0"], allow_atomic=True)
    js.create_stream(name="P1", subjects=["pp.w.1"], allow_atomic=True)
    with pytest.raises(jss.InvalidOptionError, match="is in 2 streams"):
        progress_stream(js, "pp.>")
    js.create_stream(name="ONE", subjects=["one.>"], allow_atomic=True)
    assert progress_stream(js, "one.>") == "ONE"
