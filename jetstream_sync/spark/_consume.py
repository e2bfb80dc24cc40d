"""Consumer mode of the streaming reader: micro-batches pulled through a
durable pull consumer and acked when Spark commits them. No pyspark imports.

Where the messages live: the driver's reader pulls a batch with the durable
consumer (so it holds every message's ``$JS.ACK`` reply subject, which is what
an ack needs) and hands the rows to the executors inside the batch's
partitions; it keeps only the reply subjects, keyed by the batch's end offset,
until Spark commits the batch. Executors never talk to the consumer, so a
retried task reads exactly the rows of its batch again. The offsets are the
consumer's delivery sequences (``$JS.ACK...<cseq>...``), which the server only
ever increases, redeliveries included: Spark's offset log stays monotonic.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

import jetstream_sync as jss

from ..options.spark import ReadOptions
from ._clients import shared_client
from .._core.logfields import log_fields

_log = logging.getLogger(__name__)

# Messages pulled per micro-batch without maxOffsetsPerTrigger (they travel in
# the batch's partitions, so the driver holds them: a bound is needed).
DEFAULT_BATCH = 100_000
# Messages per partition without minPartitions.
PER_PARTITION = 100_000
# Seconds to wait for the server to have received a commit's acks.
ACK_FLUSH_TIMEOUT = 30.0


class ConsumerModeError(jss.JetStreamError):
    """The consumer named by the ``consumer`` option cannot be read in consumer
    mode: missing (without createConsumer=true), a push consumer, or without
    explicit acks."""


def ensure_consumer(opts: ReadOptions) -> jss.Consumer:
    """The durable pull consumer of ``opts.consumer``, created (explicit acks,
    ``ackWait``, ``subjects`` as its filter, MaxAckPending twice the batch
    size) when ``createConsumer`` is true;
    an existing one must be a pull consumer with explicit acks."""
    assert opts.consumer is not None
    js = shared_client(opts.connection).jetstream()
    cons: jss.Consumer
    if opts.create_consumer:
        # Room for a batch not yet acked and one pulled after a restart (MaxAckPending caps what a pull gets).
        pending = 2 * (opts.max_offsets_per_trigger or DEFAULT_BATCH)
        config: Dict[str, Any] = dict(
            durable_name=opts.consumer, ack_policy="explicit", ack_wait=opts.ack_wait, max_ack_pending=pending,
        )
        if len(opts.subjects) == 1:
            config["filter_subject"] = opts.subjects[0]
        elif opts.subjects:
            config["filter_subjects"] = list(opts.subjects)
        try:
            cons = js.create_consumer(opts.stream, **config)
        except jss.APIError as exc:
            raise ConsumerModeError(
                f"consumer {opts.consumer!r} of stream {opts.stream!r} could not be created "
                f"(explicit acks, ackWait={opts.ack_wait:g}s): {exc}"
            ) from exc
    else:
        try:
            cons = js.consumer(opts.stream, opts.consumer)
        except jss.ConsumerNotFoundError as exc:
            raise ConsumerModeError(
                f"consumer {opts.consumer!r} of stream {opts.stream!r} does not exist; "
                "set createConsumer=true to create it"
            ) from exc
        except jss.JetStreamError as exc:  # a push consumer, among others
            raise ConsumerModeError(f"consumer {opts.consumer!r} of stream {opts.stream!r}: {exc}") from exc
    policy = cons.cached_info.config.ack_policy
    if str(getattr(policy, "value", policy)) != "explicit":
        raise ConsumerModeError(
            f"consumer {opts.consumer!r} of stream {opts.stream!r} has ack policy {policy!s}: "
            "consumer mode acks each message when Spark commits its batch and needs explicit acks"
        )
    return cons


def delivery_seq(reply: str) -> int:
    """The consumer (delivery) sequence of a ``$JS.ACK`` reply subject."""
    t = reply.split(".")
    return int(t[6]) if len(t) == 9 else int(t[8])


def stream_seq_and_time(reply: str) -> Tuple[int, int]:
    """(stream sequence, timestamp ns) of a ``$JS.ACK`` reply subject."""
    t = reply.split(".")
    return (int(t[5]), int(t[7])) if len(t) == 9 else (int(t[7]), int(t[9]))


@dataclass
class Rows:
    """Rows of a micro-batch for one partition: plain lists, pickled to the executor."""

    stream: str
    subjects: List[str] = field(default_factory=list)
    seqs: List[int] = field(default_factory=list)
    datas: List[bytes] = field(default_factory=list)
    headers: List[Optional[List[Tuple[str, str]]]] = field(default_factory=list)
    stamps: List[int] = field(default_factory=list)  # microseconds since the epoch


@dataclass
class PulledBatch:
    """What the driver pulled for one micro-batch."""

    end: int  # the last delivery sequence pulled (the batch's end offset)
    replies: List[str]
    rows: List[Rows]


def pull(cons: jss.Consumer, opts: ReadOptions, limit: int, after: int) -> Optional[PulledBatch]:
    """Up to ``limit`` messages available now (``fetch_no_wait``: never waits
    for new ones), as a batch ending after delivery sequence ``after``; None
    when nothing came."""
    rows: List[Rows] = [Rows(opts.stream)]
    replies: List[str] = []
    per_part = PER_PARTITION
    if opts.min_partitions:
        per_part = max(1, -(-limit // opts.min_partitions))
    end = after
    while len(replies) < limit:
        want = min(opts.fetch_batch, limit - len(replies))
        got = 0
        for msg in cons.fetch_no_wait(want):
            got += 1
            reply = msg.reply
            cseq = delivery_seq(reply)
            seq, ts = stream_seq_and_time(reply)
            part = rows[-1]
            if len(part.seqs) >= per_part:
                part = Rows(opts.stream)
                rows.append(part)
            part.subjects.append(msg.subject)
            part.seqs.append(seq)
            part.datas.append(msg.data)
            hdrs = msg.headers if opts.include_headers else None
            part.headers.append(list(hdrs.items()) if hdrs else None)
            part.stamps.append(ts // 1000)
            replies.append(reply)
            end = max(end, cseq)
        if got < want:
            break
    if not replies:
        return None
    return PulledBatch(end, replies, rows)


def ack(client: jss.Client, replies: List[str], what: str) -> None:
    """Ack (``+ACK``) each message, then wait until the server has them (at most ACK_FLUSH_TIMEOUT s)."""
    for reply in replies:
        client.publish(reply, b"+ACK")
    client.flush(ACK_FLUSH_TIMEOUT)
    _log.info("%s: acked %d messages", what, len(replies), extra=log_fields())


def rows_arrow(rows: Rows, schema: Any) -> Iterator[Any]:
    """One partition's rows as pyarrow RecordBatches (columns converted in C)."""
    import pyarrow as pa

    n = len(rows.seqs)
    if not n:
        return
    yield pa.RecordBatch.from_arrays(
        [
            pa.array([rows.stream] * n, pa.string()),
            pa.array(rows.subjects, pa.string()),
            pa.array(rows.seqs, pa.int64()),
            pa.array(rows.datas, pa.binary()),
            pa.array(rows.headers, pa.map_(pa.string(), pa.string())),
            pa.array(rows.stamps, pa.timestamp("us", tz="UTC")),
        ],
        schema=schema,
    )
