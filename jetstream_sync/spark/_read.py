"""Reading stream-sequence ranges: options, offsets, partitioning, and the
executor side that turns a range into rows. No pyspark imports here."""

from __future__ import annotations

import bisect
import logging
import math
import operator
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import jetstream_sync as jss

from ..options.connection import ConnectionSettings
from ..options.spark import Offset, ReadOptions
from ._clients import shared_client
from .._core.logfields import log_fields
from .._core.wire import load_speedups

_log = logging.getLogger(__name__)

class DataLossError(jss.JetStreamError):
    """Messages the query still needed were removed from the stream (purge, limits)."""


def bounds(js: jss.JetStream, stream: str) -> Tuple[int, int]:
    """(first sequence still stored, next sequence to be written)."""
    state = js.stream_info(stream).state
    nxt = state.last_seq + 1
    return (state.first_seq if state.messages else nxt), nxt


def resolve(js: jss.JetStream, opts: ReadOptions, offset: Offset) -> int:
    """The sequence an offset option stands for, now."""
    if isinstance(offset, int):
        return offset
    first, nxt = bounds(js, opts.stream)
    return first if offset == "earliest" else nxt


def seq_at_time(js: jss.JetStream, opts: ReadOptions) -> int:
    """The first sequence stored at or after ``startingTime``."""
    cons = js.create_consumer(
        opts.stream, deliver_policy="by_start_time", opt_start_time=opts.starting_time, ack_policy="none",
        mem_storage=True, num_replicas=1, inactive_threshold=30.0,
    )
    try:
        msgs = list(cons.fetch_no_wait(1))
        return msgs[0].metadata.sequence.stream if msgs else bounds(js, opts.stream)[1]
    finally:
        _delete_quietly(cons)


def check_loss(js: jss.JetStream, opts: ReadOptions, start: int) -> int:
    """Where to start given what the stream still holds: raise DataLossError
    (failOnDataLoss) or skip ahead to the first stored message."""
    first, _ = bounds(js, opts.stream)
    if start >= first:
        return start
    if opts.fail_on_data_loss:
        raise DataLossError(
            f"stream {opts.stream!r} no longer holds sequences {start}..{first - 1} "
            "(purged or removed by its limits); set failOnDataLoss=false to skip them"
        )
    _log.warning("sequences %d..%d of %s are gone; skipping them", start, first - 1, opts.stream,
                 extra=log_fields(stream=opts.stream))
    return first


@dataclass(frozen=True)
class SeqRange:
    """One partition: stream sequences [start, end) to read on an executor."""

    stream: str
    start: int
    end: int
    subjects: Tuple[str, ...]
    include_headers: bool
    batch: int
    timeout: float
    connection: ConnectionSettings


def split(opts: ReadOptions, start: int, end: int) -> List[SeqRange]:
    """[start, end) in ``minPartitions`` (default: one per 100,000 sequences) even ranges."""
    total = max(end - start, 0)
    parts = opts.min_partitions or max(1, math.ceil(total / 100_000))
    parts = max(1, min(parts, total)) if total else 1
    step = total / parts
    edges = [start + round(i * step) for i in range(parts)] + [end if total else start]
    return [
        SeqRange(opts.stream, a, b, opts.subjects, opts.include_headers, opts.fetch_batch, opts.fetch_timeout, opts.connection)
        for a, b in zip(edges, edges[1:])
    ]


def read_messages(r: SeqRange) -> Iterator[jss.Msg]:
    """The stored messages of ``r``, one by one; see :func:`read_groups`."""
    for group in read_groups(r):
        yield from group


