"""``jetstream-sync bench``: measure your own server the way ``nats bench`` does.

    jetstream-sync bench pub     [--server URL] [--stream S] [--mode async|sync] [--size B] [-n N] [--clients C]
    jetstream-sync bench consume [--server URL] [--stream S] [--mode messages|fetch] [--ack explicit|none]
                                 [--batch B] [-n N] [--clients C]

``pub`` creates the stream (subject ``<stream>.data``) if it is missing and
checks every PubAck; ``consume`` reads it through a new durable consumer that
it deletes afterwards. With ``--embedded`` an embedded nats-server is started
(and ``bench both`` publishes then consumes). Results: msgs/s, MB/s and
latency percentiles (sync publish: each call; async publish: publish to
PubAck, every 64th message; consume: the wait in each ``next()``).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import jetstream_sync as jss

from .demo import Progress
from ..testing.server import NatsServer


class _Tally:
    """Counts and latency samples from several client threads."""

    def __init__(self, total: int, label: str, progress: bool) -> None:
        self.lock = threading.Lock()
        self.done = 0
        self.latencies: List[float] = []
        self.bar = Progress(label, total, enabled=progress)

    def add(self, n: int, latencies: List[float]) -> None:
        with self.lock:
            self.done += n
            self.latencies.extend(latencies)
            self.bar.update(self.done)


def _percentiles(values: List[float]) -> Dict[str, float]:
    if not values:
        return {}
    values = sorted(values)

    def pick(q: float) -> float:
        return values[min(len(values) - 1, int(len(values) * q))] * 1e6

    return {"p50_us": pick(0.5), "p90_us": pick(0.9), "p99_us": pick(0.99), "max_us": values[-1] * 1e6}


def _split(total: int, clients: int) -> List[int]:
    return [total // clients + (1 if i < total % clients else 0) for i in range(clients)]


def _run_clients(clients: int, work: Callable[[int], None]) -> float:
    """Run ``work(i)`` on ``clients`` threads; returns wall seconds. Errors re-raised here."""
    errors: List[BaseException] = []

    def guarded(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # reported in the calling thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,), name=f"bench-{i}") for i in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - start


def pub(nc: jss.Client, args: argparse.Namespace) -> Dict[str, Any]:
    js = nc.jetstream()
    subject = f"{args.stream}.data"
    if args.stream not in js.stream_names():
        js.create_stream(name=args.stream, subjects=[subject], storage=args.storage)
    elif args.purge:
        js.purge_stream(args.stream)
    payload = b"x" * args.size
    tally = _Tally(args.count, "publish", args.progress)
    shares = _split(args.count, args.clients)

    def sync_work(i: int) -> None:
        lat: List[float] = []
        clock = time.perf_counter
        for k in range(shares[i]):
            t = clock()
            js.publish(subject, payload)
            lat.append(clock() - t)
            if k % 256 == 255:
                tally.add(256, lat)
                lat = []
        tally.add(len(lat), lat)

    def async_work(i: int) -> None:
        lat: List[float] = []
        clock = time.perf_counter
        futures = []
        for k in range(shares[i]):
            f = js.publish_async(subject, payload)
            futures.append(f)
            if k % 64 == 0:
                t = clock()

                def done(_f: object, t: float = t) -> None:
                    lat.append(clock() - t)

                f.add_done_callback(done)
            if k % 1000 == 999:
                tally.add(1000, [])
        if not js.publish_async_complete(timeout=max(60.0, shares[i] / 1000)):
            raise SystemExit("publish acknowledgements did not arrive in time")
        for f in futures:
            f.result()  # raises if a publish failed
        tally.add(shares[i] % 1000, lat)

    secs = _run_clients(args.clients, sync_work if args.mode == "sync" else async_work)
    tally.bar.update(args.count)
    return _report("pub", args, secs, tally.latencies)


def consume(nc: jss.Client, args: argparse.Namespace) -> Dict[str, Any]:
    js = nc.jetstream()
    stream = js.stream(args.stream)
    count = args.count or stream.info().state.messages
    if count <= 0:
        raise SystemExit(f"stream {args.stream} has no messages: run `jetstream-sync bench pub` first")
    name = f"bench_{os.getpid()}_{time.monotonic_ns()}"
    cons = stream.create_consumer(durable_name=name, ack_policy=args.ack, max_ack_pending=-1)
    ack = args.ack != "none"
    tally = _Tally(count, "consume", args.progress)
    taken = [0]
    nbytes = [0]
    lock = threading.Lock()

    def claim(n: int) -> int:
        """How many of ``n`` messages this client may still count (the total is shared)."""
        with lock:
            n = min(n, count - taken[0])
            taken[0] += n
            return n

    def messages_work(i: int) -> None:
        lat: List[float] = []
        clock = time.perf_counter
        with cons.messages(max_messages=args.batch) as it:
            while True:
                t = clock()
                try:
                    msg = it.next(timeout=args.timeout)
                except jss.TimeoutError:
                    return
                lat.append(clock() - t)
                if ack:
                    msg.ack()
                nbytes[0] += len(msg.data)  # approximate under threads; only for MB/s
                if not claim(1):
                    return
                if len(lat) == 256:
                    tally.add(256, lat)
                    lat = []
                if taken[0] >= count:
                    break
        tally.add(len(lat), lat)

    def fetch_work(i: int) -> None:
        clock = time.perf_counter
        while taken[0] < count:
            t = clock()
            batch = cons.fetch(args.batch, expires=args.timeout)
            got = 0
            for msg in batch:
                if ack:
                    msg.ack()
                got += 1
                nbytes[0] += len(msg.data)
            if not got:
                return
            tally.add(claim(got), [clock() - t])

    try:
        secs = _run_clients(args.clients, messages_work if args.mode == "messages" else fetch_work)
        nc.flush()
    finally:
        js.delete_consumer(args.stream, name)
    tally.bar.update(count)
    if taken[0] < count:
        raise SystemExit(f"only {taken[0]:,} of {count:,} messages arrived within --timeout {args.timeout}s")
    args.count = count
    args.size = nbytes[0] // max(taken[0], 1)  # mean payload, for MB/s
    return _report("consume", args, secs, tally.latencies)


def _report(kind: str, args: argparse.Namespace, secs: float, latencies: List[float]) -> Dict[str, Any]:
    rate = args.count / secs
    result = {
        "kind": kind,
        "mode": args.mode,
        "count": args.count,
        "size": args.size,
        "clients": args.clients,
        "seconds": secs,
        "msgs_per_s": rate,
        "mb_per_s": rate * args.size / 1e6,
        **_percentiles(latencies),
    }
    if kind == "consume":
        result.update(ack=args.ack, batch=args.batch)
    what = {
        "pub": f"pub ({args.mode}, {args.size} B, {args.clients} client(s))",
        "consume": f"consume ({args.mode}, batch {args.batch}, ack {args.ack}, {args.clients} client(s))",
    }[kind]
    line = f"{what}: {args.count:,} msgs in {secs:.2f}s = {rate:,.0f} msgs/s, {result['mb_per_s']:,.1f} MB/s"
    if latencies:
        line += (
            f"; latency p50 {result['p50_us']:,.0f} µs, p90 {result['p90_us']:,.0f} µs,"
            f" p99 {result['p99_us']:,.0f} µs, max {result['max_us']:,.0f} µs"
        )
    print(line)
    return result


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jetstream-sync bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["pub", "consume", "both"])
    p.add_argument("--server", default=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"),
                   help="NATS URL (default: $NATS_URL or nats://127.0.0.1:4222)")
    p.add_argument("--embedded", action="store_true", help="start an embedded nats-server instead")
    p.add_argument("--stream", default="benchstream")
    p.add_argument("--storage", choices=["file", "memory"], default="file", help="for a stream pub creates")
    p.add_argument("--purge", action="store_true", help="pub: purge the stream first")
    p.add_argument("--mode", help="pub: async (default) or sync; consume: messages (default) or fetch")
    p.add_argument("-n", "--count", type=int, help="messages (pub default 100000; consume default: all)")
    p.add_argument("--size", type=int, default=128, help="payload bytes (pub)")
    p.add_argument("--clients", type=int, default=1, help="threads sharing one connection")
    p.add_argument("--ack", choices=["explicit", "none", "all"], default="explicit", help="consume: ack policy")
    p.add_argument("--batch", type=int, default=500, help="consume: messages per pull")
    p.add_argument("--timeout", type=float, default=5.0, help="consume: give up after this long without a message")
    p.add_argument("--json", action="store_true", help="print the results as JSON too")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.clients < 1 or args.size < 0 or args.batch < 1 or (args.count is not None and args.count < 1):
        parser.error("--clients, --batch and -n must be >= 1, --size >= 0")
    if args.timeout <= 0:
        parser.error("--timeout must be > 0")
    try:
        jss.options.name("stream", args.stream)
    except jss.JetStreamError as exc:
        parser.error(f"--stream: {exc}")
    steps = ["pub", "consume"] if args.what == "both" else [args.what]
    modes = {}
    allowed = {"pub": ("async", "sync"), "consume": ("messages", "fetch")}
    if args.mode is not None and not any(args.mode in allowed[step] for step in steps):
        parser.error(f"--mode: one of {', '.join(m for step in steps for m in allowed[step])}")
    for step in steps:
        # With `both`, --mode picks the mode of the step it names; the other keeps its default.
        modes[step] = args.mode if args.mode in allowed[step] else allowed[step][0]
    if args.what == "both" and not args.embedded:
        parser.error("`bench both` needs --embedded (it would publish into your stream)")
    server: Optional[NatsServer] = None
    if args.embedded:
        server = NatsServer().start()
        args.server = server.url
    results = []
    try:
        with jss.connect(args.server, name="jetstream-sync-bench") as nc:
            for step in steps:
                ns = argparse.Namespace(**vars(args))
                ns.mode = modes[step]
                if step == "pub":
                    ns.count = args.count or 100_000
                    results.append(pub(nc, ns))
                else:
                    ns.count = args.count if args.what == "consume" else None
                    results.append(consume(nc, ns))
    except jss.JetStreamError as exc:
        print(f"jetstream-sync bench: {exc}")
        return 1
    finally:
        if server is not None:
            server.cleanup()
    if args.json:
        print(json.dumps(results, indent=2))
    return 0
