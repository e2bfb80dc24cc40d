"""Publishing rows: pipelined publish_async with every PubAck checked before
the task ends. Used by the data source writers and by publish_partition()."""

from __future__ import annotations

import collections
import itertools
import json
import logging
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import jetstream_sync as jss

from ..options import duration, subject as check_subject
from ..options.connection import connection_settings
from ..options.spark import trace_context
from ._clients import Connection, shared_client
from .._core import otel
from .._core.logfields import log_fields

_log = logging.getLogger(__name__)

# Resolve the oldest future once this many are outstanding: bounded memory,
# and by then it has almost always been acknowledged.
_CHECK_AFTER = 8000


@dataclass
class PublishCounts:
    published: int = 0  # stored by the stream
    duplicates: int = 0  # dropped by its duplicate window (same Nats-Msg-Id)

    def add(self, other: "PublishCounts") -> None:
        self.published += other.published
        self.duplicates += other.duplicates


Fields = Callable[[Any], Tuple[str, Any, Optional[Dict[str, str]], Optional[str]]]


def row_fields(
    columns: Iterable[str], subject: Optional[str], subject_col: str = "subject", data_col: str = "data",
    headers_col: str = "headers", msg_id_col: str = "msg_id",
) -> Fields:
    """A function row -> (subject, data, headers, msg_id) for rows with these
    columns in this order (pyspark Rows, or mappings)."""
    names = list(columns)
    if data_col not in names:
        raise jss.InvalidOptionError(f"rows to publish need a {data_col!r} column")
    if subject is None and subject_col not in names:
        raise jss.InvalidOptionError(f"give the 'subject' option or a {subject_col!r} column")
    at = {name: i for i, name in enumerate(names)}
    # A Row is a tuple: tuple.__getitem__ by position skips Row.__getitem__,
    # which looks each name up in a list (once per row and column).
    get = tuple.__getitem__
    i_subject, i_data = at.get(subject_col), at[data_col]
    i_headers, i_id = at.get(headers_col), at.get(msg_id_col)

    def fields(row: Any) -> Tuple[str, Any, Optional[Dict[str, str]], Optional[str]]:
        if not isinstance(row, tuple):  # a mapping
            return _mapping_fields(row, subject, subject_col, data_col, headers_col, msg_id_col)
        hdrs = get(row, i_headers) if i_headers is not None else None
        return (
            subject or get(row, i_subject),  # type: ignore[arg-type]
            get(row, i_data),
            dict(hdrs) if hdrs else None,
            get(row, i_id) if i_id is not None else None,
        )

    return fields


def _mapping_fields(
    row: Mapping[str, Any], subject: Optional[str], subject_col: str, data_col: str, headers_col: str, msg_id_col: str,
) -> Tuple[str, Any, Optional[Dict[str, str]], Optional[str]]:
    hdrs = row.get(headers_col)
    return subject or row[subject_col], row[data_col], dict(hdrs) if hdrs else None, row.get(msg_id_col)


FieldTuples = Iterator[Tuple[str, Any, Optional[Dict[str, str]], Optional[str]]]


def batch_fields(
    batches: Iterator[Any], subject: Optional[str], subject_col: str = "subject", data_col: str = "data",
    headers_col: str = "headers", msg_id_col: str = "msg_id",
) -> FieldTuples:
    """(subject, data, headers, msg_id) of each row of pyarrow RecordBatches:
    each column becomes a Python list in C (``to_pylist``), not row by row."""
    for batch in batches:
        row_fields(batch.schema.names, subject, subject_col, data_col)  # the columns are there
        subjects = itertools.repeat(subject, batch.num_rows) if subject else _column(batch, subject_col)
        headers = _column(batch, headers_col)
        if headers_col in batch.schema.names:  # a map arrives as a list of (key, value) pairs
            headers = [dict(h) if h else None for h in headers]
        yield from zip(subjects, _column(batch, data_col), headers, _column(batch, msg_id_col))