def read_groups(r: SeqRange) -> Iterator[List[jss.Msg]]:
    """The stored messages of ``r`` in order, in lists of up to ``r.batch``,
    read through an ephemeral pull consumer.

    Ends at the range's last sequence, at the first message past it, or when
    the server says nothing matching is left (with a subject filter the last
    sequence may never match; deleted sequences are skipped). Anything else,
    such as no message for ``fetchTimeout`` from a stalled server, raises
    :class:`PartitionIncompleteError`: a partition is never returned short.

    Only the last message of each list is looked at (one ack subject parsed
    per list, not per row): a list holds no more messages than the server
    said were pending after the previous one, nor more than sequences are
    left in the range, so taking it never waits for a message that is not
    coming, and it can only overrun the range when sequences are skipped
    (filters, deletes), which a binary search on the list then cuts off.
    """
    if r.start >= r.end:
        return
    config: Dict[str, Any] = dict(
        deliver_policy="by_start_sequence", opt_start_seq=r.start, ack_policy="none",
        mem_storage=True, num_replicas=1, inactive_threshold=60.0,
    )
    if len(r.subjects) == 1:
        config["filter_subject"] = r.subjects[0]
    elif r.subjects:
        config["filter_subjects"] = list(r.subjects)
    try:
        client = shared_client(r.connection)
        cons = client.jetstream().create_consumer(r.stream, **config)
    except jss.APIError:
        raise  # the server's answer (no such stream, bad filter …): a retry would not help
    except jss.JetStreamError as exc:
        raise _incomplete(r, None, f"could not create its consumer: {exc!r}") from exc
    try:
        pending = cons.cached_info.num_pending or 0  # matching messages from r.start on (the server always sends it)
        last = r.end - 1
        seq = r.start - 1  # of the last message taken
        batch = max(1, min(r.batch, r.end - r.start))
        timeout = float(r.timeout)
        msg: Optional[jss.Msg] = None  # the last message taken
        idle_after: Any = _NOTHING  # the last message before the previous timeout
        with cons.messages(max_messages=batch) as it:
            take = it.next
            while True:
                want = min(batch, pending, last - seq)
                if want <= 0:
                    return
                group: List[jss.Msg] = []
                add = group.append
                timed_out = False
                try:
                    for _ in range(want):
                        add(take(timeout))
                except jss.TimeoutError:
                    timed_out = True
                except jss.JetStreamError as exc:
                    yield group  # what arrived is complete; the error says where it stopped
                    raise _incomplete(r, group[-1] if group else msg, repr(exc)) from exc
                if group:
                    msg = group[-1]
                    seq, pending, _ = ack_numbers(msg.reply)
                    if seq > last:  # past the range: sequences were skipped
                        del group[bisect.bisect_right(group, last, key=_stream_seq):]
                        yield group
                        return
                    yield group
                    if seq == last or pending == 0:
                        return
                if timed_out:
                    if _nothing_left(cons, r, msg, second=idle_after is msg):
                        return
                    idle_after = msg
    finally:
        # Briefly: a stalled server should not hold up the task's failure.
        _delete_quietly(cons, client.jetstream(timeout=2.0))


def _stream_seq(msg: jss.Msg) -> int:
    return ack_numbers(msg.reply)[0]


class PartitionIncompleteError(jss.JetStreamError):
    """A partition could not be read to the end of its range (server stalled
    or unreachable, consumer lost). Retryable: Spark's task retry re-reads it."""


_NOTHING = object()


def _incomplete(r: SeqRange, msg: Optional[jss.Msg], why: str) -> PartitionIncompleteError:
    where = f"after sequence {msg.metadata.sequence.stream}" if msg is not None else "before its first message"
    return PartitionIncompleteError(
        f"stream {r.stream!r} range [{r.start}, {r.end}) stopped {where}: {why}"
    )


def _nothing_left(cons: jss.BaseConsumer, r: SeqRange, msg: Optional[jss.Msg], second: bool) -> bool:
    """After ``fetchTimeout`` without a message: True when the server says no
    matching message is left and none is on its way; otherwise raise, or
    (first time, server answering) False to wait once more."""
    try:
        info = cons.info()
    except jss.JetStreamError as exc:
        raise _incomplete(r, msg, f"no message for {r.timeout}s and no consumer info: {exc!r}") from exc
    # ack_policy none: no redeliveries, so consumer sequences count deliveries.
    received = msg.metadata.sequence.consumer if msg is not None else 0
    in_flight = (info.delivered.consumer_seq if info.delivered else 0) - received
    if not info.num_pending and in_flight <= 0:
        return True
    if second:
        raise _incomplete(
            r, msg, f"no message for {r.timeout}s twice; the server reports {info.num_pending} "
            f"pending and {in_flight} sent but not received",
        )
    _log.warning("no message for %gs reading %s [%d, %d); waiting once more", r.timeout, r.stream, r.start, r.end,
                 extra=log_fields(stream=r.stream))
    return False


def ack_numbers(reply: str) -> Tuple[int, int, int]:
    """(stream sequence, pending, timestamp ns) from a ``$JS.ACK`` subject, without
    building a Metadata object (hot path: one call per row)."""
    t = reply.split(".")
    if len(t) == 9:
        return int(t[5]), int(t[8]), int(t[7])
    return int(t[7]), int(t[10]), int(t[9])


# A RecordBatch ends at this many rows or once its payloads reach ARROW_BYTES
# (Arrow's binary and string columns address at most 2 GiB each).
ARROW_BATCH = 10_000
ARROW_BYTES = 64 << 20
_DATA = operator.attrgetter("data")


def read_range_arrow(r: SeqRange, schema: Any) -> Iterator[Any]:
    """``r`` as pyarrow RecordBatches (``schema``: the data source's) of up to
    ARROW_BATCH rows or ARROW_BYTES of payload."""
    msgs: List[jss.Msg] = []
    size = 0
    for group in read_groups(r):
        msgs += group
        size += sum(map(len, map(_DATA, group)))  # a group (up to fetchBatch messages) is the unit
        if len(msgs) >= ARROW_BATCH or size >= ARROW_BYTES:
            yield arrow_batch(msgs, r.stream, r.include_headers, schema)
            msgs, size = [], 0
    if msgs:
        yield arrow_batch(msgs, r.stream, r.include_headers, schema)


def arrow_batch(msgs: List[jss.Msg], stream: str, include_headers: bool, schema: Any) -> Any:
    """The rows of pulled messages ``msgs`` (not empty) as one RecordBatch.

    With the C accelerator the columns' buffers are filled in C from the
    messages' bytes and wrapped by pyarrow as they are; where it declines (a
    message it does not read exactly as Python would) or is not built, the
    Python path makes the same rows."""
    import pyarrow as pa

    speedups = load_speedups()
    cols = speedups.arrow_rows(msgs, include_headers, stream.encode()) if speedups is not None else None
    if cols is None:
        return _arrow_batch_py(msgs, stream, include_headers, schema)
    n = len(msgs)
    *buffers, h_nulls = cols
    (stream_off, streams, subj_off, subj, seq, data_off, data, micros, h_valid, h_off, key_off, keys, val_off,
     vals) = map(pa.py_buffer, buffers)
    headers_type = schema.field("headers").type
    if include_headers and h_nulls < n:
        nkeys = len(key_off) // 4 - 1
        entries = pa.StructArray.from_arrays(
            [pa.Array.from_buffers(pa.string(), nkeys, [None, key_off, keys]),
             pa.Array.from_buffers(pa.string(), nkeys, [None, val_off, vals])],
            fields=[headers_type.key_field, headers_type.item_field],
        )
        headers = pa.Array.from_buffers(headers_type, n, [h_valid, h_off], null_count=h_nulls, children=[entries])
    else:
        headers = pa.nulls(n, headers_type)
    arrays = [
        pa.Array.from_buffers(pa.string(), n, [None, stream_off, streams]),
        pa.Array.from_buffers(pa.string(), n, [None, subj_off, subj]),
        pa.Array.from_buffers(pa.int64(), n, [None, seq]),
        pa.Array.from_buffers(pa.binary(), n, [None, data_off, data]),
        headers,
        pa.Array.from_buffers(schema.field("timestamp").type, n, [None, micros]),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _arrow_batch_py(msgs: List[jss.Msg], stream: str, include_headers: bool, schema: Any) -> Any:
    """arrow_batch() without the accelerator: each column converted in C from
    a list (the stream sequence and timestamp are cut out of the ack subjects
    by Arrow's string kernels, not by Python per row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(msgs)
    headers_type = schema.field("headers").type
    replies = pa.array([m.reply for m in msgs], pa.string())
    # v1 $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>; v2 has
    # <domain>.<hash> after ACK and a token at the end: count from the end.
    at = 2 if msgs[0].reply.count(".") == 8 else 1
    tail = pc.split_pattern(replies, ".", max_splits=5, reverse=True)
    seqs = pc.list_element(tail, at).cast(pa.int64())
    nanos = pc.list_element(tail, at + 2).cast(pa.int64())
    hdrs = [m.headers for m in msgs] if include_headers else None
    arrays = [
        pa.array([stream] * n, pa.string()),
        pa.array([m.subject for m in msgs], pa.string()),
        seqs,
        pa.array([m.data for m in msgs], pa.binary()),
        pa.array([list(h.items()) if h else None for h in hdrs], headers_type) if hdrs and any(hdrs)
        else pa.nulls(n, headers_type),
        pc.divide(nanos, 1000).cast(schema.field("timestamp").type),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _delete_quietly(cons: jss.BaseConsumer, js: Optional[jss.JetStream] = None) -> None:
    try:
        if js is None:
            cons.delete()
        else:
            js.delete_consumer(cons.stream_name, cons.name)
    except jss.JetStreamError as exc:  # inactive_threshold removes it anyway
        _log.debug("could not delete consumer %s: %r", cons.name, exc,
                   extra=log_fields(stream=cons.stream_name, consumer=cons.name))
