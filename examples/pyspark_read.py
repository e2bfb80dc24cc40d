"""A batch read of a stream into a Spark DataFrame (needs the spark extra and Java 17+)."""

import os
import sys

import jetstream_sync as jss
import jetstream_sync.spark as jspark

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
os.environ["PYSPARK_PYTHON"] = sys.executable  # workers run this interpreter (it has pyarrow and this package)

from pyspark.sql import SparkSession  # noqa: E402

with jss.connect(NATS_URL) as nc:  # the stream is made outside Spark
    js = nc.jetstream()
    js.create_stream(name="EX_SPARK", subjects=["ex.spark.>"])
    for i in range(100):
        js.publish_async(f"ex.spark.{'eu' if i % 2 else 'us'}", f'{{"amount": {i}}}'.encode())
    js.publish_async_complete(timeout=10)

spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
try:
    jspark.register(spark)
    df = spark.read.format("jetstream").option("servers", NATS_URL).option("stream", "EX_SPARK").load()
    by_subject = {row["subject"]: row["count"] for row in df.groupBy("subject").count().collect()}
    print(f"spark read {df.count()} messages: {dict(sorted(by_subject.items()))}")
finally:
    spark.stop()
    with jss.connect(NATS_URL) as nc:
        nc.jetstream().delete_stream("EX_SPARK")
