"""The data source on a real Spark standalone cluster (issue 23, item 4): a
master and two workers from the pip install, each its own JVM with one core,
the driver in this process. A worker is killed with SIGKILL (all of its
processes, as when its machine dies) while a task of a micro-batch is running
on it; what a data engineer sees: the task is retried on the other worker, the
query goes on and ends normally, the restarted worker gets an executor again,
and the output holds every message exactly once. And KVLookup (issue 30) on
the same cluster: one reading and one watch per Python worker process.

Run alone: ``python -m pytest tests/spark/test_standalone_cluster.py``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import pytest

from jetstream_sync.testing import wait_until

from ..helpers import publish
from .standalone import StandaloneCluster, executors, session_options, trap, wait_for_file

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[StandaloneCluster]:
    """Master and two workers; teardown kills every process of the cluster and checks none is left."""
    nodes = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), worker_memory="1g")
    try:
        nodes.start_master()
        nodes.start_worker(0)
        nodes.start_worker(1)
        nodes.wait_workers(2)
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture(scope="module")
def cspark(cluster: StandaloneCluster, local_spark_holder, server) -> Iterator[Any]:
    """A driver session on the cluster: one executor of one core on each worker."""
    from pyspark.sql import SparkSession

    from jetstream_sync.spark import register

    local = local_spark_holder.pop("session", None)
    if local is not None:
        local.stop()  # one SparkContext per process; the next local test starts a new one
    builder = SparkSession.builder.master(cluster.url).appName("jetstream-sync-standalone")
    for key, value in {**session_options(), "spark.executor.memory": "512m", "spark.executor.cores": "1"}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    try:
        session.sparkContext.setLogLevel("ERROR")  # the killed executor's errors are expected
        register(session)
        wait_until(lambda: executors(session) == 2, timeout=180, interval=0.5)
        yield session
    finally:
        session.stop()


def _exactly_once(spark: Any, path: Path, n: int) -> None:
    """The Parquet output (as its _spark_metadata log lists it) holds sequences 1..n, each once."""
    from pyspark.sql import functions as F

    row = spark.read.parquet(str(path)).agg(
        F.count("*").alias("rows"), F.countDistinct("seq").alias("seqs"), F.min("seq").alias("lo"),
        F.max("seq").alias("hi"),
    ).first()
    assert (row.seqs, row.lo, row.hi) == (n, 1, n)  # every sequence at least once
    assert row.rows == n  # and no row twice


def _kill_the_trapped_worker(cluster: StandaloneCluster, spark: Any, marker: Path, failed: Callable[[], Any],
                             done: Callable[[], bool]) -> None:
    """Once the trap holds a task, kill its worker; ``done()`` (the batch or job
    finished) must then come true on the other worker alone, without
    ``failed()``; then the killed worker is restarted and gets an executor."""
    role = wait_for_file(marker, timeout=300, failed=failed)
    assert executors(spark) == 2
    assert not done()  # mid-batch: the trapped task holds it
    worker = int(role.removeprefix("worker"))
    cluster.kill_worker(worker)
    wait_until(lambda: failed() is not None or done(), timeout=300, interval=0.2)
    assert failed() is None
    cluster.start_worker(worker)
    cluster.wait_workers(2)
    wait_until(lambda: executors(spark) == 2, timeout=180, interval=0.5)


def _to_parquet_with_a_worker_killed(cluster: StandaloneCluster, spark: Any, reader: Any, tmp_path: Path, at: int,
                                     trap_batch: int) -> Path:
    """Run ``reader`` to Parquet (availableNow) and kill the worker that the
    trap holds mid-batch at sequence ``at``: the batch must finish on the other
    worker; the killed one is restarted and gets an executor; the query ends
    without an error. Returns the sink's path."""
    from pyspark.sql import functions as F

    sink, marker, release = tmp_path / "sink", tmp_path / "trapped", tmp_path / "release"
    df = reader.load().withColumn("seq", F.udf(trap(str(marker), str(release), at), "long")("seq"))
    query = (
        df.writeStream.format("parquet").option("path", str(sink))
        .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
    )  # fmt: skip
    try:
        def past_the_trap() -> bool:
            return not query.isActive or any(p.batchId >= trap_batch for p in query.recentProgress)

        _kill_the_trapped_worker(cluster, spark, marker, query.exception, past_the_trap)
        assert query.awaitTermination(300)
        assert query.exception() is None
    finally:
        release.touch()  # a trapped task that was not killed returns
        query.stop()
    return sink


