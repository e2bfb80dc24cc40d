"""Consume throughput: jetstream_sync against nats-py and nats.go, one server, one run.

    python benchmarks/consume.py [-n 200000] [--size 128] [--runs 3] [--storage file]

Contenders (each consumes the whole stream through a fresh durable consumer):
  (a) messages() + ack()          (b) messages(), ack_policy none
  (c) fetch(500) loop + ack()     (d) consume(handler) + ack()
  (e) nats-py pull_subscribe().fetch(500) + ack   (f) the same, ack_policy none
  (g) nats.go Fetch(500), ack and none (when Go and Debian's nats.go are installed)
  (h) our engine driven on the loop thread, no hand-off: the ceiling on nats-py
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from typing import Callable, Dict, List

from _common import Meter, Result, Sample, build_go, fill_stream, print_table, run_go, run_rounds, save, start_server

import jetstream_sync as jss
from jetstream_sync._pull import PullEngine, Receiver
from jetstream_sync.options import consume_options

STREAM, SUBJECT = "BENCH", "bench.data"


def new_consumer(js: jss.JetStream, tag: str, ack: bool) -> jss.Consumer:
    return js.create_consumer(
        STREAM,
        durable_name=f"c_{tag}_{time.monotonic_ns()}",
        ack_policy="explicit" if ack else "none",
        max_ack_pending=-1,
        ack_wait=60.0,
    )


def messages_loop(cons: jss.Consumer, n: int, ack: bool) -> None:
    got = 0
    with cons.messages() as it:
        for msg in it:
            if ack:
                msg.ack()
            got += 1
            if got == n:
                break


def fetch_loop(cons: jss.Consumer, n: int, ack: bool) -> None:
    got = 0
    while got < n:
        for msg in cons.fetch(500, expires=5.0):
            if ack:
                msg.ack()
            got += 1


def consume_loop(cons: jss.Consumer, n: int, ack: bool) -> None:
    done = threading.Event()
    count = [0]

    def handler(msg: jss.Msg) -> None:
        if ack:
            msg.ack()
        count[0] += 1
        if count[0] == n:
            done.set()

    cc = cons.consume(handler)
    done.wait(300)
    cc.stop()


def in_loop(nc: jss.Client, cons: jss.Consumer, n: int, ack: bool) -> None:
    """The same engine, consumed on the loop thread itself: no thread hand-off."""

    conn = nc._conn  # the benchmark reaches into the engine on purpose

    async def run() -> None:
        receiver = Receiver(conn)
        engine = PullEngine(conn, receiver, cons._target(), consume_options())
        await engine.start()
        queue = engine._q.async_q
        outbox = conn.outbox
        got = 0
        while got < n:
            with receiver._lock:
                engine.want_more()
            chunk = await queue.get()
            for msg in chunk:
                with receiver._lock:
                    engine.taken(msg)
                if ack:
                    outbox.put(msg.reply, b"+ACK")
                got += 1
                if got == n:
                    break
        await outbox.send_queued()
        await engine.shutdown("stop")

    conn.loop_thread.run(run())


def natspy_fetch(url: str, durable: str, n: int, ack: bool) -> None:
    import nats

    async def run() -> None:
        nc = await nats.connect(url)
        psub = await nc.jetstream().pull_subscribe_bind(durable=durable, stream=STREAM)
        got = 0
        while got < n:
            for msg in await psub.fetch(500, timeout=5):
                if ack:
                    await msg.ack()
                got += 1
        await nc.flush()
        await nc.close()

    asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--count", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--storage", choices=["file", "memory"], default="file")
    ap.add_argument("--only", help="comma-separated contender letters, e.g. a,e,h")
    args = ap.parse_args()
    n = args.count

    server = start_server()
    try:
        fill_stream(server.url, STREAM, SUBJECT, n, args.size, args.storage)
        nc = jss.connect(server.url, name="bench")
        js = nc.jetstream()
        go_bin, go_note = build_go("consume")
        meter = Meter(server)

        def ours(fn: Callable[[jss.Consumer, int, bool], None], ack: bool) -> Callable[[str], Sample]:
            def run(tag: str) -> Sample:
                cons = new_consumer(js, tag, ack)
                with meter:
                    fn(cons, n, ack)
                    nc.flush()
                return meter.sample

            return run

        def natspy(ack: bool) -> Callable[[str], Sample]:
            def run(tag: str) -> Sample:
                cons = new_consumer(js, tag, ack)
                with meter:
                    natspy_fetch(server.url, cons.name, n, ack)
                return meter.sample

            return run

        def go(ack: bool) -> Callable[[str], Sample]:
            def run(tag: str) -> Sample:
                cons = new_consumer(js, tag, ack)
                return run_go(go_bin, [server.url, STREAM, cons.name, str(n), "1" if ack else "0"], meter)

            return run

        contenders: Dict[str, "tuple[str, Callable[[str], Sample] | None]"] = {
            "a": ("messages() + ack", ours(messages_loop, True)),
            "b": ("messages(), ack_policy none", ours(messages_loop, False)),
            "c": ("fetch(500) loop + ack", ours(fetch_loop, True)),
            "d": ("consume(handler) + ack", ours(consume_loop, True)),
            "e": ("nats-py fetch(500) + ack", natspy(True)),
            "f": ("nats-py fetch(500), ack_policy none", natspy(False)),
            "g": ("nats.go Fetch(500) + ack", go(True) if go_bin else None),
            "g0": ("nats.go Fetch(500), ack_policy none", go(False) if go_bin else None),
            "h": ("our engine in-loop (no hand-off) + ack", ours(lambda c, k, a: in_loop(nc, c, k, a), True)),
            "h0": ("our engine in-loop, ack_policy none", ours(lambda c, k, a: in_loop(nc, c, k, a), False)),
        }
        if args.only:
            keep = set(args.only.split(","))
            contenders = {k: v for k, v in contenders.items() if k in keep}
        results = {k: Result(k, label, n, args.size) for k, (label, _) in contenders.items()}
        for k, (_, fn) in contenders.items():
            if fn is None:
                results[k].note = go_note
        print(f"{n:,} x {args.size} B, {args.storage} storage, {args.runs} runs; Go: {go_note}")
        run_rounds(contenders, results, args.runs, n)
        nc.close()
    finally:
        server.cleanup()

    ordered: List[Result] = list(results.values())
    print_table(
        f"consume {n:,} x {args.size} B ({args.storage}), medians of {args.runs}", ordered, {"e": "e", "g": "g", "h": "h"}
    )
    report_targets(results)
    save(
        "consume",
        {"count": n, "size": args.size, "runs": args.runs, "storage": args.storage, "go": go_note},
        ordered,
        f"JetStream consume, {n:,} x {args.size} B, {args.storage} storage (median of {args.runs})",
    )


def report_targets(r: Dict[str, Result]) -> None:
    """The issue's targets, as ratios from this run."""

    def ratio(a: str, b: str) -> float:
        if a in r and b in r and r[a].samples and r[b].samples:
            return r[a].rate / r[b].rate
        return float("nan")

    checks = [
        ("(a) >= 3.5 x (e)", ratio("a", "e"), 3.5),
        ("(a) >= 0.45 x Go with acks", ratio("a", "g"), 0.45),
        ("(b) >= 4.5 x (f)", ratio("b", "f"), 4.5),
        ("(b) >= 0.35 x Go without acks", ratio("b", "g0"), 0.35),
        ("(a) >= 0.85 x (h)", ratio("a", "h"), 0.85),
    ]
    print("\ntargets")
    for text, value, target in checks:
        state = "n/a" if value != value else ("met" if value >= target else "NOT met")
        print(f"  {text:32} {value:6.2f}  {state}")


if __name__ == "__main__":
    main()
