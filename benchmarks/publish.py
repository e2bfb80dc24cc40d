"""Publish throughput with every PubAck checked: jetstream_sync against nats-py and nats.go.

    python benchmarks/publish.py [-n 30000] [--size 128] [--runs 3]

  (p1) js.publish(), one acknowledged publish at a time
  (p2) js.publish_async(), windowed (4000 in flight), then publish_async_complete()
  (p3) nats-py: await js.publish() for each message
  (p4) nats.go PublishAsync (window 4000) when Go and Debian's nats.go are installed
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Callable, Dict, List

from _common import Meter, Result, Sample, build_go, print_table, run_go, run_rounds, save, start_server

import jetstream_sync as jss

STREAM, SUBJECT = "PUB", "pub.data"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--count", type=int, default=30_000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    n, payload = args.count, b"x" * args.size

    server = start_server()
    try:
        nc = jss.connect(server.url, name="bench")
        js = nc.jetstream()
        stream = js.create_stream(name=STREAM, subjects=[SUBJECT])
        go_bin, go_note = build_go("publish")
        meter = Meter(server)

        def sync_publish() -> None:
            for _ in range(n):
                js.publish(SUBJECT, payload)

        def async_publish() -> None:
            futures = [js.publish_async(SUBJECT, payload) for _ in range(n)]
            assert js.publish_async_complete(timeout=120)
            assert all(f.result().seq for f in futures)

        def natspy_publish() -> None:
            import nats

            async def run() -> None:
                anc = await nats.connect(server.url)
                ajs = anc.jetstream()
                for _ in range(n):
                    await ajs.publish(SUBJECT, payload)
                await anc.close()

            asyncio.run(run())

        def timed(fn: Callable[[], None]) -> Callable[[str], Sample]:
            def run(tag: str) -> Sample:
                with meter:
                    fn()
                return meter.sample

            return run

        contenders: Dict[str, "tuple[str, Callable[[str], Sample] | None]"] = {
            "p1": ("publish(), one at a time", timed(sync_publish)),
            "p2": ("publish_async(), window 4000", timed(async_publish)),
            "p3": ("nats-py await js.publish() each", timed(natspy_publish)),
            "p4": ("nats.go PublishAsync, window 4000", (lambda tag: run_go(go_bin, [server.url, SUBJECT, str(n), str(args.size)], meter)) if go_bin else None),
        }
        results = {k: Result(k, label, n, args.size) for k, (label, _) in contenders.items()}
        results["p4"].note = "" if go_bin else go_note
        print(f"{n:,} x {args.size} B, {args.runs} runs; Go: {go_note}")
        run_rounds(contenders, results, args.runs, n, before=stream.purge)
        nc.close()
    finally:
        server.cleanup()

    ordered: List[Result] = list(results.values())
    print_table(f"publish {n:,} x {args.size} B, medians of {args.runs}", ordered, {"p3": "p3", "p4": "p4"})
    ratio = results["p2"].rate / results["p3"].rate if results["p3"].samples else float("nan")
    print(f"\ntarget\n  publish_async >= 10 x nats-py await-each: {ratio:6.2f}  {'met' if ratio >= 10 else 'NOT met'}")
    save("publish", {"count": n, "size": args.size, "runs": args.runs, "go": go_note}, ordered,
         f"JetStream publish with PubAck, {n:,} x {args.size} B (median of {args.runs})")


if __name__ == "__main__":
    main()