@pytest.mark.timeout(600)
def test_batch_read_is_exact(cspark, server, js, stream_name):
    n = 30_000
    subject = f"{stream_name.lower()}.x"
    js.create_stream(name=stream_name, subjects=[subject])
    publish(js, subject, n)
    df = (
        cspark.read.format("jetstream").option("servers", server.url).option("stream", stream_name)
        .option("minPartitions", "4").load()
    )  # fmt: skip
    seqs = [r.seq for r in df.select("seq").collect()]
    assert len(seqs) == n
    assert sorted(seqs) == list(range(1, n + 1))


@pytest.mark.timeout(600)
def test_streaming_query_survives_a_worker_killed_mid_batch(cluster, cspark, server, js, stream_name, tmp_path):

    n, per_batch, at = 30_000, 10_000, 15_000  # the trap is in batch 1 (of 0, 1, 2)
    subject = f"{stream_name.lower()}.x"
    js.create_stream(name=stream_name, subjects=[subject])
    publish(js, subject, n)
    reader = (
        cspark.readStream.format("jetstream").option("servers", server.url).option("stream", stream_name)
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(per_batch))
        .option("minPartitions", "2")
    )  # fmt: skip
    sink = _to_parquet_with_a_worker_killed(cluster, cspark, reader, tmp_path, at, trap_batch=(at - 1) // per_batch)
    _exactly_once(cspark, sink, n)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["msg-ids", "exactly-once"])
