"""publish_async of this checkout against another one, interleaved: did a change help?

    git worktree add /tmp/old <commit>
    python benchmarks/ab_publish.py --old /tmp/old [--rounds 5] [-n 30000] [--no-read]

Each round runs both codes in turn, each in a fresh process importing its own
``jetstream_sync`` (via PYTHONPATH), against one nats-server: ``n`` x 128 B
``publish_async`` calls, then ``publish_async_complete()``, then every future's
``result()`` (with ``--no-read``, the results are left unread: fire and forget).
Prints the median msgs/s and the client's CPU per message of each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STREAM, SUBJECT = "ABPUB", "abpub.data"


def child(url: str, n: int, read: bool) -> None:
    import jetstream_sync as jss

    with jss.connect(url) as nc:
        js = nc.jetstream()
        for f in [js.publish_async(SUBJECT, b"x" * 128) for _ in range(500)]:  # warm up
            f.result()
        t0, c0 = time.perf_counter(), time.process_time()
        futures = [js.publish_async(SUBJECT, b"x" * 128) for _ in range(n)]
        if not js.publish_async_complete(timeout=120):
            raise RuntimeError("PubAcks did not arrive")
        if read:
            assert all(f.result().seq for f in futures)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"rate": n / wall, "cpu_us": cpu / n * 1e6}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", help="a checkout of the code to compare with (required)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", "--count", type=int, default=30_000)
    ap.add_argument("--no-read", action="store_true", help="leave the futures' results unread")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        url, n, read = args.child
        child(url, int(n), read == "read")
        return
    if not args.old:
        ap.error("--old is required")

    sys.path.insert(0, str(HERE))
    from _common import start_server

    import jetstream_sync as jss

    codes = {"this": str(HERE.parent), "old": str(Path(args.old).resolve())}
    server = start_server()
    try:
        with jss.connect(server.url) as nc:
            nc.jetstream().create_stream(name=STREAM, subjects=[SUBJECT], max_msgs=100_000)
        samples: dict = {tag: [] for tag in codes}
        mode = "noread" if args.no_read else "read"
        for _ in range(args.rounds):
            for tag, path in codes.items():
                env = dict(os.environ, PYTHONPATH=path)
                cmd = [sys.executable, __file__, "--child", server.url, str(args.count), mode]
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=True)
                samples[tag].append(json.loads(out.stdout))
    finally:
        server.cleanup()
    print(f"publish_async {args.count:,} x 128 B, results {'not read' if args.no_read else 'read'}, "
          f"{args.rounds} rounds interleaved (medians)")  # fmt: skip
    for tag, rows in samples.items():
        rate = statistics.median(r["rate"] for r in rows)
        cpu = statistics.median(r["cpu_us"] for r in rows)
        print(f"  {tag:5} {codes[tag]:40} {rate:10,.0f} msgs/s  {cpu:6.2f} µs CPU/msg")


if __name__ == "__main__":
    main()
