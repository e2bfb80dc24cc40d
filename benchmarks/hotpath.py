"""CPU per message on each side of the consume hot path, without network traffic.

    python benchmarks/hotpath.py [--reads 400] [--per-read 200]

Builds a real pull engine on a real connection, then (1) feeds it synthetic
socket reads of 128 B messages on the loop thread (parser, Msg, engine,
hand-off) and (2) takes them all on this thread (take) and (3) acks them
(user side of ack). Prints the best of 3 of each in µs per message. These
are the per-message costs behind the consume ratios (docs/performance.md).
"""

from __future__ import annotations

import argparse
import time
from typing import List

from _common import start_server

import jetstream_sync as jss
from jetstream_sync._engines.pull import PullEngine
from jetstream_sync._engines.receiver import Receiver
from jetstream_sync.options import consume_options


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reads", type=int, default=400)
    ap.add_argument("--per-read", type=int, default=200)
    args = ap.parse_args()
    n = args.reads * args.per_read

    server = start_server()
    try:
        nc = jss.connect(server.url)
        js = nc.jetstream()
        js.create_stream(name="HOT", subjects=["hot.x"])
        cons = js.create_consumer("HOT", durable_name="hot", ack_policy="explicit", max_ack_pending=-1, ack_wait=60)
        conn = nc._conn  # the benchmark drives the engine directly, on purpose

        def engine() -> "tuple[Receiver, PullEngine]":
            receiver = Receiver(conn)
            eng = PullEngine(conn, receiver, cons._target(), consume_options())
            conn.loop_thread.run(eng.start(), 10)
            eng._pull_requested = True  # the messages are fed below: no pulls
            return receiver, eng

        ts = time.time_ns()

        def reads(sid: int) -> List[bytes]:
            out, seq = [], 0
            for _ in range(args.reads):
                parts = []
                for _ in range(args.per_read):
                    seq += 1
                    reply = f"$JS.ACK.HOT.hot.1.{seq}.{seq}.{ts}.{n - seq}"
                    parts.append(f"MSG hot.x {sid} {reply} 128\r\n".encode() + b"x" * 128 + b"\r\n")
                out.append(b"".join(parts))
            return out

        loop_us, take_us, ack_us = [], [], []
        for _ in range(3):
            receiver, eng = engine()
            data = reads(eng._sid)  # type: ignore[arg-type]
            parser = conn.nc._ps

            async def feed() -> float:
                t = time.perf_counter()
                for d in data:
                    await parser.parse(d)
                    eng._flush()
                return time.perf_counter() - t

            loop_us.append(conn.loop_thread.run(feed(), 60) / n * 1e6)
            t = time.perf_counter()
            msgs = [receiver.take(None) for _ in range(n)]
            take_us.append((time.perf_counter() - t) / n * 1e6)
            t = time.perf_counter()
            for m in msgs:
                m.ack()
            ack_us.append((time.perf_counter() - t) / n * 1e6)
            receiver.stop()
            js.delete_consumer("HOT", "hot")
            cons = js.create_consumer("HOT", durable_name="hot", ack_policy="explicit", max_ack_pending=-1, ack_wait=60)
        nc.close()
    finally:
        server.cleanup()
    print(f"{n:,} messages of 128 B in {args.reads} reads, best of 3 (µs per message)")
    print(f"  loop side: parse, Msg, engine, hand-off   {min(loop_us):6.3f}")
    print(f"  user side: take()                         {min(take_us):6.3f}")
    print(f"  user side: ack()                          {min(ack_us):6.3f}")


if __name__ == "__main__":
    main()
