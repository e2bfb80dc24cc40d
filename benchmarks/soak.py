"""Soak: everything at once on a 3-node cluster, with faults, for N minutes.

    python benchmarks/soak.py --minutes 30 [--rate 400] [--seed 1]

Two connections. On the first: a ``publish_async`` producer (unique ids as
``Nats-Msg-Id``), blocking ``js.publish()`` calls every 50 ms (their latency is
the figure), KV puts and gets on an R3 bucket, core requests. On the second:
four consumers of the R3 stream, each on its own durable: ``messages()``,
``consume()`` with a handler that is now and then slow, ``fetch()`` (whose
consumer the faults delete and re-create), and a ``Worker``; and the responder
of the requests. Faults, one every 12-24 s: a server restarted, a server
frozen (SIGSTOP) for 1-3 s, the stream leader SIGKILLed and started again, the
fetch consumer deleted and re-created, a burst of 5 MiB messages.

Every 10 s it records RSS (after the C allocator gave back what it keeps
free, so that buffers freed after a burst do not count), threads, open
descriptors, rates and the p50/p99 of a blocking publish. At the end, with every server back: every acknowledged
publish is in the stream, every consumer got every stored message at least
once (duplicates counted), RSS grew less than 20 MiB after the first minute
(at the end, and in the high-water mark of the second half against the first
half's: 5 MiB messages lift it for a while, a leak for good), threads and
descriptors came back to their first-minute counts, no call ran
past its timeout, and the p99 of a blocking publish outside fault windows
stayed within 2x the first minute's. Exit status 1 when a check fails.
Results go to benchmarks/results/soak-<time>.json (and .png with matplotlib).
"""

from __future__ import annotations

import argparse
import array
import collections
import json
import logging
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jetstream_sync as jss  # noqa: E402
from jetstream_sync.testing import NatsCluster  # noqa: E402
from jetstream_sync.testing.scratch import make_dir  # noqa: E402
from _common import percentile  # noqa: E402

try:  # glibc's: hand the heap's free pages back to the system
    import ctypes

    _malloc_trim = ctypes.CDLL(None).malloc_trim
except (AttributeError, OSError):
    _malloc_trim = None


def held_rss() -> int:
    """Resident bytes after the C allocator gave back the memory it keeps
    free (glibc's malloc_trim; elsewhere plain RSS): what the process holds,
    not what the last burst of 5 MiB messages once needed. A leak is held;
    freed buffers the allocator would keep for reuse are not."""
    if _malloc_trim is not None:
        _malloc_trim(0)  # a ctypes call releases the GIL: the client goes on meanwhile
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS")).split()[1]) * 1024

RESULTS = Path(__file__).resolve().parent / "results"
STREAM, DATA, LAT = "SOAK", "soak.d", "soak.lat"
RPC = "soakrpc.ping"  # outside the stream's subjects: only the responder answers
BIG = 5 * 1024 * 1024
WARMUP = 60.0  # seconds: the baseline is taken at its end
SAMPLE_EVERY = 10.0
SLACK = 1.0  # seconds a blocking call may run past its timeout before it counts as over
CONSUMERS = ("messages", "consume", "fetch", "worker")
FAULTS = ("restart", "pause", "leader_kill", "recreate_consumer", "burst")

log = logging.getLogger("soak")


