"""Publish and request, like for like: jetstream_sync against nats.go's jetstream
package and nats-py 2.16, one server, one run, contenders interleaved.

    MIRRORS=/path/to/git-mirrors python benchmarks/publish.py [-n 30000] [--size 128] [--runs 3]

Every PubAck is checked. Pairs (ours | peer):
  (pa) js.publish_async(), max 4000 pending, then publish_async_complete()
       | (gpa) nats.go jetstream PublishAsync, max 4000 pending, PublishAsyncComplete
       | (npa) nats-py js.publish_async() (max 4000 pending), publish_async_completed()
  (ps) js.publish(), one at a time, one thread  | (nps) nats-py await js.publish() each
  (rq) nc.request() one at a time, one thread   | (nrq) nats-py await nc.request() each
       (both against the same responder: a separate nats-py process)
The one-at-a-time pairs also report the latency of each call (p50, p99): what a
Flask or Django request handler that publishes or asks a service waits.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import textwrap
import time
from typing import Callable, Dict, List, Optional

from _common import (Meter, Result, Sample, build_go, percentile, print_pairs, print_table, run_go, save,
                     start_server)

import jetstream_sync as jss

STREAM, SUBJECT, SERVICE = "PUB", "pub.data", "svc.echo"

RESPONDER = textwrap.dedent(
    """
    import asyncio, sys, nats
    async def main(url, subject):
        nc = await nats.connect(url)
        async def echo(msg):
            await msg.respond(msg.data)
        await nc.subscribe(subject, cb=echo)
        await nc.flush()
        print("ready", flush=True)
        await asyncio.Event().wait()
    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)

LATENCY: Dict[str, List[float]] = {}  # contender -> per-call seconds of its last run


def handoff_round_trip(count: int = 3000) -> Dict[str, float]:
    """p50/p99 µs of the bare hand-off every blocking call pays: a thread asks an
    asyncio loop thread to resolve a future and waits for it (no NATS at all)."""
    import concurrent.futures
    import threading

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    lat = []
    for _ in range(count):
        future: concurrent.futures.Future[int] = concurrent.futures.Future()
        t0 = time.perf_counter()
        loop.call_soon_threadsafe(future.set_result, 1)
        future.result()
        lat.append(time.perf_counter() - t0)
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    return {"p50": percentile(lat, 0.5) * 1e6, "p99": percentile(lat, 0.99) * 1e6}


