"""Options as a data engineer types them: a misspelled one fails the driver's
load()/save() (a streaming sink's: its first micro-batch, the first call Spark
makes to it) naming the closest known option, never read silently with
defaults; register() is quiet."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def read(spark, streaming, options):
    reader = (spark.readStream if streaming else spark.read).format("jetstream")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def write(spark, streaming, options, tmp_path):
    if streaming:
        writer = spark.readStream.format("rate").load().selectExpr("CAST(value AS STRING) AS data").writeStream
        writer = writer.option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True)
    else:
        writer = spark.createDataFrame([("x",)], "data string").write.mode("append")
    writer = writer.format("jetstream")
    for key, value in options.items():
        writer = writer.option(key, value)
    if not streaming:
        return writer.save()
    # Spark builds a streaming sink only for the first micro-batch, in the
    # query's thread: nothing of the data source runs in start().
    query = writer.start()
    try:
        query.awaitTermination(60)
    finally:
        query.stop()
    if query.exception() is not None:
        raise query.exception()


# (where it fails, the misspelled option and its value, the option meant)
MISSPELLED = [
    ("load", {"subject": "a.>"}, "subjects"),
    ("load", {"startingOffset": "earliest"}, "startingOffsets"),
    ("load", {"endingOffset": '{"seq": 5}'}, "endingOffsets"),
    ("load", {"minPartition": "4"}, "minPartitions"),
    ("load", {"failOnDataLos": "false"}, "failOnDataLoss"),
    ("load", {"tls.cafile": "/etc/ca.pem"}, "tls.ca"),
    ("load", {"passwd": "pw"}, "password"),
    ("readStream.load", {"subject": "a.>"}, "subjects"),
    ("readStream.load", {"startingOffset": "earliest"}, "startingOffsets"),
    ("readStream.load", {"maxOffsetPerTrigger": "100"}, "maxOffsetsPerTrigger"),
    ("readStream.load", {"maxOffsetsPerTriger": "100"}, "maxOffsetsPerTrigger"),
    ("readStream.load", {"consumr": "jobs"}, "consumer"),
    ("readStream.load", {"createConsumers": "true", "consumer": "jobs"}, "createConsumer"),
    ("save", {"subjects": "out.x"}, "subject"),
    ("save", {"publishTimout": "5"}, "publishTimeout"),
    ("writeStream first batch", {"subjects": "out.x"}, "subject"),
    ("writeStream first batch", {"msgIdPrefx": "job"}, "msgIdPrefix"),
]


@pytest.mark.timeout(240)
def test_misspelled_options_fail_at_load_save_start_with_a_did_you_mean(spark, server, tmp_path):
    wrong = []
    for n, (where, typo, meant) in enumerate(MISSPELLED):
        streaming = "Stream" in where
        options = {"servers": server.url, **typo}
        try:
            if where.endswith("load"):
                read(spark, streaming, {"stream": "ANY", **options})
            else:
                write(spark, streaming, options if meant == "subject" else {"subject": "out.x", **options}, tmp_path / str(n))
        except Exception as exc:
            text = str(exc)
            key = next(iter(typo)).lower()
            if f"unknown option '{key}'" not in text or f"did you mean '{meant}'?" not in text:
                wrong.append(f"{where} {typo}: {text[-500:]}")
        else:
            wrong.append(f"{where} {typo}: accepted")
    assert not wrong, "\n".join(wrong)


@pytest.mark.timeout(120)
def test_server_instead_of_servers_reads_nothing_from_localhost(spark, server):
    """``.option("server", url)`` once fell back to nats://127.0.0.1:4222."""
    with pytest.raises(Exception, match=r"unknown option 'server'.*did you mean 'servers'\?"):
        read(spark, False, {"server": server.url, "stream": "ANY"})
    with pytest.raises(Exception, match=r"option 'servers' is required"):
        read(spark, False, {"stream": "ANY"})
    with pytest.raises(Exception, match=r"option 'servers' is required"):
        spark.createDataFrame([("x",)], "data string").write.format("jetstream").option("subject", "a.b").mode("append").save()


@pytest.mark.timeout(120)
def test_a_bad_value_names_its_option_at_load(spark, server):
    with pytest.raises(Exception, match=r"""endingOffsets='\{"seq":"x"\}': the sequence must be an integer >= 1"""):
        read(spark, False, {"servers": server.url, "stream": "ANY", "endingOffsets": '{"seq":"x"}'})
    with pytest.raises(Exception, match=r"option 'stream' is required"):
        read(spark, False, {"servers": server.url})


@pytest.mark.timeout(120)
def test_an_option_of_the_other_kind_of_read_fails_the_query(spark, server, js, stream_name, tmp_path):
    """endingOffsets is batch-only; Spark asks for the stream reader when the query runs."""
    js.create_stream(name=stream_name, subjects=[f"{stream_name.lower()}.>"])
    df = read(spark, True, {"servers": server.url, "stream": stream_name, "endingOffsets": "5"})
    query = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    try:
        query.awaitTermination(60)
    except Exception:
        pass  # raised by awaitTermination or kept in exception(), by Spark version
    assert query.exception() is not None
    assert "'endingOffsets' is an option of spark.read only" in str(query.exception())
    with pytest.raises(Exception, match=r"'maxOffsetsPerTrigger' is an option of spark.readStream only"):
        read(spark, False, {"servers": server.url, "stream": stream_name, "maxOffsetsPerTrigger": "5"}).count()


@pytest.mark.timeout(180)
def test_register_as_the_guide_says_prints_no_warning(tmp_path):
    """A driver of its own at Spark's default log level (WARN; the test session's
    hides WARNs), whose Python finds this checkout, so Spark's static lookup
    finds ``pyspark_jetstream`` as it does for an installed package:
    register() once and again leaves that registration alone and prints no
    warning, and the format works."""
    script = textwrap.dedent(
        """
        import os, sys
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        from pyspark.sql import SparkSession
        import jetstream_sync.spark as jspark
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
        jspark.register(spark)
        jspark.register(spark)
        try:
            spark.read.format("jetstream").load().schema
        except Exception as exc:
            print("=== load:", " | ".join(str(exc).splitlines()), file=sys.stderr, flush=True)
        print("=== registered", file=sys.stderr, flush=True)
        spark.dataSource.register(jspark.JetStreamDataSource)  # what register() avoids: Spark warns
        print("=== control", file=sys.stderr, flush=True)
        spark.stop()
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=150, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    registered, _, control = out.stderr.partition("=== registered")
    assert 'default log level to "WARN"' in registered, registered[-3000:]
    assert "replaced a" not in registered, registered[-3000:]  # neither "statically" nor "previously registered"
    load = registered.partition("=== load:")[2]
    assert "InvalidOptionError" in load and "DATA_SOURCE_NOT_FOUND" not in load, load  # our source refused the read
    assert "replaced a statically registered data source" in control.partition("=== control")[0], control[-3000:]
