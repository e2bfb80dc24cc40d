"""What Python's garbage collector costs ``publish_async`` when the caller keeps
its futures (as publish.py and nats.go's anchor do, to read every PubAck).

One process, one connection: ``--rounds`` times, ``-n`` publishes with the
collector on, then the same with it off (``gc.disable()``), each into a purged
file-storage stream, every future kept and its ``result().seq`` read. Prints
the medians per mode: messages/s, client CPU per message (both threads), and
the time the collector's passes took (``gc.callbacks``).

    python benchmarks/gc_cost.py                # 30,000 publishes, 10 rounds
    python benchmarks/gc_cost.py -n 200000 --rounds 5

To compare with an older checkout, run it with ``PYTHONPATH=<that worktree>``.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import start_server  # noqa: E402

import jetstream_sync as jss  # noqa: E402

SUBJECT = "gc.cost"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--count", type=int, default=30_000, help="publishes per round and mode")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    in_gc = [0.0, 0.0]  # seconds in the collector, the start of the current pass

    def timing(phase: str, info: Dict[str, int]) -> None:
        if phase == "start":
            in_gc[1] = time.perf_counter()
        else:
            in_gc[0] += time.perf_counter() - in_gc[1]

    server = start_server()
    results: Dict[str, List[Tuple[float, float, float]]] = {"on": [], "off": []}
    try:
        with jss.connect(server.url, name="gc-cost") as nc:
            js = nc.jetstream()
            stream = js.create_stream(name="GCCOST", subjects=[SUBJECT])
            payload = b"x" * 128
            publish = js.publish_async
            for _ in range(2000):  # warm up: the reply subscription, the first window
                publish(SUBJECT, payload)
            js.publish_async_complete(timeout=30)
            gc.callbacks.append(timing)
            try:
                for _ in range(args.rounds):
                    for mode in ("on", "off"):
                        stream.purge()  # no gc.collect() here: the collector's state carries over, as in an app
                        if mode == "off":
                            gc.disable()
                        in_gc[0] = 0.0
                        wall, cpu = time.perf_counter(), time.process_time()
                        futures = [publish(SUBJECT, payload) for _ in range(args.count)]
                        if not js.publish_async_complete(timeout=120):
                            raise RuntimeError("PubAcks did not arrive")
                        assert all(f.result().seq for f in futures)
                        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                        gc.enable()
                        del futures
                        results[mode].append((args.count / wall, cpu / args.count * 1e6, in_gc[0] * 1e3))
            finally:
                gc.callbacks.remove(timing)
    finally:
        server.cleanup()
    print(f"publish_async {args.count:,} x 128 B, futures kept and read, {args.rounds} rounds alternated (medians)")
    for mode, rows in results.items():
        rate, cpu, spent = (statistics.median(r[i] for r in rows) for i in range(3))
        print(f"  collector {mode:3}  {rate:10,.0f} msgs/s  {cpu:5.2f} µs CPU/msg  {spent:6.1f} ms in gc passes")


if __name__ == "__main__":
    main()