def parse_args(doc: str, count: int, count_help: str) -> argparse.Namespace:
    """The options of the publish / request benchmarks."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--count", type=int, default=count, help=count_help)
    ap.add_argument("--sync-count", type=int, default=5_000, help="calls of the one-at-a-time pairs per run")
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", help="comma-separated contender keys")
    return ap.parse_args()


def start_responder(url: str) -> "subprocess.Popen[str]":
    """The echo responder (nats-py, another process) every request contender asks."""
    responder = subprocess.Popen([sys.executable, "-c", RESPONDER, url, SERVICE], stdout=subprocess.PIPE, text=True)
    assert responder.stdout is not None and responder.stdout.readline().strip() == "ready"
    return responder


def main() -> None:
    args = parse_args(__doc__, 30_000, "publishes per run of the async pairs")
    n, ns, payload = args.count, args.sync_count, b"x" * args.size

    server = start_server()
    responder = start_responder(server.url)
    try:
        nc = jss.connect(server.url, name="bench")
        js = nc.jetstream()
        stream = js.create_stream(name=STREAM, subjects=[SUBJECT])
        go_bin, go_note = build_go("jetstream")
        meter = Meter(server)

        def timed(fn: Callable[[], None]) -> Callable[[str], Sample]:
            def run(tag: str) -> Sample:
                with meter:
                    fn()
                return meter.sample

            return run

        def ours_async() -> None:
            futures = [js.publish_async(SUBJECT, payload) for _ in range(n)]
            if not js.publish_async_complete(timeout=120):
                raise RuntimeError("PubAcks did not arrive")
            assert all(f.result().seq for f in futures)

        def ours_sync(key: str, call: Callable[[], object]) -> Callable[[], None]:
            def run() -> None:
                lat = []
                clock = time.perf_counter
                for _ in range(ns):
                    t = clock()
                    call()
                    lat.append(clock() - t)
                LATENCY[key] = lat

            return run

        def natspy(key: str, mode: str) -> Callable[[], None]:
            import nats

            def run() -> None:
                async def go() -> None:
                    anc = await nats.connect(server.url)
                    ajs = anc.jetstream()
                    if mode == "async":
                        futures = [await ajs.publish_async(SUBJECT, payload) for _ in range(n)]
                        await asyncio.wait_for(ajs.publish_async_completed(), 120)
                        for f in futures:
                            assert f.result().seq
                    else:
                        lat = []
                        clock = time.perf_counter
                        for _ in range(ns):
                            t = clock()
                            if mode == "sync":
                                await ajs.publish(SUBJECT, payload)
                            else:
                                await anc.request(SERVICE, payload, timeout=5)
                            lat.append(clock() - t)
                        LATENCY[key] = lat
                    await anc.close()

                asyncio.run(go())

            return run

        go_async: Optional[Callable[[str], Sample]] = None
        if go_bin:
            go_async = lambda tag: run_go(go_bin, ["publish-async", server.url, SUBJECT, str(n), str(args.size), "4000"], meter)  # noqa: E731

        contenders: Dict[str, "tuple[str, Optional[Callable[[str], Sample]]]"] = {
            "pa": ("publish_async(), 4000 pending, + complete", timed(ours_async)),
            "gpa": ("nats.go PublishAsync, 4000 pending, + complete", go_async),
            "npa": ("nats-py publish_async(), 4000 pending, + completed", timed(natspy("npa", "async"))),
            "ps": ("publish(), one at a time", timed(ours_sync("ps", lambda: js.publish(SUBJECT, payload)))),
            "nps": ("nats-py await js.publish(), one at a time", timed(natspy("nps", "sync"))),
            "rq": ("request(), one at a time", timed(ours_sync("rq", lambda: nc.request(SERVICE, payload, timeout=5)))),
            "nrq": ("nats-py await nc.request(), one at a time", timed(natspy("nrq", "request"))),
        }
        if args.only:
            keep = set(args.only.split(","))
            contenders = {k: v for k, v in contenders.items() if k in keep}
        counts = {k: (ns if k in ("ps", "nps", "rq", "nrq") else n) for k in contenders}
        results = {k: Result(k, label, counts[k], args.size) for k, (label, _) in contenders.items()}
        for k, (_, fn) in contenders.items():
            if fn is None:
                results[k].note = go_note
        print(f"{n:,} async / {ns:,} one-at-a-time x {args.size} B, {args.runs} runs; Go: {go_note}")
        latency_runs: Dict[str, List[Dict[str, float]]] = {}

        for run in range(args.runs):
            for key, (label, fn) in contenders.items():
                if fn is None:
                    continue
                stream.purge()
                sample = fn(f"{key}{run}")
                results[key].samples.append(sample)
                line = f"  run {run + 1} ({key}) {label:52} {counts[key] / sample.seconds:10,.0f} msgs/s"
                if key in LATENCY:
                    lat = LATENCY.pop(key)
                    stats = {"p50": percentile(lat, 0.5) * 1e6, "p99": percentile(lat, 0.99) * 1e6}
                    latency_runs.setdefault(key, []).append(stats)
                    line += f"  p50 {stats['p50']:6.0f} µs  p99 {stats['p99']:6.0f} µs"
                print(line, flush=True)
        nc.close()
    finally:
        responder.kill()
        server.cleanup()

    ordered: List[Result] = list(results.values())
    print_table(f"publish / request x {args.size} B, medians of {args.runs}", ordered)
    latency = {k: {q: statistics.median(r[q] for r in v) for q in ("p50", "p99")} for k, v in latency_runs.items()}
    if latency:
        print("\nlatency per call (medians of the runs)")
        for k, v in latency.items():
            print(f"  ({k:3}) {results[k].label:52} p50 {v['p50']:6.0f} µs  p99 {v['p99']:6.0f} µs")
    handoff = handoff_round_trip()
    print(f"\na bare hand-off to an asyncio loop thread and back (no NATS): p50 {handoff['p50']:.0f} µs, "
          f"p99 {handoff['p99']:.0f} µs")
    if "nps" in latency:
        best = latency["nps"]["p50"] / (latency["nps"]["p50"] + handoff["p50"])
        print(f"  so a blocking publish through a loop thread is at best {best:.2f}x nats-py's p50 here")
    pairs = [
        ("(pa) publish_async / nats.go PublishAsync", "pa", "gpa", 0.95),
        ("(pa) publish_async / nats-py publish_async", "pa", "npa", 4.0),
        ("(ps) publish() / nats-py await publish(), throughput", "ps", "nps", 0.9),
        ("(rq) request() / nats-py await request(), throughput", "rq", "nrq", 0.9),
    ]
    ratios = print_pairs(results, pairs)
    for ours, peer in (("ps", "nps"), ("rq", "nrq")):
        if ours in latency and peer in latency:
            # Latency: a lower figure is better, so the ratio is peer / ours (>= 0.9 wanted).
            value = latency[peer]["p50"] / latency[ours]["p50"]
            ratios[f"{ours}/{peer} p50"] = value
            state = "met" if value >= 0.9 else "NOT met"
            print(f"  ({ours}) p50 latency, nats-py p50 / ours{'':29} {value:6.2f}  goal >= 0.9: {state}")
    save("publish", {"count": n, "sync_count": ns, "size": args.size, "runs": args.runs, "go": go_note,
                     "ratios": ratios, "latency_us": latency, "handoff_us": handoff}, ordered,
         f"publish / request, {args.size} B (median of {args.runs})")


if __name__ == "__main__":
    main()
