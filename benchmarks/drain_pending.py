"""What drain() and stop() leave pending on the server, measured.

Default: a stream of N messages, a consumer with the default AckWait (30 s), a
context with max_messages=500 under continuous load (the user acks every
message); drain() or stop() mid-stream. ``--busy``: a publisher keeps adding
4 KiB messages to a fresh stream, the context (max_messages=2000) ends after 5
messages, called on the loop thread, which then stays busy for 0.1 s (as
parsing a large read would) while the open pull goes on delivering.

Once the context has closed (and its acks are processed) the consumer's
num_ack_pending and num_waiting are read, and how many of the pending messages
are stuck until AckWait: the server keeps NAK'd messages (and those it could
not deliver once the interest was gone) in num_ack_pending, queued for
immediate redelivery, so no-wait pulls get them at once; what they do not get
within 2 s waits out AckWait. Then the rest is read by a fresh context to
check that nothing was lost or handed out twice.

    PYTHONPATH=. python benchmarks/drain_pending.py [--runs 20] [--msgs 20000] [--live] [--busy]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jetstream_sync as jss  # noqa: E402
from jetstream_sync.testing import NatsServer  # noqa: E402

MODES = ("messages+drain", "consume+drain", "messages+stop", "consume+stop")
KEYS = ("ack_pending", "nakd", "stuck", "waiting", "after", "lost", "dups")


class Publisher:
    """Publishes ``payload`` to ``subject`` from a client of its own until stopped."""

    def __init__(self, url: str, subject: str, payload: bytes) -> None:
        self.going = threading.Event()
        self.going.set()
        self.thread = threading.Thread(target=self._run, args=(url, subject, payload), daemon=True)
        self.thread.start()

    def _run(self, url: str, subject: str, payload: bytes) -> None:
        with jss.connect(url) as client:
            js = client.jetstream()
            while self.going.is_set():
                for _ in range(50):
                    js.publish_async(subject, payload)
                js.publish_async_complete(timeout=10)

    def stop(self) -> None:
        self.going.clear()
        self.thread.join(15)


def end_with_the_loop_busy(nc: jss.Client, ctx: Any, end: str) -> None:
    async def end_then_busy(_client: Any) -> None:
        getattr(ctx, end)()  # on the loop thread: its shutdown is among the next things it runs
        await asyncio.sleep(0)  # the shutdown starts its task
        await asyncio.sleep(0)  # whose first step writes the UNSUB and the PING
        time.sleep(0.1)  # noqa: ASYNC251  the loop busy is the point

    nc.run_async(end_then_busy, timeout=5)


def one_run(nc: jss.Client, url: str, stream: jss.Stream, mode: str, at: int, name: str, how: str) -> Dict[str, int]:
    """Consume, end as ``mode`` says after ``at`` messages, and measure."""
    cons = stream.create_consumer(durable_name=name, ack_policy="explicit")
    subject = f"{stream.name.lower()}.x"
    handed: List[int] = []
    publisher: Optional[Publisher] = None
    if how != "preloaded":  # live: nats.java's Publisher; busy: large messages
        publisher = Publisher(url, subject, b"x" * 4096 if how == "busy" else b"m")
    max_messages = 2000 if how == "busy" else 500
    kind, end = mode.split("+")
    if kind == "messages":
        ctx: Any = cons.messages(max_messages=max_messages)
        for msg in ctx:
            handed.append(msg.metadata.sequence.stream)
            msg.ack()
            if len(handed) == at:
                if how == "busy":
                    nc.flush()  # the acks are out: nothing queued delays the busy spell
                    end_with_the_loop_busy(nc, ctx, end)
                else:
                    getattr(ctx, end)()
                if end == "stop":
                    break
        assert ctx.wait_closed(10)
        nc._conn.acks_processed(5.0)  # the iterator's acks, as cc.wait() does for consume
    else:
        reached = threading.Event()

        def handler(msg: jss.Msg) -> None:
            handed.append(msg.metadata.sequence.stream)
            msg.ack()
            if len(handed) == at:
                reached.set()

        ctx = cons.consume(handler, max_messages=max_messages)
        assert reached.wait(30)
        if how == "busy":
            end_with_the_loop_busy(nc, ctx, end)
        else:
            getattr(ctx, end)()
        assert ctx.wait(10)
    stats = ctx.stats
    info = cons.info()
    if publisher is not None:
        publisher.stop()
    row = {
        "handed": len(handed),
        "after": len(handed) - at,
        "ack_pending": info.num_ack_pending,
        "waiting": info.num_waiting,
        "nakd": stats.nakd_on_stop + stats.nakd_overflow,
    }
    row.update(what_is_left(cons, handed, stream.info().state.last_seq, info.delivered.stream_seq))
    stream.delete_consumer(name)
    return row


def what_is_left(cons: jss.Consumer, handed: List[int], total: int, delivered: int) -> Dict[str, int]:
    """Stuck (pending and not redelivered at once), lost, handed twice."""
    pending = set(range(1, delivered + 1)) - set(handed)  # every handed message was acked
    probed: List[int] = []
    deadline = time.monotonic() + 2.0
    while pending - set(probed) and time.monotonic() < deadline:
        for msg in cons.fetch_no_wait(len(pending - set(probed))):
            probed.append(msg.metadata.sequence.stream)
            msg.ack()
    stuck = len(pending - set(probed))
    seen = set(handed) | set(probed)
    if not stuck:  # the rest, through a fresh context (stuck ones would take AckWait)
        with cons.messages(max_messages=500) as again:
            while len(seen) < total:
                try:
                    msg = again.next(timeout=3)
                except jss.TimeoutError:
                    break
                seen.add(msg.metadata.sequence.stream)
                msg.ack()
    return {"stuck": stuck, "lost": 0 if stuck else total - len(seen), "dups": len(handed) - len(set(handed))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--msgs", type=int, default=20_000, help="preloaded messages (not with --busy)")
    ap.add_argument("--at", type=int, default=2_000, help="end after this many messages (+ 0..999, varied per run)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--live", action="store_true", help="publish continuously while consuming")
    ap.add_argument("--busy", action="store_true", help="end on the loop thread and keep it busy (see above)")
    args = ap.parse_args()
    how = "busy" if args.busy else "live" if args.live else "preloaded"
    srv = NatsServer().start()
    try:
        with jss.connect(srv.url) as nc:
            js = nc.jetstream()
            shared = None
            if how != "busy":
                shared = js.create_stream(name="DP", subjects=["dp.>"])
                for _ in range(args.msgs):
                    js.publish_async("dp.x", b"m")
                assert js.publish_async_complete(timeout=60)
            results: Dict[str, List[Dict[str, int]]] = {}
            for m, mode in enumerate(args.modes.split(",")):
                rows = results[mode] = []
                for i in range(args.runs):
                    stream = shared or js.create_stream(name=f"DB{m}_{i}", subjects=[f"db{m}_{i}.>"])
                    at = 5 if how == "busy" else args.at + (i * 397) % 1000  # not always at a pull boundary
                    rows.append(one_run(nc, srv.url, stream, mode, at, f"c{m}_{i}", how))
                    print(mode, i, rows[-1], flush=True)
                    if shared is None:
                        js.delete_stream(stream.name)
            print()
            print(f"{'min/median/max':16}" + "".join(f"{k:>20}" for k in KEYS))
            for mode, rows in results.items():
                cells = [f"{min(v)}/{statistics.median(v):g}/{max(v)}" for v in ([r[k] for r in rows] for k in KEYS)]
                print(f"{mode:16}" + "".join(f"{c:>20}" for c in cells))
    finally:
        srv.cleanup()


if __name__ == "__main__":
    main()