def test_write_with_a_worker_killed_mid_write_publishes_each_row_once(cluster, cspark, server, nc, js, stream_name,
                                                                       tmp_path, mode):
    """The retried task publishes its partition again: a msg_id column makes
    the stream drop what was in (within its duplicate window); exactlyOnce
    skips the atomic batches its progress marker says are stored."""
    from pyspark.sql import functions as F

    n = 30_000
    p = stream_name.lower()
    subject = f"{p}.w"
    js.create_stream(name=stream_name, subjects=[subject, f"{p}.progress.>"], allow_atomic=True)
    marker, release = tmp_path / "trapped", tmp_path / "release"
    # Two partitions, no shuffle; the trap is halfway through the second.
    ids = cspark.range(0, n, 1, 2).withColumn("id", F.udf(trap(str(marker), str(release), 3 * n // 4), "long")("id"))
    if mode == "msg-ids":
        df = ids.selectExpr("CAST(id AS STRING) AS data", "concat('id-', id) AS msg_id")
        sink = {}
    else:
        df = ids.selectExpr("CAST(id AS STRING) AS data")
        sink = {"exactlyOnce": "true", "progressSubject": f"{p}.progress", "writeId": "load-1"}
    writer = df.write.format("jetstream").option("servers", server.url).option("subject", subject).options(**sink)
    writer = writer.mode("append")

    def rows() -> int:
        return js.stream_info(stream_name, subjects_filter=subject).state.subjects.get(subject, 0)

    errors: List[BaseException] = []

    def save() -> None:
        # Spark finds a Python data source through the JVM thread's active session, which a new thread lacks.
        cspark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(cspark._jsparkSession)
        try:
            writer.save()
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    saving = threading.Thread(target=save, name="df.write", daemon=True)
    saving.start()
    try:
        _kill_the_trapped_worker(cluster, cspark, marker, lambda: errors[0] if errors else None,
                                 lambda: not saving.is_alive())
    finally:
        release.touch()
        saving.join(300)
    assert not errors and not saving.is_alive()
    assert rows() == n
    writer.save()  # a re-run adds nothing
    assert rows() == n
    back = (
        cspark.read.format("jetstream").option("servers", server.url).option("stream", stream_name)
        .option("subjects", subject).load()
    )  # fmt: skip
    assert back.agg(F.countDistinct("data")).first()[0] == n


@pytest.mark.timeout(600)
def test_work_queue_consumer_mode_survives_a_worker_killed_mid_batch(cluster, cspark, server, js, stream_name, tmp_path):

    n, per_batch, at = 100_000, 25_000, 60_000  # the trap is in batch 2 (of 0 … 3)
    subject = f"{stream_name.lower()}.jobs"
    js.create_stream(name=stream_name, subjects=[subject], retention="workqueue")
    publish(js, subject, n)
    reader = (
        cspark.readStream.format("jetstream").option("servers", server.url).option("stream", stream_name)
        .option("consumer", "spark").option("createConsumer", "true")
        .option("maxOffsetsPerTrigger", str(per_batch)).option("minPartitions", "2")
    )  # fmt: skip
    sink = _to_parquet_with_a_worker_killed(cluster, cspark, reader, tmp_path, at, trap_batch=(at - 1) // per_batch)
    _exactly_once(cspark, sink, n)  # at least once is the promise; the retried task had the same rows
    # every batch acked, the last one too (sent and flushed; the server takes acks in on its own time)
    wait_until(lambda: js.stream_info(stream_name).state.messages == 0, timeout=10)
    info = js.consumer_info(stream_name, "spark")
    assert info.num_pending == 0 and info.num_ack_pending == 0


@pytest.mark.timeout(600)
def test_kv_lookup_reads_the_bucket_once_per_worker_process_and_its_watch_keeps_it_current(cspark, server, nc, js,
                                                                                             stream_name):
    """Issue 30: reference data joined on the executors by a KVLookup made on
    the driver. Every row gets its key's value (an unknown key the default);
    each Python worker process opens one watch however many tasks and rows it
    serves (the server's consumer-created advisories on the bucket's stream are
    counted, so a lookup re-read per task or row shows up as more watches than
    processes); a put after the first query reaches the same, reused worker
    processes through their open watch, not a second reading."""
    from jetstream_sync.spark import KVLookup

    n, parts = 400, 8
    bucket = f"FX_{stream_name}"
    kv = js.create_key_value(bucket=bucket)
    for currency, rate in {"EUR": b"1.08", "GBP": b"1.27", "JPY": b"0.0067"}.items():
        kv.put(currency, rate)
    watches: List[str] = []  # the names of the consumers the server created on the bucket's stream
    advisories = nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.CREATED.KV_{bucket}.*",
                              cb=lambda msg: watches.append(msg.subject.rpartition(".")[2]))
    nc.flush()
    rates = KVLookup(server.url, bucket)
    currencies = ["EUR", "GBP", "JPY", "CHF"]  # CHF is not in the bucket

    def enrich(batches):  # no type hints: pyspark would read them as a pandas UDF's
        import os

        from pyspark import TaskContext

        part = TaskContext.get().partitionId()
        for pdf in batches:
            pdf["currency"] = [currencies[i % 4] for i in pdf["id"]]
            pdf["rate"] = [float(rates.get(c, b"-1")) for c in pdf["currency"]]
            pdf["pid"], pdf["part"] = os.getpid(), part
            yield pdf

    df = cspark.range(0, n, 1, parts).mapInPandas(enrich, "id long, currency string, rate double, pid long, part int")

    def check(rows: List[Any], expected: dict) -> set:
        """Every row has its currency's rate; returns the worker processes that served them."""
        assert sorted(r.id for r in rows) == list(range(n))
        assert {r.part for r in rows} == set(range(parts))  # one task per partition, all ran
        wrong = [(r.id, r.currency, r.rate) for r in rows if r.rate != expected[r.currency]]
        assert not wrong, f"{len(wrong)} rows with a wrong rate, e.g. {wrong[:5]}"
        return {r.pid for r in rows}

    def opened_watches(pids: set) -> int:
        """The watches opened so far, once the advisory of each process's is in."""
        nc.flush()
        wait_until(lambda: len(watches) >= len(pids), timeout=10, interval=0.05)
        return len(set(watches))

    try:
        first = check(df.collect(), {"EUR": 1.08, "GBP": 1.27, "JPY": 0.0067, "CHF": -1.0})
        # The premise: Spark reused its Python workers for several tasks, so a
        # reading per task would open more watches than there are processes.
        assert len(first) < parts, f"{len(first)} worker processes for {parts} tasks: no reuse to test"
        assert opened_watches(first) == len(first), f"{len(set(watches))} watches opened by {len(first)} processes"
        # Still open after the query: the worker processes live on between tasks, and their watches with them.
        open_now = js.stream_info(f"KV_{bucket}").state.consumer_count
        assert open_now == len(first), f"{open_now} watches open after the query, {len(first)} worker processes"

        kv.put("EUR", b"1.10")
        after = {"EUR": 1.10, "GBP": 1.27, "JPY": 0.0067, "CHF": -1.0}
        seen: set = set(first)
        eur: set = set()  # the EUR rates of the last run

        def current() -> Optional[List[Any]]:
            rows = df.collect()
            seen.update(r.pid for r in rows)
            eur.clear()
            eur.update(r.rate for r in rows if r.currency == "EUR")
            return rows if eur == {1.10} else None

        try:
            rows = wait_until(current, timeout=30, interval=0.2)
        except AssertionError:
            raise AssertionError(f"30 s after the put of EUR 1.10 the query still gives EUR {sorted(eur)}") from None
        second = check(rows, after)
        assert second & first, "no worker process of the first query ran the second: nothing shows a watch"
        # The processes that read 1.08 answer 1.10 without reading the bucket again.
        assert opened_watches(seen) == len(seen), f"{len(set(watches))} watches opened by {len(seen)} processes"
    finally:
        advisories.unsubscribe()