def _column(batch: Any, name: str) -> Any:
    """The column as a list, or Nones when the batch has no such column."""
    if name in batch.schema.names:
        return batch.column(name).to_pylist()
    return itertools.repeat(None, batch.num_rows)


def publish_rows(
    rows: Iterator[Any],
    fields: Optional[Fields],
    client: jss.Client,
    timeout: float,
    msg_id: Optional[Callable[[int], str]] = None,
    trace: Optional[Mapping[str, str]] = None,
) -> PublishCounts:
    """Publish every row, wait for every PubAck; raise the first failure after
    all have settled (so Spark retries the task). ``fields`` turns a row into
    (subject, data, headers, msg_id); None: the rows are such tuples already.

    ``trace``: the W3C trace headers of the span the write belongs to (the
    driver's). Every message continues that trace, unless its row's headers
    carry a ``traceparent`` of their own: instrumented here, each publish
    span is a child of that context; not instrumented, the headers go on the
    messages as they are."""
    js = client.jetstream()
    counts = PublishCounts()
    pending: Deque[Any] = collections.deque()
    first_error: Optional[BaseException] = None

    def settle(future: Any) -> None:
        nonlocal first_error
        try:
            ack = future.result(timeout=timeout)
        except Exception as exc:  # keep waiting for the others; report the first
            if first_error is None:
                first_error = exc
            return
        if ack.duplicate:
            counts.duplicates += 1
        else:
            counts.published += 1

    for index, row in enumerate(rows if fields is None else map(fields, rows)):
        subject, data, headers, row_id = row
        sent = message_headers(data, headers, trace)
        if row_id is None and msg_id is not None:
            row_id = msg_id(index)
        own = headers is not None and "traceparent" in headers
        if (tr := otel.active) is not None and (trace or own):
            # instrumented: the publish span's parent is the row's own trace, or the write's
            with tr.attached(dict(headers) if own and headers is not None else dict(trace or {})):
                pending.append(js.publish_async(subject, data, headers=headers, msg_id=row_id, timeout=timeout))
        else:
            pending.append(js.publish_async(subject, data, headers=sent, msg_id=row_id, timeout=timeout))
        if len(pending) > _CHECK_AFTER:
            settle(pending.popleft())
    while pending:
        settle(pending.popleft())
    if first_error is not None:
        raise first_error
    return counts


# An atomic batch holds at most 1000 messages (the server's limit): this many
# rows and the progress marker that commits them.
CHUNK_ROWS = 999
# Commits of one chunk refused because another run moved the marker first.
_MAX_RACES = 10


@dataclass(frozen=True)
class Progress:
    """Where one partition's exactly-once write stands, as its last marker says."""

    batch: int  # the micro-batch (streaming) or 0 (df.write) of the last committed chunk; -1: none yet
    chunk: int  # that chunk's number within its batch
    done: bool  # it was the batch's last chunk
    seq: int  # the marker's stream sequence (0: none): the next marker expects it

    @classmethod
    def read(cls, js: jss.JetStream, stream: str, marker: str) -> "Progress":
        """The marker as the stream leader has it (a replica may be behind)."""
        try:
            msg = js.get_msg(stream, last_by_subject=marker)
        except jss.MsgNotFoundError:
            return cls(-1, -1, False, 0)
        try:
            body = json.loads(msg.data)
            return cls(int(body["batch"]), int(body["chunk"]), bool(body["done"]), msg.seq)
        except (ValueError, TypeError, KeyError):
            raise jss.InvalidOptionError(
                f"exactlyOnce: the last message on {marker!r} (stream {stream!r}, seq {msg.seq}) is not a progress"
                " marker: give a 'progressSubject' that nothing else publishes to"
            ) from None

    def committed(self, batch: int, chunk: int) -> bool:
        """Is chunk ``chunk`` of ``batch`` already in the stream?"""
        return self.batch > batch or (self.batch == batch and (self.done or self.chunk >= chunk))


