"""What a KVLookup lookup costs once its process's copy is loaded, against a
plain dict read (the floor) and a kv.get() round trip to the server.

    python benchmarks/kv_lookup.py [-n 200000] [--runs 5] [--keys 1000]

One process, a bucket of ``--keys`` keys, ``-n`` lookups of keys in turn per
run; µs per call, the median of the runs (a kv.get() run makes n / 100 calls).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, Dict, List

from _common import start_server

import jetstream_sync as jss
from jetstream_sync.spark import KVLookup
from jetstream_sync.spark._clients import close_all


def per_call(fn: Callable[[str], object], keys: List[str], n: int) -> float:
    t = time.perf_counter()
    for i in range(n):
        fn(keys[i % len(keys)])
    return (time.perf_counter() - t) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--count", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keys", type=int, default=1000)
    args = ap.parse_args()
    server = start_server()
    try:
        with jss.connect(server.url) as nc:
            kv = nc.jetstream().create_key_value(bucket="RATES")
            keys = [f"k{i}" for i in range(args.keys)]
            plain: Dict[str, bytes] = {}
            for k in keys:
                kv.put(k, b"1.08")
                plain[k] = b"1.08"
            lookup = KVLookup(server.url, "RATES")
            lookup.get(keys[0])  # the first lookup reads the bucket
            rows: Dict[str, List[float]] = {"dict.get": [], "KVLookup.get": [], "kv.get (server round trip)": []}
            for _ in range(args.runs):  # interleaved
                rows["dict.get"].append(per_call(plain.get, keys, args.count))
                rows["KVLookup.get"].append(per_call(lookup.get, keys, args.count))
                rows["kv.get (server round trip)"].append(per_call(kv.get, keys, max(args.count // 100, 100)))
        print(f"µs per lookup, {args.keys} keys, median of {args.runs} runs")
        for name, values in rows.items():
            print(f"  {name:30} {statistics.median(values):9.3f}")
    finally:
        close_all()
        server.cleanup()


if __name__ == "__main__":
    main()
