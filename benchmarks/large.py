"""Message size from 128 B to 8 MiB: jetstream_sync against nats-py, like for like.

    python benchmarks/large.py [--sizes 128,16384,1048576,8388608] [--mib 192] [--runs 3]

For each size the stream holds about ``--mib`` MiB (at least 16 and at most
100,000 messages), file storage. Both sides pull the same batch — 500
messages, or as many as fit in 16 MiB — and ack every message:
  (m) messages(max_messages=B) + ack  |  (n) nats-py pull_subscribe().fetch(B) + ack
The server runs with max_payload 16 MiB. Time per byte should be flat: the
table gives µs per MiB for each size.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Callable, Dict, List, Tuple

from _common import Meter, Result, Sample, fill_stream, print_pairs, print_table, run_rounds, save
from consume import STREAM, SUBJECT, natspy_fetch, new_consumer

import jetstream_sync as jss
from jetstream_sync.testing import NatsServer

MIB = 1024 * 1024


def batch_for(size: int) -> int:
    return max(1, min(500, (16 * MIB) // size))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=f"128,16384,{MIB},{8 * MIB}")
    ap.add_argument("--mib", type=int, default=192, help="MiB in the stream per size")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    conf.write("max_payload: 16MB\nmax_pending: 64MB\n")
    conf.close()
    server = NatsServer(config=conf.name).start()
    all_results: List[Result] = []
    pairs: List[Tuple[str, str, str, float]] = []
    try:
        nc = jss.connect(server.url, name="bench")
        js = nc.jetstream()
        meter = Meter(server)
        for size in sizes:
            n = max(16, min(100_000, args.mib * MIB // size))
            batch = batch_for(size)
            fill_stream(server.url, STREAM, SUBJECT, n, size)

            def ours(tag: str, n: int = n, batch: int = batch) -> Sample:
                cons = new_consumer(js, tag, True)
                got = 0
                with meter:
                    with cons.messages(max_messages=batch) as it:
                        for msg in it:
                            msg.ack()
                            got += 1
                            if got == n:
                                break
                    nc.flush()
                return meter.sample

            def peer(tag: str, n: int = n, batch: int = batch) -> Sample:
                cons = new_consumer(js, tag, True)
                with meter:
                    natspy_fetch(server.url, cons.name, n, True, batch)
                return meter.sample

            label = f"{size:,} B"
            contenders: Dict[str, "tuple[str, Callable[[str], Sample]]"] = {
                f"m{size}": (f"{label}: messages(max_messages={batch}) + ack", ours),
                f"n{size}": (f"{label}: nats-py fetch({batch}) + ack", peer),
            }
            results = {k: Result(k, lbl, n, size) for k, (lbl, _) in contenders.items()}
            print(f"\n{n:,} x {size:,} B, batch {batch}, {args.runs} runs", flush=True)
            run_rounds(contenders, results, args.runs, n)
            all_results.extend(results.values())
            pairs.append((f"{label}: messages() / nats-py fetch", f"m{size}", f"n{size}", 1.0))
            js.delete_stream(STREAM)
        nc.close()
    finally:
        server.cleanup()
        os.unlink(conf.name)

    print_table(f"consume + ack by message size, medians of {args.runs}", all_results)
    print("\ntime per MiB (flat is the goal)")
    for r in all_results:
        print(f"  {r.label:52} {1.048576e6 / r.mbps if r.mbps else float('nan'):10,.0f} µs/MiB")
    by_key = {r.name: r for r in all_results}
    ratios = print_pairs(by_key, pairs)
    save("large", {"sizes": sizes, "runs": args.runs, "ratios": ratios}, all_results,
         f"consume + ack by message size (median of {args.runs})")


if __name__ == "__main__":
    main()