class Book:
    """What happened, in memory that does not grow with the message count after the
    start: one byte per possible id for what was acknowledged and received."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.acked = bytearray(capacity)
        self.got = {name: bytearray(capacity) for name in CONSUMERS}
        self.deliveries = collections.Counter()  # consumer -> messages handed over, duplicates included
        self.errors = collections.Counter()  # "where: ExceptionType" -> count
        self.first_error = {}  # "where: ExceptionType" -> its first message
        self.over_timeout = collections.Counter()  # call -> calls that ran past timeout + SLACK
        self.lat = array.array("d")  # blocking publish latencies, seconds
        self.lat_at = array.array("d")  # when each ended (monotonic)
        self.faults = []  # (start, end, what)
        self.lock = threading.Lock()

    def error(self, where: str, exc: BaseException) -> None:
        key = f"{where}: {type(exc).__name__}"
        with self.lock:
            self.errors[key] += 1
            self.first_error.setdefault(key, str(exc)[:200])

    def timed(self, what: str, timeout: float, started: float) -> None:
        if time.monotonic() - started > timeout + SLACK:
            with self.lock:
                self.over_timeout[what] += 1

    def received(self, name: str, data: bytes) -> None:
        n = int(data[: data.index(b"|")])
        got = self.got[name]
        if got[n] < 255:
            got[n] += 1
        self.deliveries[name] += 1


def payload(n: int, size: int) -> bytes:
    head = b"%d|" % n
    return head + b"x" * max(size - len(head), 0)


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.stop = threading.Event()
        self.stop_producing = threading.Event()
        self.book = Book(int(args.rate * args.minutes * 60 * 1.5) + 100_000)
        self.next_id = 0
        self.id_lock = threading.Lock()
        self.threads = []
        self.samples = []

    def new_id(self) -> int:
        with self.id_lock:
            self.next_id += 1
            return self.next_id

    # -- set-up -------------------------------------------------------------------

    def setup(self, cluster: NatsCluster) -> None:
        opts = dict(reconnect_time_wait=0.2, max_reconnect_attempts=-1, name="soak")
        self.a = jss.connect(cluster.urls, **opts)
        self.b = jss.connect(cluster.urls, **opts)
        self.js = self.a.jetstream(timeout=5)
        self.jsb = self.b.jetstream(timeout=5)
        deadline = time.monotonic() + 60
        while True:  # a fresh cluster may answer before its meta leader can place a stream
            try:
                self.js.create_stream(name=STREAM, subjects=["soak.>"], num_replicas=3, duplicate_window=120,
                                      max_msg_size=BIG + 1024)
                self.kv = self.js.create_key_value(bucket="SOAKKV", replicas=3)
                for name in CONSUMERS:
                    self.js.create_consumer(STREAM, durable_name=name, ack_policy="explicit", ack_wait=10,
                                            filter_subject=DATA)
                break
            except jss.JetStreamError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def spawn(self, name: str, fn) -> None:
        t = threading.Thread(target=self.guard, args=(name, fn), name=f"soak-{name}", daemon=True)
        t.start()
        self.threads.append(t)

    def guard(self, name: str, fn) -> None:
        while not self.stop.is_set():
            try:
                fn()
                return
            except Exception as exc:  # a loop that failed starts again; the error is counted
                self.book.error(name, exc)
                self.stop.wait(0.5)

    # -- the first connection -----------------------------------------------------------

    def produce(self) -> None:
        interval = 100 / self.args.rate  # rounds of 100
        retry = []
        while not self.stop_producing.is_set():
            started = time.monotonic()
            ids = retry + [self.new_id() for _ in range(100 - len(retry))]
            retry = []
            futures = [(n, self.js.publish_async(DATA, payload(n, 256), msg_id=str(n))) for n in ids]
            for n, f in futures:
                try:
                    f.result(timeout=10 + SLACK)
                    self.book.acked[n] = 1
                except Exception as exc:
                    self.book.error("publish_async", exc)
                    retry.append(n)  # the same id again: stored once at most
            self.book.timed("publish_async", 10, started)
            self.stop_producing.wait(max(interval - (time.monotonic() - started), 0))

    def blocking_publishes(self) -> None:
        book = self.book
        while not self.stop_producing.wait(0.05):
            t0 = time.monotonic()
            try:
                self.js.publish(LAT, b"x" * 128, timeout=5)
            except jss.JetStreamError as exc:
                book.error("publish", exc)
            t1 = time.monotonic()
            book.timed("publish", 5, t0)
            with book.lock:
                book.lat.append(t1 - t0)
                book.lat_at.append(t1)

    def kv_ops(self) -> None:
        rng = random.Random(self.args.seed + 1)
        while not self.stop_producing.wait(0.02):
            key = f"k{rng.randrange(10)}"
            t0 = time.monotonic()
            try:
                if rng.random() < 0.5:
                    self.kv.put(key, b"v%d" % rng.randrange(10**6))
                else:
                    self.kv.get(key)
            except jss.KeyNotFoundError:
                pass
            except jss.JetStreamError as exc:
                self.book.error("kv", exc)
            self.book.timed("kv", 5, t0)

    def requests(self) -> None:
        while not self.stop_producing.wait(0.02):
            t0 = time.monotonic()
            try:
                if self.a.request(RPC, b"ping", timeout=2).data != b"pong":
                    self.book.error("request", ValueError("wrong reply"))
            except jss.JetStreamError as exc:
                self.book.error("request", exc)
            self.book.timed("request", 2, t0)

    # -- the second connection ----------------------------------------------------------

    def read_messages(self) -> None:
        cons = self.jsb.consumer(STREAM, "messages")
        with cons.messages(max_messages=500) as it:
            while not self.stop.is_set():
                try:
                    msg = it.next(timeout=1)
                except jss.TimeoutError:
                    continue
                self.book.received("messages", msg.data)
                msg.ack()

    def read_consume(self) -> None:
        rng = random.Random(self.args.seed + 2)

        def handler(msg) -> None:
            if rng.random() < 0.0005:
                time.sleep(rng.uniform(1, 2))  # a slow handler: the buffered ones must survive it
            self.book.received("consume", msg.data)
            msg.ack()

        cc = self.jsb.consumer(STREAM, "consume").consume(
            handler, max_messages=200, error_handler=lambda exc: self.book.error("consume", exc)
        )
        self.stop.wait()
        cc.stop()
        cc.wait(10)

    def read_fetch(self) -> None:
        while not self.stop.is_set():
            try:
                cons = self.jsb.consumer(STREAM, "fetch")
                t0 = time.monotonic()
                for msg in cons.fetch(200, expires=2):
                    self.book.received("fetch", msg.data)
                    msg.ack()
                self.book.timed("fetch", 2 + 5, t0)  # expires plus one JetStream timeout
            except jss.JetStreamError as exc:  # deleted by a fault, a leader moving
                self.book.error("fetch", exc)
                self.stop.wait(0.2)

    def read_worker(self) -> None:
        def handler(msg) -> None:
            self.book.received("worker", msg.data)

        worker = jss.Worker(handler, stream=STREAM, consumer="worker", client=self.b, concurrency=2,
                            stats_interval=None, signals=())
        stopper = threading.Thread(target=lambda: (self.stop.wait(), worker.stop()), name="soak-stopper", daemon=True)
        stopper.start()
        status = worker.run()
        if status != 0 and not self.stop.is_set():  # it logged why; counted, and the guard starts a new one
            raise RuntimeError(f"the Worker returned {status} (could not consume, or a fatal error)")

    def responder(self) -> None:
        self.sub = self.b.subscribe(RPC, cb=lambda msg: msg.respond(b"pong"))

    # -- faults ---------------------------------------------------------------------

    def faults(self, cluster: NatsCluster) -> None:
        rng = self.rng
        kinds = list(FAULTS)
        self.stop_producing.wait(20)
        self.fault(cluster, "burst")  # one during the warm-up: the baseline has seen 5 MiB buffers
        order: list = []
        while not self.stop_producing.wait(rng.uniform(12, 24)):
            if not order:  # every kind once per round, in a random order
                order = rng.sample(kinds, len(kinds))
            self.fault(cluster, order.pop())

    def fault(self, cluster: NatsCluster, kind: str) -> None:
        rng, t0 = self.rng, time.monotonic()
        try:
            if kind == "restart":
                rng.choice(cluster.servers).restart()
            elif kind == "pause":
                with rng.choice(cluster.servers).paused():
                    time.sleep(rng.uniform(1, 3))
            elif kind == "leader_kill":
                leader = self.js.stream_info(STREAM).cluster.leader
                node = cluster.server(leader)
                node.kill()
                time.sleep(1)
                node.start()
            elif kind == "recreate_consumer":
                self.js.delete_consumer(STREAM, "fetch")
                self.js.create_consumer(STREAM, durable_name="fetch", ack_policy="explicit", ack_wait=10,
                                        filter_subject=DATA)
            elif kind == "burst":
                for _ in range(5):
                    n = self.new_id()
                    self.js.publish(DATA, payload(n, BIG), msg_id=str(n), timeout=10)
                    self.book.acked[n] = 1
        except Exception as exc:
            self.book.error(f"fault {kind}", exc)
        self.book.faults.append((t0, time.monotonic(), kind))
        log.info("fault %s (%.1fs)", kind, time.monotonic() - t0)

    # -- sampling -------------------------------------------------------------------

    def sample(self, start: float, last: dict) -> None:
        now = time.monotonic()
        book = self.book
        with book.lock:
            acked = sum(book.acked[: self.next_id + 1])
            window = [v for v, t in zip(book.lat, book.lat_at) if t > now - SAMPLE_EVERY]
        # the client's threads: every Python thread but the main one, this harness's own (soak-*)
        # and the test kit's launcher (it forks the servers a fault restarts from a thread)
        names = sorted(t.name for t in threading.enumerate()
                       if not t.name.startswith("soak-") and t.name != "jetstream-sync-launcher"
                       and t is not threading.main_thread())
        rss = held_rss()
        row = {
            "t": round(now - start, 1),
            "rss_mib": round(rss / 2**20, 2),
            "threads": len(names),
            "thread_names": names,
            "os_threads": len(os.listdir("/proc/self/task")),
            "fds": len(os.listdir("/proc/self/fd")),
            "acked": acked,
            "delivered": dict(book.deliveries),
            "publish_p50_ms": round(statistics.median(window) * 1e3, 2) if window else None,
            "publish_p99_ms": round(percentile(window, 0.99) * 1e3, 2) if window else None,
            "in_fault": any(f0 - 1 < now and f1 + 5 > now - SAMPLE_EVERY for f0, f1, _ in book.faults),
        }
        row["acked_per_s"] = round((acked - last.get("acked", 0)) / SAMPLE_EVERY)
        last.update(row)
        self.samples.append(row)
        log.info("%s", {k: row[k] for k in ("t", "rss_mib", "threads", "fds", "acked", "publish_p99_ms", "in_fault")})

    # -- the run ----------------------------------------------------------------------

    def run(self) -> int:
        store = make_dir("jss-soak-")  # removed when the run ends, killed runs too
        config = os.path.join(store, "soak.conf")
        with open(config, "w") as f:
            f.write("max_payload: 8MB\n")
        with NatsCluster(3, store_root=store, config=config) as cluster:
            self.setup(cluster)
            start = time.monotonic()
            self.responder()
            for name, fn in [("produce", self.produce), ("publish", self.blocking_publishes), ("kv", self.kv_ops),
                             ("request", self.requests), ("messages", self.read_messages),
                             ("consume", self.read_consume), ("fetch", self.read_fetch),
                             ("worker", self.read_worker)]:
                self.spawn(name, fn)
            faults = threading.Thread(target=self.faults, args=(cluster,), name="soak-faults", daemon=True)
            faults.start()
            last: dict = {}
            end = start + self.args.minutes * 60
            while time.monotonic() < end:
                time.sleep(min(SAMPLE_EVERY, max(end - time.monotonic(), 0)))
                self.sample(start, last)
            self.stop_producing.set()
            faults.join(60)
            for s in cluster.servers:  # every server back for the final count
                if not s.running:
                    s.start()
            caught_up = self.wait_caught_up(180)
            self.sample(start, last)  # after the load: threads and descriptors back?
            self.stop.set()
            for t in self.threads:
                t.join(30)
            stored = self.stored()
            self.sub.unsubscribe()
            self.a.close()
            self.b.close()
        return self.report(start, stored, caught_up)

    def wait_caught_up(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                infos = [self.js.consumer_info(STREAM, name) for name in CONSUMERS]
                if all(i.num_pending == 0 and i.num_ack_pending == 0 for i in infos):
                    return True
            except jss.JetStreamError as exc:
                self.book.error("catch-up", exc)
            time.sleep(1)
        return False

    def stored(self) -> bytearray:
        """One byte per id: in the stream now (read with an ordered consumer)."""
        have = bytearray(self.book.capacity)
        total = self.js.stream_info(STREAM, subjects_filter=DATA).state.subjects.get(DATA, 0)
        oc = self.js.ordered_consumer(STREAM, filter_subjects=[DATA])
        with oc.messages(max_messages=500) as it:
            for _ in range(total):
                msg = it.next(timeout=30)
                have[int(msg.data[: msg.data.index(b"|")])] = 1
        return have

    def report(self, start: float, stored: bytearray, caught_up: bool) -> int:
        book, samples = self.book, self.samples
        n = self.next_id + 1
        acked, have = book.acked[:n], stored[:n]
        lost = sum(1 for a, s in zip(acked, have) if a and not s)
        missing = {name: sum(1 for g, s in zip(book.got[name][:n], have) if s and not g) for name in CONSUMERS}
        dups = {name: book.deliveries[name] - sum(1 for g in book.got[name][:n] if g) for name in CONSUMERS}
        base = next((s for s in samples if s["t"] >= WARMUP), samples[0])
        after = [s for s in samples if s["t"] >= base["t"]]
        final = samples[-1]
        # Growth, not excursions: 5 MiB messages lift RSS for a while (buffers
        # the allocator keeps), a leak lifts it for good. Two measures: the end
        # (idle, caught up) against the first minute, and the high-water mark of
        # the run's second half against its first half's.
        rss_growth = final["rss_mib"] - base["rss_mib"]
        middle = (base["t"] + final["t"]) / 2
        first_half = max(s["rss_mib"] for s in after if s["t"] <= middle)
        second_half = max((s["rss_mib"] for s in after if s["t"] > middle), default=first_half)
        peak = max(s["rss_mib"] for s in after) - base["rss_mib"]
        in_fault = [(f0 - 1, f1 + 5) for f0, f1, _ in book.faults]

        def p99(lo: float, hi: float) -> float:
            vals = [v for v, t in zip(book.lat, book.lat_at)
                    if lo <= t - start < hi and not any(a <= t <= b for a, b in in_fault)]
            return percentile(vals, 0.99) * 1e3 if vals else float("nan")

        p99_first, p99_later = p99(0, WARMUP), p99(WARMUP, float("inf"))
        checks = {
            "every consumer caught up": caught_up,
            "0 acknowledged publishes lost": lost == 0,
            "every consumer got every stored message": not any(missing.values()),
            "RSS growth after the first minute < 20 MiB (at the end)": rss_growth < 20,
            "RSS high-water of the second half < the first half's + 20 MiB": second_half - first_half < 20,
            "threads back to the first-minute count": final["threads"] <= base["threads"],
            "descriptors back to the first-minute count": final["fds"] <= base["fds"],
            "no call past its timeout": not book.over_timeout,
            "every kind of fault ran": {kind for _, _, kind in book.faults} >= set(FAULTS),
            "p99 of a blocking publish outside faults <= 2x the first minute's": p99_later <= 2 * p99_first,
        }
        summary = {
            "minutes": self.args.minutes, "rate": self.args.rate, "seed": self.args.seed,
            "published": n - 1, "acknowledged": sum(acked), "stored": sum(have), "lost": lost,
            "missing": missing, "duplicates": dups, "rss_growth_mib": round(rss_growth, 2),
            "rss_high_water_mib": {"first_half": first_half, "second_half": second_half},
            "rss_peak_over_baseline_mib": round(peak, 2),
            "baseline": {k: base[k] for k in ("t", "rss_mib", "threads", "thread_names", "fds")},
            "final": {k: final[k] for k in ("t", "rss_mib", "threads", "thread_names", "fds")},
            "publish_p99_ms_first_minute": round(p99_first, 2), "publish_p99_ms_after": round(p99_later, 2),
            "over_timeout": dict(book.over_timeout), "errors": dict(book.errors), "first_errors": book.first_error,
            "faults": collections.Counter(kind for _, _, kind in book.faults),
            "checks": checks, "samples": samples,
        }
        RESULTS.mkdir(exist_ok=True)
        out = RESULTS / f"soak-{time.strftime('%Y%m%d-%H%M%S')}.json"
        out.write_text(json.dumps(summary, indent=1, default=str))
        plot(samples, out.with_suffix(".png"))
        print(json.dumps({k: v for k, v in summary.items() if k != "samples"}, indent=1, default=str))
        for name, ok in checks.items():
            print(f"{'ok  ' if ok else 'FAIL'} {name}")
        print(f"results: {out}")
        return 0 if all(checks.values()) else 1


def plot(samples, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    t = [s["t"] / 60 for s in samples]
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(8, 5))
    ax1.plot(t, [s["rss_mib"] for s in samples])
    ax1.set_ylabel("RSS (MiB)")
    ax2.plot(t, [s["publish_p99_ms"] for s in samples], label="p99")
    ax2.plot(t, [s["publish_p50_ms"] for s in samples], label="p50")
    for s in samples:
        if s["in_fault"]:
            ax2.axvspan(s["t"] / 60 - SAMPLE_EVERY / 60, s["t"] / 60, color="orange", alpha=0.2, lw=0)
    ax2.set_ylabel("blocking publish (ms)")
    ax2.set_xlabel("minutes (shaded: a fault in the window)")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--rate", type=float, default=400.0, help="publish_async messages per second (default 400)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("jetstream_sync").setLevel(logging.CRITICAL)  # the faults make them talk; counted instead
    logging.getLogger("jetstream_sync.worker").setLevel(logging.ERROR)  # why a Worker ended (rare)
    return Soak(args).run()


if __name__ == "__main__":
    sys.exit(main())
