"""Publish -> handed-to-user latency for a consumer that is waiting.

    python benchmarks/latency.py [-n 300] [--gap 0.01] [--runs 3]

A separate publisher process (nats-py) publishes one message every ``gap``
seconds carrying its send time (CLOCK_REALTIME, ns); the consumer computes
arrival - send when its call returns the message. Contenders:
  (l1) consumer.next() in a loop          (l2) for msg in consumer.messages()
  (l3) nats-py: await psub.fetch(1) in a loop
Reports p50 / p99 in microseconds per contender (median over runs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import textwrap
import time
from typing import Callable, Dict, List

from _common import RESULTS, environment, start_server

import jetstream_sync as jss

STREAM, SUBJECT = "LAT", "lat.data"

PUBLISHER = textwrap.dedent(
    """
    import asyncio, sys, time, nats
    async def main(url, subject, n, gap):
        nc = await nats.connect(url)
        await asyncio.sleep(float(sys.argv[5]))
        for _ in range(n):
            await asyncio.sleep(gap)
            await nc.publish(subject, str(time.time_ns()).encode())
            await nc.flush()
        await nc.close()
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
    """
)


def publisher(url: str, n: int, gap: float, delay: float) -> "subprocess.Popen[bytes]":
    return subprocess.Popen([sys.executable, "-c", PUBLISHER, url, SUBJECT, str(n), str(gap), str(delay)])


def percentiles(values: List[float]) -> Dict[str, float]:
    values = sorted(values)
    return {
        "p50": statistics.median(values),
        "p99": values[min(len(values) - 1, int(len(values) * 0.99))],
        "mean": statistics.fmean(values),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--count", type=int, default=300)
    ap.add_argument("--gap", type=float, default=0.01)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    n = args.count
    server = start_server()
    try:
        nc = jss.connect(server.url)
        js = nc.jetstream()
        js.create_stream(name=STREAM, subjects=[SUBJECT], storage="memory")

        def next_loop(cons: jss.Consumer) -> List[float]:
            out = []
            for _ in range(n):
                msg = cons.next(timeout=10)
                out.append((time.time_ns() - int(msg.data)) / 1000)
                msg.ack()
            return out

        def iterator(cons: jss.Consumer) -> List[float]:
            out = []
            with cons.messages() as it:
                for msg in it:
                    out.append((time.time_ns() - int(msg.data)) / 1000)
                    msg.ack()
                    if len(out) == n:
                        break
            return out

        def natspy(cons: jss.Consumer) -> List[float]:
            import nats

            async def run() -> List[float]:
                anc = await nats.connect(server.url)
                psub = await anc.jetstream().pull_subscribe_bind(durable=cons.name, stream=STREAM)
                out = []
                while len(out) < n:
                    try:
                        msgs = await psub.fetch(1, timeout=10)
                    except nats.errors.TimeoutError:
                        continue
                    for msg in msgs:
                        out.append((time.time_ns() - int(msg.data)) / 1000)
                        await msg.ack()
                await anc.close()
                return out

            return asyncio.run(run())

        contenders: Dict[str, "tuple[str, Callable[[jss.Consumer], List[float]]]"] = {
            "l1": ("next() loop", next_loop),
            "l2": ("messages() iterator", iterator),
            "l3": ("nats-py fetch(1) loop", natspy),
        }
        runs: Dict[str, List[Dict[str, float]]] = {k: [] for k in contenders}
        for run in range(args.runs):
            for k, (label, fn) in contenders.items():
                cons = js.create_consumer(STREAM, durable_name=f"{k}_{run}", deliver_policy="new")
                pub = publisher(server.url, n, args.gap, 0.5)
                stats = percentiles(fn(cons))
                pub.wait(60)
                runs[k].append(stats)
                print(f"  run {run + 1} ({k}) {label:24} p50 {stats['p50']:8.0f} µs  p99 {stats['p99']:8.0f} µs", flush=True)
        nc.close()
    finally:
        server.cleanup()

    summary = {
        k: {q: statistics.median(r[q] for r in runs[k]) for q in ("p50", "p99", "mean")} for k in contenders
    }
    print(f"\nlatency publish -> handed to user, {n} messages x {args.runs} runs (medians)")
    print(f"{'':4} {'contender':24} {'p50 µs':>9} {'p99 µs':>9} {'p50 / nats-py':>14}")
    for k, (label, _) in contenders.items():
        s = summary[k]
        print(f"{k:4} {label:24} {s['p50']:9.0f} {s['p99']:9.0f} {s['p50'] / summary['l3']['p50']:14.2f}")
    ratio = summary["l1"]["p50"] / summary["l3"]["p50"]
    print(f"\ntarget\n  next() p50 <= 1.3 x nats-py: {ratio:5.2f}  {'met' if ratio <= 1.3 else 'NOT met'}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "latency.json"
    out.write_text(json.dumps({"count": n, "gap": args.gap, "runs": runs, "summary": summary, "environment": environment()}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
