"""Consume throughput, like for like: jetstream_sync against nats.go's jetstream
package and nats-py, one server, one run, contenders interleaved.

    MIRRORS=/path/to/git-mirrors python benchmarks/consume.py [-n 100000] [--size 128] [--runs 3]

Each contender consumes the whole stream through a fresh durable consumer
(file storage unless --storage memory; max_ack_pending -1, ack_wait 60 s).
Pairs (ours | peer), each with the same batch, ack policy, storage and count:
  (a) messages() + ack                 | (ga) nats.go Consumer.Messages() + Ack
  (b) messages(), ack_policy none      | (gb) nats.go Messages(), ack_policy none
  (c) fetch(500) loop + ack            | (gc) nats.go Consumer.Fetch(500) + Ack
                                       | (e)  nats-py pull_subscribe().fetch(500) + ack
  (d) consume(handler) + ack           | (gd) nats.go Consumer.Consume() + Ack
  (t) 16 threads sharing one messages() context, each acking | (a)
  (gl) nats.go legacy PullSubscribe Fetch(500) + Ack: an extra row, not a pair
Both sides pull 500 messages at a time and refill at half (the ADR-37 and
nats.go defaults). The Go rows use nats.go v1.53.1, built by anchors/build-nats-go.sh from
the git mirrors in $MIRRORS; without them (or NATS_GO_SRC for v1.30.2) they are skipped with a note.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import threading
import time
from typing import Callable, Dict, List, Optional

from _common import (Meter, Result, Sample, build_go, fill_stream, print_pairs, print_table, run_go, run_rounds,
                     save, start_server)

import jetstream_sync as jss

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


def shared_messages(cons: jss.Consumer, n: int, ack: bool, threads: int = 16) -> None:
    """``threads`` threads iterate one messages() context, each acking what it gets."""
    counts = [0] * threads
    total = itertools.count(1)  # next() is atomic: a shared tally without a lock
    errors: List[BaseException] = []

    with cons.messages() as it:

        def work(i: int) -> None:
            try:
                for msg in it:
                    if ack:
                        msg.ack()
                    counts[i] += 1
                    if next(total) == n:
                        it.stop()
            except BaseException as exc:  # reported below, in the calling thread
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(300)
    if errors:
        raise errors[0]
    if sum(counts) != n:
        raise RuntimeError(f"16 threads handled {sum(counts)} of {n}")


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
    if not done.wait(300):
        raise RuntimeError("consume: timed out")
    cc.stop()


def natspy_fetch(url: str, durable: str, n: int, ack: bool, batch: int = 500) -> None:
    import nats

    async def run() -> None:
        nc = await nats.connect(url)
        psub = await nc.jetstream().pull_subscribe_bind(durable=durable, stream=STREAM)
        got = 0
        while got < n:
            for msg in await psub.fetch(batch, timeout=5):
                if ack:
                    await msg.ack()
                got += 1
        await nc.flush()
        await nc.close()

    asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--count", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--storage", choices=["file", "memory"], default="file")
    ap.add_argument("--only", help="comma-separated contender keys, e.g. a,ga,e")
    args = ap.parse_args()
    n = args.count

    server = start_server()
    try:
        fill_stream(server.url, STREAM, SUBJECT, n, args.size, args.storage)
        nc = jss.connect(server.url, name="bench")
        js = nc.jetstream()
        go_bin, go_note = build_go("jetstream")
        legacy_bin, _ = build_go("consume")
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

        def go(mode: str, ack: bool, binary: Optional[str] = go_bin) -> Optional[Callable[[str], Sample]]:
            if binary is None:
                return None

            def run(tag: str) -> Sample:
                cons = new_consumer(js, tag, ack)
                flag = "1" if ack else "0"
                if mode == "legacy":
                    return run_go(binary, [server.url, STREAM, cons.name, str(n), flag], meter)
                extra = ["500"] if mode == "fetch" else []
                return run_go(binary, [mode, server.url, STREAM, cons.name, str(n), flag, *extra], meter)

            return run

        contenders: Dict[str, "tuple[str, Optional[Callable[[str], Sample]]]"] = {
            "a": ("messages() + ack", ours(messages_loop, True)),
            "ga": ("nats.go Messages() + Ack", go("messages", True)),
            "b": ("messages(), ack_policy none", ours(messages_loop, False)),
            "gb": ("nats.go Messages(), ack_policy none", go("messages", False)),
            "c": ("fetch(500) loop + ack", ours(fetch_loop, True)),
            "gc": ("nats.go Fetch(500) + Ack", go("fetch", True)),
            "e": ("nats-py fetch(500) + ack", natspy(True)),
            "d": ("consume(handler) + ack", ours(consume_loop, True)),
            "gd": ("nats.go Consume() + Ack", go("consume", True)),
            "t": ("16 threads share one messages(), + ack", ours(shared_messages, True)),
            "gl": ("nats.go legacy PullSubscribe Fetch(500) + Ack", go("legacy", True, legacy_bin)),
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
    title = f"consume {n:,} x {args.size} B ({args.storage} storage), medians of {args.runs}"
    print_table(title, ordered)
    pairs = [
        ("(a) messages() + ack / nats.go Messages() + Ack", "a", "ga", 1.0),
        ("(b) messages() ack none / nats.go Messages() ack none", "b", "gb", 1.0),
        ("(c) fetch(500) + ack / nats.go Fetch(500) + Ack", "c", "gc", 0.95),
        ("(c) fetch(500) + ack / nats-py fetch(500) + ack", "c", "e", None),
        ("(d) consume() + ack / nats.go Consume() + Ack", "d", "gd", 0.95),
        ("(t) 16 threads sharing messages() / one thread (a)", "t", "a", 0.9),
    ]
    ratios = print_pairs(results, pairs)
    save(
        "consume",
        {"count": n, "size": args.size, "runs": args.runs, "storage": args.storage, "go": go_note, "ratios": ratios},
        ordered,
        f"JetStream consume, {n:,} x {args.size} B, {args.storage} storage (median of {args.runs})",
    )


if __name__ == "__main__":
    main()
