"""Spark read and write of a stream on local[2], against the ceiling of
Spark's Python data source path and against the client alone.

    python benchmarks/spark_read.py [read] [-n 200000] [--size 200] [--runs 3] [--partitions 2]
    python benchmarks/spark_read.py write [-n 200000] [--size 200] [--runs 3]
    python benchmarks/spark_read.py first [-n 200000] [--size 200] [--runs 3]

``read`` (one SparkSession, every contender once per run, interleaved):
  (a1) a trivial Python data source, same schema, yielding tuples built in memory;
  (a2) the same yielding pyarrow RecordBatches built in memory (the ceiling:
       the fastest a Python data source gets rows into Spark here);
  (b)  spark.read.format("jetstream") over the same rows stored in a stream;
  (c)  one process iterating consumer.messages() with ack_policy none.
  Each Spark query is ``count(*), sum(length(data))`` (every row and its data
  cross into the JVM). The first query of each source runs once beforehand
  and is not counted (see ``first``).
``write``: the same rows (a DataFrame cached in the JVM) published by
  (w0) nothing: a foreachPartition that only iterates its Rows (Spark's cost
       of handing Rows to Python, the ceiling of any foreachPartition publisher),
  (w1) df.write.format("jetstream"), (w2) df.foreachPartition(publish_partition),
  (w3) js.publish_async in one process, every PubAck checked; a fresh stream each time,
  (w4) df.write.format("jetstream") with exactlyOnce=true (atomic batches of 999 rows
       behind a progress marker per partition).
``first``: for each source, a fresh SparkSession in its own process (no
  Spark or Python worker warm): the first query's seconds and the median of
  the next three. The two sources alternate; medians of the runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from _common import Meter, Result, fill_stream, print_pairs, print_table, save, start_server

import jetstream_sync as jss

STREAM, SUBJECT = "SPARK", "spark.data"
OUT_STREAM, OUT_SUBJECT = "SPARKOUT", "spark.out"
PROGRESS = "spark.progress"  # the exactly-once writer's markers


def _tree_cpu(exclude: int) -> Tuple[float, float]:
    """CPU seconds used so far by this process and every process below it
    (the JVM, Spark's Python daemon and workers), except the subtree of
    ``exclude`` (nats-server, measured on its own), and the part of it
    used by Spark's Python daemon and workers (where a reader runs). Linux /proc."""
    parent: Dict[int, int] = {}
    cpu: Dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        pid = int(entry)
        parent[pid] = int(fields[1])
        cpu[pid] = sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    me, total, workers = os.getpid(), 0.0, 0.0
    for pid, seconds in cpu.items():
        p = pid
        while p not in (0, 1, me, exclude) and p in parent:
            p = parent[p]
        if p == me:
            total += seconds
            if pid != me and _is_python_worker(pid):
                workers += seconds
    return total, workers


def _is_python_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"pyspark." in f.read()  # pyspark.daemon and the workers it forks
    except OSError:
        return False


class TreeMeter(Meter):
    """Wall time, CPU of this process tree (driver, JVM, Python workers) and of nats-server.

    Spark's figures as rows/s swing with whatever else runs on the machine;
    CPU per row hardly does, so it is the steadier comparison on a shared box."""

    def __enter__(self) -> "TreeMeter":
        super().__enter__()
        self._tree, self._workers = _tree_cpu(self.server.pid)
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        tree, workers = _tree_cpu(self.server.pid)
        self.sample.client_cpu = tree - self._tree
        self.sample.workers_cpu = workers - self._workers  # type: ignore[attr-defined]


def _memory_source(n: int, size: int, parts: int, arrow: bool) -> Any:
    """A DataSource class (pickled by value with this module's __main__) that
    yields ``n`` rows of the jetstream schema from memory in ``parts`` partitions."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from jetstream_sync.spark import SCHEMA

    class MemReader(DataSourceReader):
        def partitions(self) -> List[InputPartition]:
            edges = [1 + round(i * n / parts) for i in range(parts + 1)]
            return [InputPartition((a, b)) for a, b in zip(edges, edges[1:])]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            import datetime

            a, b = partition.value
            payload = b"x" * size
            if not arrow:
                ts = datetime.datetime(2026, 11, 27, tzinfo=datetime.timezone.utc)
                for seq in range(a, b):
                    yield ("SPARK", "spark.data", seq, payload, None, ts)
                return
            import pyarrow as pa

            schema = pa.schema([  # the jetstream schema, without importing jetstream_sync here
                pa.field("stream", pa.string(), False), pa.field("subject", pa.string(), False),
                pa.field("seq", pa.int64(), False), pa.field("data", pa.binary(), True),
                pa.field("headers", pa.map_(pa.string(), pa.string()), True),
                pa.field("timestamp", pa.timestamp("us", tz="UTC"), False),
            ])
            for lo in range(a, b, 10_000):
                hi = min(lo + 10_000, b)
                k = hi - lo
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(["SPARK"] * k, pa.string()),
                        pa.array(["spark.data"] * k, pa.string()),
                        pa.array(range(lo, hi), pa.int64()),
                        pa.array([payload] * k, pa.binary()),
                        pa.nulls(k, pa.map_(pa.string(), pa.string())),
                        pa.array([1_795_000_000_000_000] * k, pa.timestamp("us", tz="UTC")),
                    ],
                    schema=schema,
                )

    name = "memrows_arrow" if arrow else "memrows_tuples"

    class MemSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def schema(self) -> Any:
            return SCHEMA

        def reader(self, schema: Any) -> MemReader:
            return MemReader()

    return MemSource


def _session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def _running() -> Iterator[Tuple[Any, Any]]:
    """A nats-server and a local[2] SparkSession; Spark stops first (its
    workers' cached clients would otherwise reconnect to a server gone)."""
    server = start_server()
    spark = None
    try:
        spark = _session()
        yield spark, server
    finally:
        if spark is not None:
            spark.stop()
        server.cleanup()


def _frames(spark: Any, url: str, n: int, size: int, parts: int, extra: Dict[str, str]) -> Dict[str, Any]:
    from jetstream_sync.spark import register

    register(spark)
    spark.dataSource.register(_memory_source(n, size, parts, arrow=False))
    spark.dataSource.register(_memory_source(n, size, parts, arrow=True))
    return {
        "a1": spark.read.format("memrows_tuples").load(),
        "a2": spark.read.format("memrows_arrow").load(),
        "b": spark.read.format("jetstream").option("servers", url).option("stream", STREAM)
        .option("minPartitions", str(parts)).options(**extra).load(),
    }


def _query(df: Any, n: int, size: int) -> None:
    row = df.selectExpr("count(*) AS n", "sum(length(data)) AS b").first()
    assert (row.n, row.b) == (n, n * size), row


def _interleave(
    runs: Dict[str, Callable[[], None]], results: Dict[str, Result], meter: Meter, rounds: int,
    before: Callable[[], None] = lambda: None, check: Callable[[str], bool] = lambda key: True,
) -> None:
    """Every contender once per round, in the same order: drift hits all alike."""
    for run in range(rounds):
        for key, fn in runs.items():
            before()
            with meter:
                fn()
            assert check(key), key
            r = results[key]
            r.samples.append(meter.sample)
            print(f"  run {run + 1} {r.label:72} {r.count / meter.sample.seconds:10,.0f} rows/s", flush=True)


def _round_ratios(results: Dict[str, Result], pairs: List[Tuple[str, str]]) -> None:
    """Per round (the two ran minutes apart at most): ours/peer in rows/s and
    in CPU per row, then the median over rounds."""
    print("\nper-round ratios (median over rounds): rows/s ours/peer | CPU per row ours/peer")
    for ours, peer in pairs:
        a, b = results[ours].samples, results[peer].samples
        speed = statistics.median(y.seconds / x.seconds for x, y in zip(a, b))
        cpu = statistics.median(x.client_cpu / y.client_cpu for x, y in zip(a, b) if y.client_cpu)
        print(f"  ({ours}) / ({peer}): {speed:5.2f} | {cpu:5.2f}   rounds: "
              + " ".join(f"{y.seconds / x.seconds:.2f}" for x, y in zip(a, b)))


def _cpu_note() -> None:
    print("client µs: CPU per row of this process and all below it (Spark's JVM and Python workers), "
          "not nats-server's; a steadier figure than rows/s on a loaded machine")


def _report(
    args: argparse.Namespace, results: Dict[str, Result], mode: str, title: str,
    pairs: List[Tuple[str, str, str, Optional[float]]], rounds: Optional[List[Tuple[str, str]]] = None,
) -> None:
    """The table, the ratios (per round too: ``rounds``, default every pair), the CPU note, the saved results."""
    ordered = list(results.values())
    print_table(title, ordered)
    print_pairs(results, pairs)
    _round_ratios(results, rounds if rounds is not None else [(a, b) for _, a, b, _ in pairs])
    _cpu_note()
    save(f"spark_{mode}", {"count": args.count, "size": args.size, "runs": args.runs, "partitions": args.partitions},
         ordered, f"Spark {mode} {args.count:,} x {args.size} B, local[2] (median of {args.runs})")


def read(args: argparse.Namespace) -> None:
    n, size = args.count, args.size
    labels = {
        "a1": f"(a1) Python data source, tuples from memory, {args.partitions} partitions",
        "a2": f"(a2) Python data source, Arrow batches from memory, {args.partitions} partitions",
        "b": f"(b) spark.read.format('jetstream'), {args.partitions} partitions",
        "c": "(c) one process, consumer.messages(), ack_policy none",
    }
    results = {k: Result(k, v, n, size) for k, v in labels.items()}
    with _running() as (spark, server):
        fill_stream(server.url, STREAM, SUBJECT, n, size)
        frames = _frames(spark, server.url, n, size, args.partitions, _extra(args))
        for df in frames.values():
            _query(df, n, size)  # the first query of each: Python workers, JIT
        meter = TreeMeter(server)
        nc = jss.connect(server.url)
        js = nc.jetstream()

        def consume() -> None:
            cons = js.create_consumer(STREAM, ack_policy="none", inactive_threshold=60.0)
            got = 0
            with cons.messages() as it:
                for _ in it:
                    got += 1
                    if got == n:
                        break
            cons.delete()

        runs: Dict[str, Callable[[], None]] = {k: (lambda df=df: _query(df, n, size)) for k, df in frames.items()}
        runs["c"] = consume
        _interleave(runs, results, meter, args.runs)
        nc.close()
    _report(args, results, "read", f"read {n:,} x {size} B, local[2], medians of {args.runs} interleaved runs", [
        ("(b) jetstream / (a2) Arrow from memory (the ceiling)", "b", "a2", 0.5),
        ("(b) jetstream / (a1) tuples from memory", "b", "a1", 0.8),
        ("(b) jetstream / (c) messages() in one process", "b", "c", None),
    ])
    print("\nCPU µs per row in Spark's Python daemon and workers (the readers), medians:")
    for key in ("a1", "a2", "b"):
        r = results[key]
        print(f"  {r.label:72} {statistics.median(s.workers_cpu for s in r.samples) / n * 1e6:5.2f}")


def _drain(rows: Iterator[Any]) -> None:
    for _ in rows:
        pass


def write(args: argparse.Namespace) -> None:
    n, size = args.count, args.size
    labels = {
        "w0": "(w0) df.foreachPartition(no-op): Spark's Row path alone",
        "w1": "(w1) df.write.format('jetstream')",
        "w2": "(w2) df.foreachPartition(publish_partition(...))",
        "w3": "(w3) one process, js.publish_async, every PubAck checked",
        "w4": "(w4) df.write.format('jetstream'), exactlyOnce=true",
    }
    results = {k: Result(k, v, n, size) for k, v in labels.items()}
    with _running() as (spark, server):
        from jetstream_sync.spark import publish_partition, register

        register(spark)
        df = spark.range(n, numPartitions=args.partitions).selectExpr(
            f"'{OUT_SUBJECT}' AS subject", f"cast(repeat('x', {size}) AS binary) AS data"
        ).cache()
        assert df.count() == n
        meter = TreeMeter(server)
        nc = jss.connect(server.url)
        js = nc.jetstream()

        def fresh() -> None:
            if OUT_STREAM in js.stream_names():
                js.delete_stream(OUT_STREAM)
            js.create_stream(name=OUT_STREAM, subjects=[OUT_SUBJECT, f"{PROGRESS}.>"], allow_atomic=True)

        def stored() -> int:  # the rows, not the progress markers
            return js.stream_info(OUT_STREAM, subjects_filter=OUT_SUBJECT).state.subjects.get(OUT_SUBJECT, 0)

        def w1() -> None:
            df.write.format("jetstream").option("servers", server.url).mode("append").save()

        def w2() -> None:
            df.foreachPartition(publish_partition(server.url))

        def w3() -> None:
            payload = b"x" * size
            futures = [js.publish_async(OUT_SUBJECT, payload) for _ in range(n)]
            for f in futures:
                f.result(timeout=60)

        def w0() -> None:
            df.foreachPartition(_drain)

        def w4() -> None:
            (df.write.format("jetstream").option("servers", server.url).option("exactlyOnce", "true")
             .option("progressSubject", PROGRESS).option("writeId", "bench").mode("append").save())

        runs = {"w0": w0, "w1": w1, "w2": w2, "w3": w3, "w4": w4}
        for key in ("w0", "w1", "w2", "w4"):  # the first job of each: Python workers, JIT
            fresh()
            runs[key]()
        _interleave(runs, results, meter, args.runs, before=fresh, check=lambda key: key == "w0" or stored() == n)
        nc.close()
    title = f"write {n:,} x {size} B, local[2], {args.partitions} partitions, medians of {args.runs} interleaved runs"
    _report(args, results, "write", title, [
        ("(w1) df.write / (w3) publish_async in one process", "w1", "w3", 0.8),
        ("(w2) foreachPartition / (w3) publish_async in one process", "w2", "w3", 0.8),
        ("(w0) foreachPartition doing nothing / (w3) publish_async in one process", "w0", "w3", None),
        ("(w2) foreachPartition publishing / (w0) foreachPartition doing nothing", "w2", "w0", None),
        ("(w4) df.write exactlyOnce / (w1) df.write", "w4", "w1", None),
    ], rounds=[("w1", "w3"), ("w2", "w3"), ("w0", "w3"), ("w4", "w1")])


def first_child(args: argparse.Namespace) -> None:
    """One fresh session: seconds of the first and the next three queries of one source."""
    spark = _session()
    try:
        t = time.perf_counter()
        df = _frames(spark, args.url, args.count, args.size, args.partitions, _extra(args))[args.source]
        setup = time.perf_counter() - t
        times = []
        for _ in range(4):
            t = time.perf_counter()
            _query(df, args.count, args.size)
            times.append(time.perf_counter() - t)
    finally:
        spark.stop()
    print(json.dumps({"setup": setup, "times": times}))


def first(args: argparse.Namespace) -> None:
    n, size = args.count, args.size
    server = start_server()
    out: Dict[str, List[Tuple[float, float, float]]] = {"a2": [], "b": []}
    try:
        fill_stream(server.url, STREAM, SUBJECT, n, size)
        for run in range(args.runs):
            for source in ("a2", "b") if run % 2 == 0 else ("b", "a2"):
                proc = subprocess.run(
                    [sys.executable, __file__, "first-child", "--source", source, "--url", server.url,
                     "-n", str(n), "--size", str(size), "--partitions", str(args.partitions),
                     *(f"--option={kv}" for kv in args.option)],
                    capture_output=True, text=True, check=True,
                )
                got = json.loads(proc.stdout.strip().splitlines()[-1])
                later = statistics.median(got["times"][1:])
                out[source].append((got["setup"], got["times"][0], later))
                print(f"  run {run + 1} ({source}) load() {got['setup']:.2f} s, first query {got['times'][0]:.2f} s, "
                      f"later {later:.2f} s", flush=True)
    finally:
        server.cleanup()
    print(f"\nfirst query of a fresh local[2] session vs later ones, {n:,} x {size} B, medians of {args.runs}")
    print(f"{'source':44} {'load() s':>9} {'first s':>8} {'later s':>8} {'first - later':>14}")
    for source, label in (("a2", "(a2) Arrow batches from memory"), ("b", "(b) jetstream")):
        s, f, later = (statistics.median(x[i] for x in out[source]) for i in range(3))
        print(f"{label:44} {s:9.2f} {f:8.2f} {later:8.2f} {f - later:14.2f}")


def _extra(args: argparse.Namespace) -> Dict[str, str]:
    return dict(kv.split("=", 1) for kv in args.option)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", nargs="?", default="read", choices=["read", "write", "first", "first-child"])
    ap.add_argument("-n", "--count", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--source", default="b")
    ap.add_argument("--url", default="")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra option of the jetstream reader (b), e.g. fetchBatch=5000")
    args = ap.parse_args()
    {"read": read, "write": write, "first": first, "first-child": first_child}[args.mode](args)


if __name__ == "__main__":
    main()
