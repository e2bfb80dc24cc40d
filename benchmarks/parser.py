"""Protocol parser cost of one large message split over many socket reads.

    python benchmarks/parser.py [--mib 16] [--read 32768]

Feeds one MSG of ``--mib`` MiB in ``--read``-byte reads to our FastParser and
to nats-py's Parser (no server, no socket) and prints the best of 3 for each.
A parser that copies its whole buffer per read costs the square of the size.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any, Callable, List

from nats.protocol.parser import Parser

from jetstream_sync._core.wire import FastParser


class _Sink:
    """The parts of a nats-py client that the parsers call."""

    def __init__(self) -> None:
        self.stats = {"in_msgs": 0, "in_bytes": 0}

    async def _process_msg(self, *args: Any) -> None:
        pass

    async def _process_ping(self) -> None:
        pass

    async def _process_pong(self) -> None:
        pass


def best_of_3(make: Callable[[Any], Any], chunks: List[bytes]) -> float:
    async def run(parser: Any) -> None:
        for chunk in chunks:
            await parser.parse(chunk)

    times = []
    for _ in range(3):
        parser = make(_Sink())
        start = time.perf_counter()
        asyncio.run(run(parser))
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--read", type=int, default=32768)
    args = ap.parse_args()
    payload = b"x" * (args.mib * 1024 * 1024)
    data = b"MSG big 1 %d\r\n%s\r\n" % (len(payload), payload)
    chunks = [data[i : i + args.read] for i in range(0, len(data), args.read)]
    ours = best_of_3(lambda nc: FastParser(nc, {}, {1: _BulkSink()}), chunks)
    theirs = best_of_3(Parser, chunks)
    print(f"one {args.mib} MiB message in {args.read}-byte reads, best of 3")
    print(f"  FastParser (fast paths)   {ours * 1000:8.1f} ms")
    print(f"  nats-py Parser            {theirs * 1000:8.1f} ms")
    print(f"  ratio                     {ours / theirs:8.2f}x  (goal: <= 2x)")


class _BulkSink:
    """Where the pull engine's messages go (made in bulk, as in a real run)."""

    conn = None

    @staticmethod
    def make(subject: bytes, reply: bytes, data: bytes, conn: Any, hdrs: Any) -> bytes:
        return data

    def on_msgs(self, msgs: List[Any]) -> None:
        pass

    def on_status(self, hdrs: bytes) -> None:
        pass


if __name__ == "__main__":
    main()
