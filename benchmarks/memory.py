"""Memory while consuming: RSS over N messages, and the buffer high-water marks.

    python benchmarks/memory.py [-n 1000000] [--size 128]

Consumes N messages with messages(max_messages=500) + ack, sampling RSS every
50,000 messages (after a 50,000-message warm-up), then reads 3 MB of 1 KB
messages with messages(max_bytes=1 MiB) behind a slow consumer and reports
the largest un-handed buffer seen.
"""

from __future__ import annotations

import argparse
import json
import time

from _common import RESULTS, environment, fill_stream, start_server

import jetstream_sync as jss

MIB = 1024 * 1024


def rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--count", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=128)
    args = ap.parse_args()
    server = start_server()
    try:
        fill_stream(server.url, "MEM", "mem.data", args.count, args.size)
        fill_stream(server.url, "MEMB", "memb.data", 3000, 1000)
        with jss.connect(server.url) as nc:
            js = nc.jetstream()
            cons = js.create_consumer("MEM", durable_name="c", max_ack_pending=-1)
            samples = []
            with cons.messages(max_messages=500) as ctx:
                for i, msg in enumerate(ctx, 1):
                    msg.ack()
                    if i % 50_000 == 0:
                        samples.append((i, rss()))
                    if i == args.count:
                        break
                high_water = ctx.stats.buffered_high_water
            base = samples[0][1]
            growth = max(r for _, r in samples) - base
            print(f"RSS after {samples[0][0]:,}: {base / MIB:.1f} MiB; growth to {args.count:,}: {growth / MIB:.2f} MiB")
            print(f"max_messages=500: largest un-handed buffer {high_water} messages")
            cons_b = js.create_consumer("MEMB", durable_name="c", ack_policy="none")
            with cons_b.messages(max_bytes=MIB) as ctx:
                for i, _ in enumerate(ctx, 1):
                    time.sleep(0.0005)
                    if i == 3000:
                        break
                hw = ctx.stats.buffered_bytes_high_water
            print(f"max_bytes=1 MiB: largest un-handed buffer {hw:,} bytes ({hw / MIB:.3f} MiB)")
    finally:
        server.cleanup()
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "memory.json"
    out.write_text(
        json.dumps(
            {
                "count": args.count,
                "rss_samples": samples,
                "rss_growth_bytes": growth,
                "buffered_high_water_msgs": high_water,
                "buffered_bytes_high_water_max_bytes_1MiB": hw,
                "environment": environment(),
            },
            indent=2,
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