def progress_stream(js: jss.JetStream, marker: str) -> str:
    """The stream that stores ``marker`` and lets atomic batches in; else
    InvalidOptionError. ``marker`` may be a wildcard (``progress.>``, the
    driver's check of every partition's marker): streams' subjects never
    overlap, so one stream answering means each marker is there or nowhere."""
    names = js.stream_names(subject=marker)
    if len(names) != 1:
        raise jss.InvalidOptionError(
            f"exactlyOnce: no stream stores the progress subject {marker!r}: give a 'progressSubject' inside the"
            " stream the rows go to" if not names else
            f"exactlyOnce: the progress subject {marker!r} is in {len(names)} streams ({', '.join(names)})"
        )
    if not js.stream_info(names[0]).config.allow_atomic:
        raise jss.InvalidOptionError(
            f"exactlyOnce: stream {names[0]!r} does not allow atomic batches: set allow_atomic=True on it"
            " (nats-server 2.12 or later)"
        )
    return names[0]


def _chunks(rows: Iterable[Any]) -> Iterator[Tuple[List[Any], bool]]:
    """Lists of up to CHUNK_ROWS rows, each with whether it is the last."""
    it = iter(rows)
    chunk = list(itertools.islice(it, CHUNK_ROWS))
    while chunk:
        following = list(itertools.islice(it, CHUNK_ROWS))
        yield chunk, not following
        chunk = following


def publish_exactly_once(
    rows: Iterator[Tuple[str, Any, Optional[Dict[str, str]], Optional[str]]],
    client: jss.Client,
    marker: str,
    batch: int,
    timeout: float,
    trace: Optional[Mapping[str, str]] = None,
    stream: Optional[str] = None,
) -> PublishCounts:
    """Publish a partition's rows, (subject, data, headers, msg_id) tuples, so
    that however often and however late it runs again with the same rows in
    the same order, each row is stored once.

    The rows go in atomic batches of CHUNK_ROWS (ADR-50), each committed by a
    marker on ``marker`` saying which chunk of which ``batch`` it was, sent
    with the previous marker's sequence as Nats-Expected-Last-Subject-Sequence.
    A run reads the last marker first and skips what it says is stored; a chunk
    cut off before its marker is dropped by the server; of two runs at once
    (speculative tasks) only one commits each chunk. ``duplicates`` counts the
    rows skipped. ``stream``: the one storing ``marker``, as progress_stream()
    found it (the driver's check); None: look it up here."""
    js = client.jetstream()
    stream = stream or progress_stream(js, marker)
    progress = Progress.read(js, stream, marker)
    counts = PublishCounts()
    for index, (chunk, last) in enumerate(_chunks(rows)):
        tries = 0
        while not progress.committed(batch, index):
            tries += 1
            if tries > _MAX_RACES:
                raise jss.JetStreamError(
                    f"exactlyOnce: chunk {index} of batch {batch} on {marker!r} lost {_MAX_RACES} races for its"
                    " marker in a row: does something else publish to the progress subject?"
                )
            body = json.dumps({"batch": batch, "chunk": index, "done": last}).encode()
            items = [_batch_item(row, trace) for row in chunk]
            items.append((marker, body, {"Nats-Expected-Last-Subject-Sequence": str(progress.seq)}))
            try:
                ack = js.publish_batch(items, timeout=timeout)
            except jss.APIError as exc:
                if exc.err_code != jss.ErrorCode.STREAM_WRONG_LAST_SEQUENCE:
                    raise
                progress = Progress.read(js, stream, marker)  # another run moved the marker: look again
                continue
            progress = Progress(batch, index, last, ack.seq)
            counts.published += len(chunk)
            break
        else:
            counts.duplicates += len(chunk)
    return counts


