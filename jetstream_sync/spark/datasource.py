"""The ``jetstream`` Python data source: batch and streaming reads, batch and
streaming writes.

What runs where (pyspark 4.2+): ``partitions()``, offsets and ``commit()`` run
in Python processes on the driver; ``read()`` and ``write()`` run on
executors, on freshly unpickled objects. So nothing here holds a client: every
method gets this process's shared client from the connection options.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..errors import InvalidOptionError
from ..options.spark import ReadOptions, WriteOptions, check_names
from ._clients import shared_client
from ._consume import DEFAULT_BATCH, ConsumerModeError, PulledBatch, Rows, ack, ensure_consumer, pull, rows_arrow
from ._read import SeqRange, bounds, check_loss, read_range_arrow, resolve, seq_at_time, split
from ._write import PublishCounts, batch_fields, progress_stream, publish_exactly_once, publish_rows, row_fields
from .._core.logfields import log_fields

__all__ = ["JetStreamDataSource", "SCHEMA"]

_log = logging.getLogger(__name__)

def _arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("stream", pa.string(), False),
            pa.field("subject", pa.string(), False),
            pa.field("seq", pa.int64(), False),
            pa.field("data", pa.binary(), True),
            pa.field("headers", pa.map_(pa.string(), pa.string()), True),
            pa.field("timestamp", pa.timestamp("us", tz="UTC"), False),
        ]
    )


def _read(partition: InputPartition) -> Iterator[Any]:
    # Arrow batches: pyspark takes them as they are, instead of converting tuples.
    return read_range_arrow(partition.range, _arrow_schema())  # type: ignore[attr-defined]


SCHEMA = StructType(
    [
        StructField("stream", StringType(), False),
        StructField("subject", StringType(), False),
        StructField("seq", LongType(), False),
        StructField("data", BinaryType(), True),
        StructField("headers", MapType(StringType(), StringType()), True),
        StructField("timestamp", TimestampType(), False),
    ]
)


class JetStreamDataSource(DataSource):
    """``spark.read.format("jetstream")`` and friends; see docs/guides/pyspark.md.

    Options are checked at the first call Spark makes, when it builds this
    object at ``load()``/``save()``/``start()`` (their names, as far as they
    tell what they are for); then ``schema()`` at ``load()`` (either kind of
    read), ``writer()`` at ``save()``, ``reader()``/``streamReader()``/
    ``streamWriter()`` when the query is planned, each for its own role. A
    bad option fails with an ``InvalidOptionError`` whose message Spark shows
    in its ``AnalysisException``.
    """

    def __init__(self, options: Dict[str, str]) -> None:
        check_names(options)  # the only call Spark makes at writeStream.start()
        super().__init__(options)

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self) -> StructType:
        ReadOptions.parse(self.options, streaming=None)  # at load(): Spark asks only readers for a schema
        return SCHEMA

    def reader(self, schema: StructType) -> "BatchReader":
        return BatchReader(ReadOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> "DataSourceStreamReader":
        opts = ReadOptions.parse(self.options, streaming=True)
        return ConsumerStreamReader(opts) if opts.consumer else StreamReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> "BatchWriter":
        opts = WriteOptions.parse(self.options, streaming=False)
        _append_only(overwrite, 'mode("overwrite")', 'mode("append")')
        return BatchWriter(opts, schema.fieldNames())

    def streamWriter(self, schema: StructType, overwrite: bool) -> "StreamWriter":
        opts = WriteOptions.parse(self.options, streaming=True)
        _append_only(overwrite, 'outputMode("complete")', 'outputMode("append")')
        return StreamWriter(opts, schema.fieldNames())


def _append_only(overwrite: bool, asked: str, instead: str) -> None:
    # A stream cannot be replaced by a write: appending instead would be a silent surprise.
    if overwrite:
        raise InvalidOptionError(
            f"the jetstream sink is append-only, {asked} is not supported: use {instead} "
            "(purge the stream first, js.purge_stream(name), to replace its contents)"
        )


@dataclass
class RangePartition(InputPartition):
    """A picklable stream-sequence range for one task."""

    range: SeqRange


def _partitions(ranges: List[SeqRange]) -> Sequence[InputPartition]:
    return [RangePartition(r) for r in ranges]


class BatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts
        js = shared_client(opts.connection).jetstream()
        start = seq_at_time(js, opts) if opts.starting_time else resolve(js, opts, opts.starting)
        end = resolve(js, opts, opts.ending)
        if start < end:
            start = check_loss(js, opts, start)
        return _partitions(split(opts, start, max(start, end)))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"stream": S, "seq": next}``: the next sequence to read
    (an exclusive end, as Kafka's). Nothing is acked: the offsets in Spark's
    checkpoint are the only progress there is, so a restart resumes exactly."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._target: Optional[int] = None  # availableNow: do not read past this

    def _js(self) -> Any:
        return shared_client(self.opts.connection).jetstream()

    def _offset(self, seq: int) -> Dict[str, Any]:
        return {"stream": self.opts.stream, "seq": seq}

    def initialOffset(self) -> Dict[str, Any]:
        js = self._js()
        opts = self.opts
        seq = seq_at_time(js, opts) if opts.starting_time else resolve(js, opts, opts.starting)
        return self._offset(seq)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = bounds(self._js(), self.opts.stream)[1]

    def latestOffset(self, start: Dict[str, Any], limit: ReadLimit) -> Dict[str, Any]:
        begin = int(start["seq"])
        end = bounds(self._js(), self.opts.stream)[1]
        if self._target is not None:
            end = min(end, self._target)
        if isinstance(limit, ReadMaxRows):
            end = min(end, begin + limit.max_rows)  # counted in sequences: an upper bound on rows
        return self._offset(max(begin, end))

    def reportLatestOffset(self) -> Optional[Dict[str, Any]]:
        return self._offset(bounds(self._js(), self.opts.stream)[1])

    def partitions(self, start: Dict[str, Any], end: Dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = int(start["seq"]), int(end["seq"])
        if begin < stop:
            begin = check_loss(self._js(), self.opts, begin)
        return _partitions(split(self.opts, begin, max(begin, stop)))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(partition)

    def commit(self, end: Dict[str, Any]) -> None:
        """Nothing to do: Spark's checkpoint holds the progress (and this call
        lags a batch behind, so acking here would be unsafe anyway)."""

    def stop(self) -> None:
        """Nothing to release: the shared client belongs to the process."""


@dataclass
class RowsPartition(InputPartition):
    """Consumer mode: the rows of one partition of a micro-batch, pulled by the driver."""

    rows: Rows


class ConsumerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Consumer mode (``.option("consumer", name)``): each micro-batch is
    pulled on the driver through the durable pull consumer, travels to the
    executors in its partitions, and is acked once Spark has committed it.

    Offsets are ``{"stream": S, "consumer": C, "delivered": N}``: the
    consumer's delivery sequence of the batch's last message (monotonic,
    redeliveries included). The acks: Spark calls ``latestOffset(start)``
    only after every batch up to ``start`` is written and in its commit log,
    and ``commit(end)`` later still; each acks the batches this process
    pulled that end at or before that offset. Nothing is acked otherwise: a
    batch that fails, or a query stopped before its commit, is redelivered by
    the server after the consumer's AckWait (at-least-once; the ``seq``
    column is the dedup key of an idempotent sink).
    """

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._cons: Optional[Any] = None
        self._batches: Dict[int, PulledBatch] = {}  # by end offset: pulled, not yet acked
        self._unplanned: Optional["tuple[int, PulledBatch]"] = None  # (start, batch) from latestOffset
        self._left: Optional[int] = None  # availableNow: messages still to pull

    def _consumer(self) -> Any:
        if self._cons is None:
            self._cons = ensure_consumer(self.opts)
        return self._cons

    def _offset(self, delivered: int) -> Dict[str, Any]:
        return {"stream": self.opts.stream, "consumer": self.opts.consumer, "delivered": delivered}

    def _delivered(self, offset: Dict[str, Any]) -> int:
        if offset.get("consumer") != self.opts.consumer or "delivered" not in offset:
            raise ConsumerModeError(
                f"the checkpoint's offset {offset} is not of consumer {self.opts.consumer!r}: "
                "a checkpoint belongs to one mode and one consumer; start the query with a new checkpointLocation"
            )
        return int(offset["delivered"])

    def initialOffset(self) -> Dict[str, Any]:
        info = self._consumer().info()
        return self._offset(info.delivered.consumer_seq if info.delivered else 0)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        info = self._consumer().info()
        self._left = info.num_pending + info.num_ack_pending  # what is there now, redeliveries included

    def _limit(self, limit: Optional[ReadLimit]) -> int:
        n = limit.max_rows if isinstance(limit, ReadMaxRows) else (self.opts.max_offsets_per_trigger or DEFAULT_BATCH)
        return min(n, self._left) if self._left is not None else n

    def _pull(self, after: int, limit: Optional[ReadLimit]) -> Optional[PulledBatch]:
        n = self._limit(limit)
        batch = pull(self._consumer(), self.opts, n, after) if n > 0 else None
        if batch is not None and self._left is not None:
            self._left -= len(batch.replies)
        return batch

    def latestOffset(self, start: Dict[str, Any], limit: ReadLimit) -> Dict[str, Any]:
        begin = self._delivered(start)
        self._ack_through(begin, "batches written")  # everything up to start is in Spark's commit log
        if self._unplanned is not None and self._unplanned[0] == begin:
            return self._offset(self._unplanned[1].end)
        batch = self._pull(begin, limit)
        if batch is None:
            return self._offset(begin)
        self._unplanned = (begin, batch)
        return self._offset(batch.end)

    def partitions(self, start: Dict[str, Any], end: Dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = self._delivered(start), self._delivered(end)
        if self._unplanned is not None and self._unplanned[1].end == stop:
            batch: Optional[PulledBatch] = self._unplanned[1]
            self._unplanned = None
        elif stop in self._batches:
            batch = self._batches[stop]  # planned again: the same rows
        else:
            # A batch from the offset log that this process did not pull (a
            # restart replays the last uncommitted one): its messages come back
            # after AckWait; pull what is there now, as many as it had at most.
            batch = self._pull(begin, ReadMaxRows(max(stop - begin, 0)))
        if batch is None:
            return [RowsPartition(Rows(self.opts.stream))]
        self._batches[stop] = batch
        return [RowsPartition(rows) for rows in batch.rows]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return rows_arrow(partition.rows, _arrow_schema())  # type: ignore[attr-defined]

    def commit(self, end: Dict[str, Any]) -> None:
        """Ack the messages of every batch up to ``end``: Spark has committed them."""
        self._ack_through(self._delivered(end), "batches committed")

    def _ack_through(self, delivered: int, what: str) -> None:
        done = sorted(k for k in self._batches if k <= delivered)
        if not done:
            return
        replies = [r for k in done for r in self._batches.pop(k).replies]
        ack(shared_client(self.opts.connection), replies, f"{what} through delivery {delivered}")

    def stop(self) -> None:
        """Nothing acked: batches not committed come back after the consumer's AckWait."""


@dataclass
class PublishedCommit(WriterCommitMessage):
    partition: int
    published: int
    duplicates: int


def _task() -> "tuple[int, Optional[str], Optional[str]]":
    ctx = TaskContext.get()
    if ctx is None:  # pragma: no cover - write() always runs in a task
        return 0, None, None
    return ctx.partitionId(), ctx.getLocalProperty("streaming.sql.batchId"), ctx.getLocalProperty("sql.streaming.queryId")


class _Writer:
    def __init__(self, opts: WriteOptions, columns: List[str]) -> None:
        self.opts = opts
        self.columns = columns
        row_fields(columns, opts.subject)  # fail on missing columns before any task runs
        # Spark asks for the writer in a Python worker of its own, where no span of the
        # application is current: the trace comes in the options (see trace_options()).
        self.trace = opts.trace
        # exactlyOnce: the stream is there and takes atomic batches; checked
        # once, here, before any task runs, and handed to every task
        self.stream = None if opts.progress_subject is None else progress_stream(
            shared_client(opts.connection).jetstream(), f"{opts.progress_subject}.>")

    def _write(self, batches: Iterator[Any], msg_ids: Optional[str], once: Optional[Tuple[str, int]] = None) -> PublishedCommit:
        """Publish a task's rows, each with a Nats-Msg-Id ``<msg_ids>:<partition>:<row>``
        if ``msg_ids``; ``once``: (write id, batch), exactlyOnce, in atomic
        chunks behind this partition's progress marker."""
        # Arrow writers: Spark hands over RecordBatches, whose columns become
        # lists in C, instead of building a Row object per row.
        partition = _task()[0]
        client = shared_client(self.opts.connection)
        rows = batch_fields(batches, self.opts.subject)
        if once is not None:
            marker = f"{self.opts.progress_subject}.{once[0]}.{partition}"
            counts = publish_exactly_once(rows, client, marker, once[1], self.opts.timeout, self.trace, self.stream)
        else:
            msg_id = (lambda i: f"{msg_ids}:{partition}:{i}") if msg_ids else None
            counts = publish_rows(rows, None, client, self.opts.timeout, msg_id, self.trace)
        return PublishedCommit(partition, counts.published, counts.duplicates)

    @staticmethod
    def _report(messages: List[Optional[WriterCommitMessage]], what: str) -> PublishCounts:
        total = PublishCounts()
        for m in messages:
            if isinstance(m, PublishedCommit):
                total.add(PublishCounts(m.published, m.duplicates))
        _log.info("%s: %d published, %d duplicates dropped by the stream", what, total.published, total.duplicates,
                  extra=log_fields())
        return total


class BatchWriter(_Writer, DataSourceArrowWriter):
    """``df.write.format("jetstream")``: a ``msg_id`` column (or the
    ``msgIdPrefix`` option, if partition contents are deterministic) makes a
    re-run add nothing within the stream's duplicate window."""

    def write(self, iterator: Iterator[Any]) -> PublishedCommit:
        if self.opts.write_id is not None:  # exactlyOnce (parse() asks for a writeId there)
            return self._write(iterator, None, (self.opts.write_id, 0))
        prefix = self.opts.msg_id_prefix
        return self._write(iterator, f"{prefix}:batch" if prefix else None)

    def commit(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        self._report(messages, "write committed")

    def abort(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        self._report(messages, "write aborted (what was published stays published)")


class StreamWriter(_Writer, DataSourceStreamArrowWriter):
    """``writeStream.format("jetstream")``: without a ``msg_id`` column each row
    gets ``<query id or msgIdPrefix>:<batchId>:<partition>:<row>``, so a
    micro-batch Spark replays after a restart is dropped by the stream's
    duplicate window."""

    def write(self, iterator: Iterator[Any]) -> PublishedCommit:
        _, batch_id, query_id = _task()
        if self.opts.progress_subject is not None:
            # The query id is kept in the checkpoint: the same after a restart from it.
            write_id = self.opts.write_id or query_id
            if write_id is None or batch_id is None:  # pragma: no cover - Spark sets both in a streaming task
                raise RuntimeError("exactlyOnce: this streaming task has no query id or batch id from Spark")
            return self._write(iterator, None, (write_id, int(batch_id)))
        prefix = self.opts.msg_id_prefix or query_id or "jetstream"
        return self._write(iterator, f"{prefix}:{batch_id}")

    def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        self._report(messages, f"batch {batchId} committed")

    def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        self._report(messages, f"batch {batchId} aborted (what was published stays published)")
