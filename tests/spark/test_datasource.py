"""The jetstream data source and foreachPartition helper on local[2] and a real nats-server."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest


from ..helpers import publish, wait_until

pytestmark = pytest.mark.spark


def load(spark, server, stream, **options):
    reader = spark.read.format("jetstream").option("servers", server.url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def fill(js, stream_name, count, subjects=("a", "b", "c", "d")):
    """``count`` messages round-robin over ``<stream>.<subject>``."""
    prefix = stream_name.lower()
    js.create_stream(name=stream_name, subjects=[f"{prefix}.>"])
    for start in range(0, count, 10_000):
        futures = [
            js.publish_async(f"{prefix}.{subjects[i % len(subjects)]}", b"%d" % i)
            for i in range(start, min(start + 10_000, count))
        ]
        assert js.publish_async_complete(60)
        assert all(f.result() for f in futures)


@pytest.mark.timeout(180)
def test_batch_read_100k_over_4_partitions(spark, server, js, stream_name):
    fill(js, stream_name, 100_000)
    df = load(spark, server, stream_name, minPartitions="4")
    assert df.rdd.getNumPartitions() == 4
    row = df.selectExpr("count(*) AS n", "sum(seq) AS s", "collect_set(subject) AS subjects").first()
    assert row.n == 100_000
    assert row.s == 100_000 * 100_001 // 2
    p = stream_name.lower()
    assert sorted(row.subjects) == [f"{p}.a", f"{p}.b", f"{p}.c", f"{p}.d"]
    assert df.filter("seq = 7").select("data").first().data == b"6"


def test_subject_filter_and_explicit_range(spark, server, js, stream_name):
    fill(js, stream_name, 1000)
    p = stream_name.lower()
    only_b = load(spark, server, stream_name, subjects=f"{p}.b", minPartitions="3")
    seqs = sorted(r.seq for r in only_b.select("seq").collect())
    assert seqs == list(range(2, 1001, 4))  # every 4th message, starting at seq 2
    two = load(spark, server, stream_name, subjects=f"{p}.a,{p}.c")
    assert two.count() == 500
    ranged = load(
        spark, server, stream_name,
        startingOffsets=json.dumps({"stream": stream_name, "seq": 101}),
        endingOffsets=json.dumps({"stream": stream_name, "seq": 201}),
        minPartitions="2",
    )
    assert sorted(r.seq for r in ranged.select("seq").collect()) == list(range(101, 201))
    # A filter whose last match is well before the range end must still end.
    tail = load(spark, server, stream_name, subjects=f"{p}.b", endingOffsets='{"seq": 999}')
    assert max(r.seq for r in tail.select("seq").collect()) == 998


def test_empty_range_and_empty_stream(spark, server, js, stream_name):
    fill(js, stream_name, 100)
    assert load(spark, server, stream_name, startingOffsets='{"seq": 50}', endingOffsets='{"seq": 50}').count() == 0
    assert load(spark, server, stream_name, startingOffsets="latest").count() == 0
    js.create_stream(name=f"{stream_name}E", subjects=[f"{stream_name.lower()}e.>"])
    assert load(spark, server, f"{stream_name}E").count() == 0


def test_headers_and_starting_time(spark, server, js, stream_name):
    p = stream_name.lower()
    js.create_stream(name=stream_name, subjects=[f"{p}.>"])
    js.publish(f"{p}.x", b"old", headers={"K": "1"})
    second = js.publish(f"{p}.x", b"new", headers={"K": "2"})
    when = js.stream(stream_name).get_msg(seq=second.seq).time
    df = load(spark, server, stream_name, startingTime=when.isoformat())
    rows = df.collect()
    assert [(r.seq, r.data, r.headers) for r in rows] == [(2, b"new", {"K": "2"})]
    assert load(spark, server, stream_name, includeHeaders="false").first().headers is None


def test_bad_options_fail_clearly(spark, server, js, stream_name):
    with pytest.raises(Exception, match="option 'stream' is required"):
        spark.read.format("jetstream").option("servers", server.url).load()
    with pytest.raises(Exception, match="startingOffsets='tomorrow': an offset is earliest, latest"):
        load(spark, server, "X", startingOffsets="tomorrow")  # at load(), before any action


def run_stream(spark, server, source, sink_path, checkpoint, **options):
    reader = spark.readStream.format("jetstream").option("servers", server.url).option("stream", source)
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(sink_path))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    if query.exception():
        raise query.exception()
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


@pytest.mark.timeout(240)
def test_streaming_available_now_and_restart(spark, server, js, stream_name, tmp_path):
    fill(js, stream_name, 100_000)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    batches = run_stream(
        spark, server, stream_name, sink, checkpoint, startingOffsets="earliest", maxOffsetsPerTrigger="25000"
    )
    assert len(batches) >= 4
    assert sum(b["numInputRows"] for b in batches) == 100_000
    out = spark.read.parquet(str(sink))
    assert out.count() == 100_000 and out.select("seq").distinct().count() == 100_000

    publish(js, f"{stream_name.lower()}.z", 1000)
    batches = run_stream(spark, server, stream_name, sink, checkpoint, maxOffsetsPerTrigger="25000")
    assert sum(b["numInputRows"] for b in batches) == 1000
    new = spark.read.parquet(str(sink)).filter("seq > 100000")
    assert new.count() == 1000 and new.select("seq").distinct().count() == 1000


def test_data_loss_fails_or_skips(spark, server, js, stream_name, tmp_path):
    fill(js, stream_name, 1000)
    for fail in ("true", "false"):
        sink, checkpoint = tmp_path / f"sink{fail}", tmp_path / f"ck{fail}"
        run_stream(spark, server, stream_name, sink, checkpoint, startingOffsets='{"seq": 901}', failOnDataLoss=fail)
    publish(js, f"{stream_name.lower()}.z", 500)  # seqs 1001..1500
    js.stream(stream_name).purge(seq=1201)  # 1001..1200 are gone before either query read them
    with pytest.raises(Exception, match="no longer holds"):
        run_stream(spark, server, stream_name, tmp_path / "sinktrue", tmp_path / "cktrue", failOnDataLoss="true")
    run_stream(spark, server, stream_name, tmp_path / "sinkfalse", tmp_path / "ckfalse", failOnDataLoss="false")
    seqs = {r.seq for r in spark.read.parquet(str(tmp_path / "sinkfalse")).select("seq").collect()}
    assert seqs == set(range(901, 1001)) | set(range(1201, 1501))


def _copy_query(spark, server, source: str, subject: str, checkpoint, **sink_options: str) -> None:
    """A streaming copy of ``source`` to ``subject``, 1000 sequences per micro-batch, until caught up."""
    writer = (
        spark.readStream.format("jetstream").option("servers", server.url).option("stream", source)
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "1000").load()
        .selectExpr("data")
        .writeStream.format("jetstream").option("servers", server.url).option("subject", subject)
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    )
    for key, value in sink_options.items():
        writer = writer.option(key, value)
    query = writer.start()
    assert query.awaitTermination(120)
    if query.exception():
        raise query.exception()


def _lose_last_commit(checkpoint) -> None:
    """Spark now believes the last micro-batch never committed: a restart writes it again."""
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda q: int(q.name))
    last = commits[-1]
    last.unlink()
    crc = last.with_name(f".{last.name}.crc")
    if crc.exists():
        crc.unlink()


@pytest.mark.timeout(240)
def test_streaming_write_replay_adds_nothing(spark, server, js, stream_name, tmp_path):
    fill(js, stream_name, 3000)
    target = f"{stream_name}OUT"
    subject = f"{target.lower()}.copy"
    js.create_stream(name=target, subjects=[f"{target.lower()}.>"], duplicate_window=300.0)
    checkpoint = tmp_path / "checkpoint"
    _copy_query(spark, server, stream_name, subject, checkpoint)
    assert js.stream_info(target).state.messages == 3000
    _lose_last_commit(checkpoint)
    spy = js.client.subscribe(subject)  # sees publishes, duplicates included
    js.client.flush()
    _copy_query(spark, server, stream_name, subject, checkpoint)  # the last batch again, same message ids
    assert spy.pending() > 0  # the batch really was written again
    assert js.stream_info(target).state.messages == 3000


@pytest.mark.timeout(300)
@pytest.mark.parametrize("exactly_once", [False, True], ids=["msg-ids", "exactly-once"])
def test_streaming_write_replayed_after_the_duplicate_window(spark, server, js, stream_name, tmp_path, exactly_once):
    """A query stopped after its last batch, that batch's commit lost, restarted
    once the stream's duplicate window (2 s) has passed: with message ids alone
    the replayed batch is stored again; with exactlyOnce it adds nothing."""
    fill(js, stream_name, 3000)
    target = f"{stream_name}OUT"
    p = target.lower()
    js.create_stream(name=target, subjects=[f"{p}.>"], duplicate_window=2.0, allow_atomic=True)
    checkpoint = tmp_path / "checkpoint"
    sink = {"exactlyOnce": "true", "progressSubject": f"{p}.progress"} if exactly_once else {}
    _copy_query(spark, server, stream_name, f"{p}.copy", checkpoint, **sink)
    ended = time.monotonic()
    copies = lambda: js.stream_info(target, subjects_filter=f"{p}.copy").state.subjects.get(f"{p}.copy", 0)  # noqa: E731
    assert copies() == 3000
    _lose_last_commit(checkpoint)
    wait_until(lambda: time.monotonic() - ended > 2.5, timeout=10)  # the duplicate window is over
    _copy_query(spark, server, stream_name, f"{p}.copy", checkpoint, **sink)
    assert copies() == (3000 if exactly_once else 4000)


def test_batch_write_with_a_write_id_is_exactly_once(spark, server, js, stream_name):
    p = stream_name.lower()
    js.create_stream(name=stream_name, subjects=[f"{p}.>"], allow_atomic=True)
    df = spark.createDataFrame([(f"{p}.w", f"payload-{i}") for i in range(2500)], "subject string, data string")
    df = df.repartition(3)

    def save(write_id: str) -> None:
        (df.write.format("jetstream").option("servers", server.url).option("exactlyOnce", "true")
         .option("progressSubject", f"{p}.progress").option("writeId", write_id).mode("append").save())

    save("load-1")
    save("load-1")  # the same write again: nothing added
    assert js.stream_info(stream_name, subjects_filter=f"{p}.w").state.subjects[f"{p}.w"] == 2500
    save("load-2")  # another write of the same rows
    assert js.stream_info(stream_name, subjects_filter=f"{p}.w").state.subjects[f"{p}.w"] == 5000
    with pytest.raises(Exception, match="allow_atomic=True"):
        js.create_stream(name=f"{stream_name}P", subjects=[f"{p}plain.>"])
        (df.write.format("jetstream").option("servers", server.url).option("subject", f"{p}plain.w")
         .option("exactlyOnce", "true").option("progressSubject", f"{p}plain.progress").option("writeId", "x")
         .mode("append").save())
    assert js.stream_info(f"{stream_name}P").state.messages == 0


def test_batch_write_with_msg_id_column_is_idempotent(spark, server, js, stream_name):
    p = stream_name.lower()
    js.create_stream(name=stream_name, subjects=[f"{p}.>"])
    rows = [(f"{p}.w", f"payload-{i}", f"id-{i}", {"H": str(i)}) for i in range(500)]
    df = spark.createDataFrame(rows, "subject string, data string, msg_id string, headers map<string,string>")
    df.write.format("jetstream").option("servers", server.url).mode("append").save()
    assert js.stream_info(stream_name).state.messages == 500
    df.write.format("jetstream").option("servers", server.url).mode("append").save()
    assert js.stream_info(stream_name).state.messages == 500
    stored = js.stream(stream_name).get_msg(seq=1)
    assert stored.data.startswith(b"payload-") and stored.headers["Nats-Msg-Id"].startswith("id-")


def test_overwrite_is_refused_rather_than_appended(spark, server, js, stream_name):
    p = stream_name.lower()
    js.create_stream(name=stream_name, subjects=[f"{p}.>"])
    df = spark.createDataFrame([(f"{p}.w", "x")], "subject string, data string")
    with pytest.raises(Exception, match="append-only"):
        df.write.format("jetstream").option("servers", server.url).mode("overwrite").save()
    assert js.stream_info(stream_name).state.messages == 0


def test_write_to_a_subject_no_stream_captures_fails_the_job(spark, server, js):
    df = spark.createDataFrame([("x",)], "data string")
    with pytest.raises(Exception, match="no stream answered|NoResponders"):
        df.write.format("jetstream").option("servers", server.url).option("subject", "nowhere.at.all").mode(
            "append"
        ).option("publishTimeout", "2").save()


def connz(server):
    url = f"http://127.0.0.1:{server.monitor_port}/connz?state=all&limit=10000"
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())["connections"]


@pytest.mark.timeout(180)
def test_foreach_partition_publish(spark, server, js, stream_name):
    from jetstream_sync.spark import publish_partition

    p = stream_name.lower()
    js.create_stream(name=stream_name, subjects=[f"{p}.>"])
    before = {c["cid"] for c in connz(server)}
    total_before = server.varz()["total_connections"]
    df = spark.range(100_000).repartition(8).selectExpr("CAST(id AS STRING) AS data", f"'{p}.fp' AS subject")
    assert df.rdd.getNumPartitions() == 8
    df.foreachPartition(publish_partition(server.url))
    assert js.stream_info(stream_name).state.messages == 100_000
    new = [c for c in connz(server) if c["cid"] not in before and c.get("name", "").startswith("jetstream-sync-spark-")]
    worker_pids = {c["name"].rsplit("-", 1)[1] for c in new}
    assert new and len(new) == len(worker_pids)  # one connection per Python worker process
    assert len(worker_pids) <= 8
    assert server.varz()["total_connections"] - total_before == len(new)  # and no others


def test_pyspark_finds_the_source_by_module_name():
    """pyspark's lookup imports top-level modules named pyspark_* and takes DefaultSource."""
    import pkgutil

    root = Path(__file__).resolve().parents[2]
    assert "pyspark_jetstream" in {m.name for m in pkgutil.iter_modules([str(root)])}
    import pyspark_jetstream

    assert pyspark_jetstream.DefaultSource.name() == "jetstream"


