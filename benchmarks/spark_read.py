"""Spark batch read of a stream on local[2], beside single-process messages().

    python benchmarks/spark_read.py [-n 1000000] [--size 128] [--runs 3] [--partitions 4]

Both read the same stream in the same run: (s1) spark.read.format("jetstream")
with N partitions, counted and summed on Spark; (s2) one process iterating
consumer.messages() with ack_policy none. Medians of the runs; the first
Spark query (worker start-up, JIT) is run once beforehand and not counted.
"""

from __future__ import annotations

import argparse
import os
import sys

from _common import Meter, Result, fill_stream, print_table, save, start_server

import jetstream_sync as jss

STREAM, SUBJECT = "SPARK", "spark.data"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--count", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    n = args.count
    server = start_server()
    spark = None
    try:
        fill_stream(server.url, STREAM, SUBJECT, n, args.size)
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        from jetstream_sync.spark import register

        register(spark)
        meter = Meter(server)
        df = (
            spark.read.format("jetstream").option("servers", server.url).option("stream", STREAM)
            .option("minPartitions", str(args.partitions)).load()
        )
        df.limit(10).count()  # warm-up: Python workers, JIT
        nc = jss.connect(server.url)
        js = nc.jetstream()
        results = {
            "s1": Result("s1", f"Spark read, local[2], {args.partitions} partitions", n, args.size),
            "s2": Result("s2", "one process, messages(), ack_policy none", n, args.size),
        }
        for run in range(args.runs):
            with meter:
                row = df.selectExpr("count(*) AS n", "sum(length(data)) AS b").first()
            assert row.n == n, row
            results["s1"].samples.append(meter.sample)
            cons = js.create_consumer(STREAM, ack_policy="none", inactive_threshold=60.0)
            with meter:
                got = 0
                with cons.messages() as it:
                    for _ in it:
                        got += 1
                        if got == n:
                            break
            results["s2"].samples.append(meter.sample)
            for k in ("s1", "s2"):
                s = results[k].samples[-1]
                print(f"  run {run + 1} ({k}) {results[k].label:44} {n / s.seconds:10,.0f} rows/s", flush=True)
        nc.close()
    finally:
        if spark is not None:
            spark.stop()
        server.cleanup()
    ordered = list(results.values())
    print_table(f"read {n:,} x {args.size} B, medians of {args.runs}", ordered, {"s2": "s2"})
    print("(client CPU for s1 counts only the driver process, not Spark's workers)")
    save("spark_read", {"count": n, "size": args.size, "runs": args.runs, "partitions": args.partitions}, ordered,
         f"Read {n:,} x {args.size} B from JetStream (median of {args.runs})")


if __name__ == "__main__":
    main()
