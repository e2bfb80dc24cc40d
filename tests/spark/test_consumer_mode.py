"""Consumer mode of the streaming reader (issue 23, item 3): a WorkQueue stream
read through a durable pull consumer, acked when Spark commits each batch; a
batch that fails is redelivered, never lost."""

from __future__ import annotations

import os

import pytest

import jetstream_sync as jss
from jetstream_sync.testing import wait_until

from ..helpers import info_once, publish

pytestmark = pytest.mark.spark

N = 20_000
FAIL_AT = 12_345  # the stream sequence whose batch fails once


def consumer_query(spark, server, stream, sink, checkpoint, flag, trigger, **options):
    from pyspark.sql import functions as F

    flag_path = str(flag)

    def check(seq):
        # The "sink" fails once, on the batch holding FAIL_AT, before Spark commits it.
        if seq == FAIL_AT and os.path.exists(flag_path):
            os.remove(flag_path)
            raise RuntimeError("simulated failure of the batch")
        return seq

    reader = spark.readStream.format("jetstream").option("servers", server.url).option("stream", stream)
    for key, value in {"consumer": "spark", "createConsumer": "true", "ackWait": "3",
                       "maxOffsetsPerTrigger": "5000", **options}.items():  # fmt: skip
        reader = reader.option(key, value)
    df = reader.load().withColumn("seq", F.udf(check, "long")("seq"))
    writer = df.writeStream.format("parquet").option("path", str(sink)).option("checkpointLocation", str(checkpoint))
    return writer.trigger(**trigger).start()


@pytest.mark.timeout(300)
def test_work_queue_batch_that_fails_is_redelivered_and_the_stream_drains(spark, server, js, stream_name, tmp_path):
    subject = f"{stream_name.lower()}.jobs"
    js.create_stream(name=stream_name, subjects=[subject], retention="workqueue")
    publish(js, subject, N)
    sink, checkpoint, flag = tmp_path / "sink", tmp_path / "checkpoint", tmp_path / "fail-once"
    flag.touch()

    # First run: batches up to the one holding FAIL_AT are written and acked; that one fails before its commit.
    query = consumer_query(spark, server, stream_name, sink, checkpoint, flag, {"availableNow": True})
    with pytest.raises(Exception, match="simulated failure"):
        query.awaitTermination(120)
    assert not flag.exists()

    def acked_some():  # the server takes the acks (sent and flushed) in on its own time
        left = js.stream_info(stream_name).state.messages
        return (left,) if left < N else None

    (left,) = wait_until(acked_some, timeout=10)
    assert 0 < left < N  # the committed batches were acked and removed; the failed one was not

    # Restart from the checkpoint: the failed batch's messages come back after AckWait (3 s).
    query = consumer_query(spark, server, stream_name, sink, checkpoint, flag, {"processingTime": "200 milliseconds"})
    try:
        wait_until(lambda: js.stream_info(stream_name).state.messages == 0 or query.exception(), timeout=180, interval=0.2)
        assert query.exception() is None
    finally:
        query.stop()

    out = spark.read.parquet(str(sink))
    seqs = [r.seq for r in out.select("seq").collect()]
    assert len(seqs) >= N  # every message at least once
    assert sorted(set(seqs)) == list(range(1, N + 1))  # exactly once by stream sequence
    info = js.consumer_info(stream_name, "spark")
    assert info.num_pending == 0 and info.num_ack_pending == 0


@pytest.mark.timeout(180)
def test_interest_stream_available_now_reads_everything_once_and_acks(spark, server, js, stream_name, tmp_path):
    subject = f"{stream_name.lower()}.x"
    js.create_stream(name=stream_name, subjects=[subject], retention="interest")
    js.create_consumer(stream_name, durable_name="spark", ack_policy="explicit", ack_wait=30.0)
    publish(js, subject, 3000)
    reader = (
        spark.readStream.format("jetstream").option("servers", server.url).option("stream", stream_name)
        .option("consumer", "spark").option("maxOffsetsPerTrigger", "1000")
    )  # fmt: skip
    query = (
        reader.load().writeStream.format("parquet").option("path", str(tmp_path / "sink"))
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    )  # fmt: skip
    assert query.awaitTermination(120)
    seqs = sorted(r.seq for r in spark.read.parquet(str(tmp_path / "sink")).select("seq").collect())
    assert seqs == list(range(1, 3001))
    # the acks were sent and flushed before the query ended; the server takes them in on its own time
    info = info_once(js.consumer(stream_name, "spark"), lambda i: i.num_pending == 0 and i.num_ack_pending == 0)
    assert info.num_pending == 0 and info.num_ack_pending == 0  # the last batch too: acked before the query ended
    assert js.stream_info(stream_name).state.messages == 0  # interest retention: acked by its only consumer


@pytest.mark.timeout(180)
def test_a_consumer_that_cannot_be_read_in_consumer_mode_fails_the_query(spark, server, js, stream_name, tmp_path):
    js.create_stream(name=stream_name, subjects=[f"{stream_name.lower()}.>"])
    js.create_consumer(stream_name, durable_name="noacks", ack_policy="none")
    cases = [("missing", "does not exist; set createConsumer=true"), ("noacks", "needs explicit acks")]
    for n, (consumer, message) in enumerate(cases):
        reader = (
            spark.readStream.format("jetstream").option("servers", server.url).option("stream", stream_name)
            .option("consumer", consumer)
        )  # fmt: skip
        query = (
            reader.load().writeStream.format("parquet").option("path", str(tmp_path / f"s{n}"))
            .option("checkpointLocation", str(tmp_path / f"c{n}")).trigger(availableNow=True).start()
        )  # fmt: skip
        with pytest.raises(Exception, match=message):
            query.awaitTermination(60)
    with pytest.raises(jss.ConsumerNotFoundError):
        js.consumer_info(stream_name, "missing")  # nothing created without createConsumer=true