def test_the_install_makes_the_source_visible_to_pyspark_lookup(tmp_path):
    """pyspark's worker scans sys.path with pkgutil.iter_modules(); setuptools'
    import-hook editable installs hid the module from it (package_dir = =.
    in setup.cfg makes the install a path entry). Run outside the checkout."""
    import subprocess
    import sys

    probe = "import pkgutil; print(sorted(m.name for m in pkgutil.iter_modules() if m.name.startswith('pyspark_')))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "pyspark_jetstream" in out.stdout, (out.stdout, out.stderr)



@pytest.mark.timeout(240)
def test_the_readme_pyspark_snippet_runs_as_written(spark, server, js, tmp_path):
    """The README's block, executed verbatim with its free names bound: every
    column it selects exists, the write is idempotent by msg_id, the stream runs."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## PySpark") :]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    js.create_stream(name="ORDERS", subjects=["orders.>"])
    js.create_stream(name="ARCHIVE", subjects=["archive.>"])
    publish(js, "orders.new", 20)
    names = {"spark": spark, "NATS": server.url, "out": str(tmp_path / "out"), "chk": str(tmp_path / "chk")}
    try:
        exec(compile(block, "README.md (PySpark)", "exec"), names)
        names["q"].processAllAvailable()
        archived = js.stream_info("ARCHIVE").state.messages
        orders = js.stream_info("ORDERS").state.messages
    finally:
        if "q" in names:
            names["q"].stop()
        js.delete_stream("ARCHIVE")
        js.delete_stream("ORDERS")
    assert archived == 20  # one copy per source message, keyed by its sequence
    assert orders == 40  # the foreachPartition line published the 20 rows again


def test_kv_lookup_joins_reference_data_in_map_in_pandas(spark, server, js):
    from jetstream_sync.spark import KVLookup

    kv = js.create_key_value(bucket="FX")
    kv.put("EUR", b"1.08")
    kv.put("GBP", b"1.27")
    rates = KVLookup(server.url, "FX")

    def enrich(batches):
        for pdf in batches:
            pdf["rate"] = [float(rates.get(c, b"0")) for c in pdf["currency"]]
            yield pdf

    df = spark.createDataFrame([(i, ("EUR", "GBP", "CHF")[i % 3]) for i in range(300)], "id long, currency string")
    out = df.repartition(3).mapInPandas(enrich, "id long, currency string, rate double").collect()
    assert len(out) == 300
    by_currency = {r.currency: r.rate for r in out}
    assert by_currency == {"EUR": 1.08, "GBP": 1.27, "CHF": 0.0}