def message_headers(
    data: Any, headers: Optional[Dict[str, str]], trace: Optional[Mapping[str, str]],
) -> Optional[Dict[str, str]]:
    """The headers a row's message goes out with: the row's own, after the
    write's ``trace`` headers unless the row carries a ``traceparent`` of its
    own (then ``headers`` itself). Refuses a row without data."""
    if data is None:
        raise jss.InvalidOptionError("data must not be null")
    if trace and not (headers and "traceparent" in headers):
        return {**trace, **(headers or {})}
    return headers


def _batch_item(row: Tuple[str, Any, Optional[Dict[str, str]], Optional[str]], trace: Optional[Mapping[str, str]]) -> Any:
    subject, data, headers, row_id = row
    headers = message_headers(data, headers, trace)
    if row_id is not None:
        headers = {**(headers or {}), "Nats-Msg-Id": row_id}
    return (subject, data, headers) if headers else (subject, data)


def publish_partition(
    connection: Connection,
    *,
    subject: Optional[str] = None,
    subject_col: str = "subject",
    data_col: str = "data",
    headers_col: str = "headers",
    msg_id_col: str = "msg_id",
    timeout: float = 30.0,
    traceparent: Optional[str] = None,
    tracestate: Optional[str] = None,
) -> Callable[[Iterator[Any]], None]:
    """A function for ``df.foreachPartition`` that publishes each row to
    JetStream and returns only when every PubAck is in (raising, so that Spark
    retries the task, if any publish failed).

    ``connection``: the servers (``"nats://a:4222,nats://b:4222"``), or a
    mapping of the data source's connection options, all strings:
    ``{"servers": ..., "user": ..., "password": ..., "tls.ca": ...,
    "tls.cert": ..., "tls.key": ...}`` (TLS as file paths or PEM texts). They
    are checked here, on the driver; only these strings travel to the
    executors. Rows need a ``data`` column (bytes or str) and a ``subject``
    column unless ``subject`` is given; ``headers`` (map) and ``msg_id`` (the
    Nats-Msg-Id, so a retried task adds no duplicates) are used when present.
    Each Python worker process keeps one connection for all its tasks.
    ``timeout``: seconds to wait for each PubAck (default 30).

    The messages continue the trace of ``traceparent`` (and ``tracestate``),
    W3C trace headers; by default, with OpenTelemetry on (``jss.instrument()``)
    here on the driver, the span current at this call. A row whose
    ``headers`` carry a ``traceparent`` keeps its own.
    """
    settings = connection_settings(connection)  # here, not on the executors
    duration("timeout", timeout)
    if subject is not None:
        check_subject(subject)
    trace = trace_context(traceparent, tracestate) or otel.trace_headers()  # the driver's, as strings

    def run(rows: Iterator[Any]) -> None:
        rows = iter(rows)
        try:
            first = next(rows)
        except StopIteration:
            return
        fields = row_fields(_columns(first), subject, subject_col, data_col, headers_col, msg_id_col)
        counts = publish_rows(_chain(first, rows), fields, shared_client(settings), timeout, trace=trace)
        _log.info("partition published %d, %d duplicates", counts.published, counts.duplicates, extra=log_fields())

    return run


def trace_options() -> Dict[str, str]:
    """The ``traceparent``/``tracestate`` options that make the messages of a
    write continue the current span's trace, for
    ``df.write.format("jetstream").options(**trace_options())`` on the driver
    (Spark makes the writer in a Python worker of its own, where the
    application's span is not current); {} when OpenTelemetry is off
    (``jss.instrument()``) or no span is current."""
    return otel.trace_headers()


def _columns(row: Any) -> Iterable[str]:
    fields = getattr(row, "__fields__", None)
    if fields is not None:
        return list(fields)
    if isinstance(row, Mapping):
        return list(row.keys())
    raise jss.InvalidOptionError("publish_partition expects pyspark Rows or mappings")


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest
