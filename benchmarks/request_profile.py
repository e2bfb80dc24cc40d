"""What one blocking request (or JetStream publish) is made of, one at a time:
wall time per call next to the CPU the calling thread and the loop thread
spend on it, and the bare thread hand-off (no NATS) that every call through
a loop thread pays twice.

    python benchmarks/request_profile.py [--count 5000] [--size 128]

Rows: ours (nc.request, js.publish); nats-py awaited in asyncio (no hand-off);
nats-py from a loop thread (run_coroutine_threadsafe(...).result()).
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from typing import Callable, Dict, List

from _common import start_server
from publish import SERVICE, handoff_round_trip, percentile, start_responder

import jetstream_sync as jss

SUBJECT = "prof.js"


def loop_thread_cpu(ident: int) -> float:
    """CPU seconds of thread ``ident`` (Linux: /proc/self/task/<tid>/stat)."""
    import os

    with open(f"/proc/self/task/{ident}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(count: int, call: Callable[[], object], loop_tid: int) -> Dict[str, float]:
    lat: List[float] = []
    loop0, own0 = loop_thread_cpu(loop_tid), time.thread_time()
    for _ in range(count):
        t = time.perf_counter()
        call()
        lat.append(time.perf_counter() - t)
    return {
        "p50_us": percentile(lat, 0.5) * 1e6,
        "p99_us": percentile(lat, 0.99) * 1e6,
        "caller_cpu_us": (time.thread_time() - own0) / count * 1e6,
        "loop_cpu_us": (loop_thread_cpu(loop_tid) - loop0) / count * 1e6,
    }


def in_threads(count: int, call: Callable[[], object], loop_tid: int, threads: int = 8) -> Dict[str, float]:
    """``count`` calls over ``threads`` threads: wall per call (not latency),
    the loop thread's CPU per call and the whole process's CPU per call; the
    loop's share tells whether that one thread is what limits the rate."""
    loop0, proc0, t0 = loop_thread_cpu(loop_tid), time.process_time(), time.perf_counter()
    workers = [threading.Thread(target=lambda: [call() for _ in range(count // threads)]) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - t0
    done = count // threads * threads
    loop = loop_thread_cpu(loop_tid) - loop0
    return {"p50_us": wall / done * 1e6, "p99_us": float("nan"), "caller_cpu_us": (time.process_time() - proc0 - loop) / done * 1e6,
            "loop_cpu_us": loop / done * 1e6, "loop_busy": loop / wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=5_000)
    ap.add_argument("--size", type=int, default=128)
    args = ap.parse_args()
    payload = b"x" * args.size
    server = start_server()
    responder = start_responder(server.url)
    rows: Dict[str, Dict[str, float]] = {}
    try:
        nc = jss.connect(server.url)
        js = nc.jetstream()
        js.create_stream(name="PROF", subjects=[SUBJECT])
        tid = nc.run_async(lambda _c: _native_id())
        rows["ours nc.request()"] = timed(args.count, lambda: nc.request(SERVICE, payload, timeout=5), tid)
        rows["ours js.publish()"] = timed(args.count, lambda: js.publish(SUBJECT, payload), tid)
        rows["ours js.publish(), 8 threads"] = in_threads(args.count, lambda: js.publish(SUBJECT, payload), tid)

        import nats

        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        anc = asyncio.run_coroutine_threadsafe(nats.connect(server.url), loop).result(10)
        ajs = anc.jetstream()
        ltid = asyncio.run_coroutine_threadsafe(_anative_id(), loop).result(5)

        def via(coro_fn: Callable[[], object]) -> Callable[[], object]:
            return lambda: asyncio.run_coroutine_threadsafe(coro_fn(), loop).result(10)  # type: ignore[arg-type]

        rows["nats-py request() from a loop thread"] = timed(
            args.count, via(lambda: anc.request(SERVICE, payload, timeout=5)), ltid)
        rows["nats-py js.publish() from a loop thread"] = timed(args.count, via(lambda: ajs.publish(SUBJECT, payload)), ltid)
        asyncio.run_coroutine_threadsafe(anc.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)

        async def awaited() -> None:
            c = await nats.connect(server.url)
            j = c.jetstream()
            for name, make in (("request()", lambda: c.request(SERVICE, payload, timeout=5)),
                               ("js.publish()", lambda: j.publish(SUBJECT, payload))):
                lat = []
                own0 = time.thread_time()
                for _ in range(args.count):
                    t = time.perf_counter()
                    await make()
                    lat.append(time.perf_counter() - t)
                rows[f"nats-py await {name}"] = {
                    "p50_us": percentile(lat, 0.5) * 1e6, "p99_us": percentile(lat, 0.99) * 1e6,
                    "caller_cpu_us": (time.thread_time() - own0) / args.count * 1e6, "loop_cpu_us": 0.0}
            await c.close()

        asyncio.run(awaited())
        nc.close()
    finally:
        responder.kill()
        server.cleanup()
    hand = handoff_round_trip()
    print(f"{args.count:,} calls x {args.size} B, one at a time")
    print(f"{'':44} {'p50 µs':>8} {'p99 µs':>8} {'caller CPU µs':>14} {'loop CPU µs':>12}")
    for name, r in rows.items():
        busy = f"   loop thread busy {r['loop_busy']:.0%} (p50 column: wall per call)" if "loop_busy" in r else ""
        print(f"{name:44} {r['p50_us']:8.0f} {r['p99_us']:8.0f} {r['caller_cpu_us']:14.1f} {r['loop_cpu_us']:12.1f}{busy}")
    print(f"{'bare hand-off to a loop thread and back':44} {hand['p50']:8.0f} {hand['p99']:8.0f}")


def _native_id() -> "asyncio.Future[int]":
    fut: "asyncio.Future[int]" = asyncio.get_running_loop().create_future()
    fut.set_result(threading.get_native_id())
    return fut


async def _anative_id() -> int:
    return threading.get_native_id()


if __name__ == "__main__":
    main()
