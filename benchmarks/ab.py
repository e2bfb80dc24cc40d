"""Two checkouts of jetstream_sync, interleaved in one run: did a change help, or hurt?

    git worktree add /tmp/old <commit>
    python benchmarks/ab.py consume --old /tmp/old [--rounds 5] [-n 30000]
    python benchmarks/ab.py publish --old /tmp/old [--rounds 5] [-n 30000] [--no-read]
    python benchmarks/ab.py blocking --old /tmp/old [--rounds 5] [-n 3000] [--threads 1|8] [--request]
    python benchmarks/ab.py consume --old /tmp/old --fetch [--batch 10]|--handler    (fetch(N) or consume(handler), + ack)

Each round runs both codes in turn (alternating who goes first), each in a fresh process importing its own
``jetstream_sync`` (via PYTHONPATH), against one nats-server. Prints the median
msgs/s and the client's CPU per message (the fairer figure where the server
shares the cores) of each.

- ``publish``: ``n`` x 128 B ``publish_async`` calls, ``publish_async_complete()``,
  then every future's ``result()`` (``--no-read``: left unread, fire and forget).
- ``consume``: a file stream holding ``n`` x 128 B messages (filled before the
  clock starts), read by a new durable pull consumer with
  ``messages(max_messages=500)``, explicit ack of each message.
- ``blocking``: ``n`` blocking ``js.publish()`` x 128 B to a file stream, one
  at a time per thread (``--threads``), or ``nc.request()`` to a responder on
  its own connection (``--request``); also the p50 of one call (µs).
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
CSTREAM, CSUBJECT = "ABCONS", "abcons.data"


def publish_child(url: str, n: int, read: bool) -> dict:
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
    return {"rate": n / wall, "cpu_us": cpu / n * 1e6}


def consume_child(url: str, n: int, tag: str, fetch: bool = False, handler: bool = False, batch: int = 500) -> dict:
    import jetstream_sync as jss

    with jss.connect(url) as nc:
        js = nc.jetstream()
        stream = f"{CSTREAM}_{tag}_{os.getpid()}"
        subject = f"{CSUBJECT}.{tag}.{os.getpid()}"
        js.create_stream(name=stream, subjects=[subject])
        for _ in range(n):
            js.publish_async(subject, b"x" * 128)
        if not js.publish_async_complete(timeout=120):
            raise RuntimeError("PubAcks did not arrive")
        cons = js.stream(stream).create_consumer(durable_name="ab", ack_policy="explicit")
        got = 0
        t0, c0 = time.perf_counter(), time.process_time()
        if handler:
            import threading

            done = threading.Event()

            def handle(msg: "jss.Msg") -> None:
                nonlocal got
                msg.ack()
                got += 1
                if got == n:
                    done.set()

            ctx = cons.consume(handle)
            if not done.wait(300):
                raise RuntimeError("consume: timed out")
            ctx.stop()
        elif fetch:
            while got < n:
                for msg in cons.fetch(batch, expires=5):
                    msg.ack()
                    got += 1
        else:
            with cons.messages(max_messages=500) as it:
                for msg in it:
                    msg.ack()
                    got += 1
                    if got == n:
                        break
        nc.flush(timeout=30)  # the acks are out
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        js.delete_stream(stream)
    return {"rate": n / wall, "cpu_us": cpu / n * 1e6}


def blocking_child(url: str, n: int, threads: int, request: bool) -> dict:
    import threading

    import jetstream_sync as jss

    with jss.connect(url) as nc, jss.connect(url) as responder:
        if request:
            sub = responder.subscribe("ab.req", cb=lambda m: m.respond(m.data))
            responder.flush()

            def call() -> object:
                return nc.request("ab.req", b"x" * 128, timeout=5)
        else:
            js = nc.jetstream()

            def call() -> object:
                return js.publish(SUBJECT, b"x" * 128)
        for _ in range(200):  # warm up
            call()
        lat: list = []

        def work(count: int) -> None:
            for _ in range(count):
                t = time.perf_counter()
                call()
                lat.append(time.perf_counter() - t)

        t0, c0 = time.perf_counter(), time.process_time()
        workers = [threading.Thread(target=work, args=(n // threads,)) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if request:
            sub.unsubscribe()
    done = len(lat)  # the responder's CPU is in this process too: request rows count it
    return {"rate": done / wall, "cpu_us": cpu / done * 1e6, "p50_us": statistics.median(lat) * 1e6}


def main(argv: list | None = None, workload: str | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    if workload is None:
        ap.add_argument("workload", choices=("publish", "consume", "blocking"))
    ap.add_argument("--old", help="a checkout of the code to compare with (required)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", "--count", type=int, default=30_000)
    ap.add_argument("--no-read", action="store_true", help="publish: leave the futures' results unread")
    ap.add_argument("--threads", type=int, default=1, help="blocking: calling threads")
    ap.add_argument("--fetch", action="store_true", help="consume: fetch(--batch) batches instead of messages()")
    ap.add_argument("--batch", type=int, default=500, help="consume --fetch: messages per fetch (a small batch shows the per-call cost)")
    ap.add_argument("--handler", action="store_true", help="consume: consume(handler) instead of messages()")
    ap.add_argument("--request", action="store_true", help="blocking: nc.request() instead of js.publish()")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    what = workload or args.workload
    if args.child:
        url, n, mode, tag = args.child
        if what == "blocking":
            row = blocking_child(url, int(n), args.threads, args.request)
        elif what == "publish":
            row = publish_child(url, int(n), mode == "read")
        else:
            row = consume_child(url, int(n), tag, args.fetch, args.handler, args.batch)
        print(json.dumps(row))
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
        for round_no in range(args.rounds):
            order = list(codes.items())
            if round_no % 2:  # who goes first alternates: the second of a pair may find a warmer server
                order.reverse()
            for tag, path in order:
                env = dict(os.environ, PYTHONPATH=path)
                cmd = [sys.executable, str(HERE / "ab.py"), what, "--child", server.url, str(args.count), mode, tag,
                       "--threads", str(args.threads), "--batch", str(args.batch)] + (
                           ["--request"] if args.request else []) + (["--fetch"] if args.fetch else []) + (
                           ["--handler"] if args.handler else [])
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=True)
                samples[tag].append(json.loads(out.stdout))
    finally:
        server.cleanup()
    if what == "blocking":
        call = "nc.request() to a responder" if args.request else "blocking js.publish(), file stream"
        print(f"{call}, {args.count:,} x 128 B, {args.threads} thread(s), {args.rounds} rounds interleaved (medians)")
    elif what == "publish":
        print(f"publish_async {args.count:,} x 128 B, results {'not read' if args.no_read else 'read'}, "
              f"{args.rounds} rounds interleaved (medians)")  # fmt: skip
    else:
        print(f"{f'fetch({args.batch})' if args.fetch else 'consume(handler)' if args.handler else 'messages(max_messages=500)'} + ack, {args.count:,} x 128 B from a file stream, "
              f"{args.rounds} rounds interleaved (medians)")  # fmt: skip
    for tag, rows in samples.items():
        rate = statistics.median(r["rate"] for r in rows)
        cpu = statistics.median(r["cpu_us"] for r in rows)
        p50 = f"  p50 {statistics.median(r['p50_us'] for r in rows):6.0f} µs" if what == "blocking" else ""
        print(f"  {tag:5} {codes[tag]:40} {rate:10,.0f} msgs/s  {cpu:6.2f} µs CPU/msg{p50}")


if __name__ == "__main__":
    main()
