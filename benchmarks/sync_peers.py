"""What synchronous code would use instead: core publish, request and blocking
JetStream publish against nats-py (awaited in asyncio, and driven from a loop
thread as sync code does), nats-py-sync 0.3.1, nats-python 0.8, pynats2 0.9
and nats.go v1.53.1. One server, one process run, contenders interleaved.

    python benchmarks/sync_peers.py [-n 100000] [--sync-count 5000] [--size 128] [--runs 3] [--only cp,ncp]

A peer that is not installed is skipped with the reason printed
(``pip install nats-py-sync nats-python pynats2``). Modes, every one with
``--size`` bytes, no headers, one connection:
  core publish, ``-n`` messages then a flush (a PING/PONG round trip):
    (cp) nc.publish()          (ncp) nats-py await nc.publish()   (lcp) nats-py from a loop thread
    (scp) nats-py-sync         (pcp) nats-python                  (p2cp) pynats2     (gcp) nats.go Publish
    ((lcp) makes ``--sync-count`` calls: each waits for the loop thread)
  request, ``--sync-count`` one at a time, to a nats-py echo responder in another process:
    (rq) nc.request()          (nrq) nats-py awaited              (lrq) nats-py from a loop thread
    (srq) nats-py-sync         (prq) nats-python                  (p2rq) pynats2     (grq) nats.go Request
  blocking JetStream publish, ``--sync-count`` one at a time (file storage, PubAck checked):
    (ps) js.publish()          (nps) nats-py awaited              (lps) nats-py from a loop thread
    (sps) nats-py-sync         (gps) nats.go js.Publish
  the same from 8 threads on one connection (``--sync-count`` in all):
    (ps8) js.publish() x 8 threads   (lps8) nats-py from a loop thread, 8 threads
    (nps8) nats-py, 8 concurrent asyncio tasks   (gps8) nats.go, 8 goroutines
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from _common import Meter, Result, Sample, build_go, print_pairs, print_table, run_go, save, start_server
from publish import SERVICE, parse_args, start_responder

import jetstream_sync as jss

STREAM, JS_SUBJECT, CORE_SUBJECT = "SYNC", "sync.js", "core.data"
THREADS = 8

Contender = Tuple[str, Optional[Callable[[], None]], str]  # label, run (None: skipped), why skipped
CLOSERS: List[Callable[[], Any]] = []  # peers' connections, closed before the server stops


class LoopThread:
    """nats-py on a loop thread of its own, driven with run_coroutine_threadsafe:
    what synchronous code that uses nats-py does."""

    def __init__(self, url: str) -> None:
        import nats

        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.nc = self.call(nats.connect(url))
        self.js = self.nc.jetstream()

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self) -> None:
        self.call(self.nc.close())
        self.loop.call_soon_threadsafe(self.loop.stop)


def in_threads(total: int, fn: Callable[[], None]) -> None:
    """``total`` calls of ``fn`` spread over THREADS threads."""
    share = [total // THREADS + (i < total % THREADS) for i in range(THREADS)]
    threads = [threading.Thread(target=lambda k=k: [fn() for _ in range(k)]) for k in share]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def natspy_awaited(url: str, body: Callable[[Any], Any]) -> Callable[[], None]:
    """nats-py in asyncio.run(): connect (outside the timing is not possible
    here, so connecting is timed for every nats-py mode alike), run ``body``."""
    import nats

    def run() -> None:
        async def go() -> None:
            nc = await nats.connect(url)
            await body(nc)
            await nc.close()

        asyncio.run(go())

    return run


def optional_peers(url: str, n: int, ns: int, payload: bytes) -> Dict[str, Contender]:
    """nats-py-sync, nats-python and pynats2 contenders, or the reason each is skipped."""
    out: Dict[str, Contender] = {}
    try:
        import nats_sync

        sctx = nats_sync.connect(url)
        # It wraps no JetStream publish: its way (nats-py's on a loop run in the calling thread) is used.
        sjs = sctx._nc.jetstream()
        CLOSERS.append(lambda: sctx._loop.run_until_complete(sctx._nc.close()))

        def scp() -> None:
            for _ in range(n):
                sctx.publish(CORE_SUBJECT, payload)
            sctx._loop.run_until_complete(sctx._nc.flush())  # it offers no flush of its own

        out["scp"] = ("nats-py-sync publish()", scp, "")
        out["srq"] = ("nats-py-sync request()", lambda: [sctx.request(SERVICE, payload, timeout=5) for _ in range(ns)], "")
        out["sps"] = ("nats-py-sync's loop: js.publish()",
                      lambda: [sctx._loop.run_until_complete(sjs.publish(JS_SUBJECT, payload)) for _ in range(ns)], "")
    except ImportError:
        why = "skipped: nats-py-sync not installed (pip install nats-py-sync)"
        out.update(scp=("nats-py-sync publish()", None, why), srq=("nats-py-sync request()", None, why),
                   sps=("nats-py-sync js.publish()", None, why))
    for key, module, name in (("p", "pynats", "nats-python"), ("p2", "pynats2", "pynats2")):
        try:
            client_cls = __import__(module).NATSClient
        except ImportError:
            why = f"skipped: {name} not installed (pip install {name})"
            out[f"{key}cp"] = (f"{name} publish()", None, why)
            out[f"{key}rq"] = (f"{name} request()", None, why)
            continue
        client = client_cls(url, socket_timeout=5)
        client.connect()
        CLOSERS.append(client.close)

        def cp(client: Any = client) -> None:
            for _ in range(n):
                client.publish(CORE_SUBJECT, payload=payload)
            # No round trip: its ping() reads whatever comes next. Its writes are
            # synchronous (sendall), so what it sent is in the kernel already.

        out[f"{key}cp"] = (f"{name} publish()", cp, "")
        out[f"{key}rq"] = (f"{name} request()", lambda client=client: [client.request(SERVICE, payload=payload)
                                                                        for _ in range(ns)], "")
    return out


def contenders(url: str, nc: jss.Client, n: int, ns: int, payload: bytes, go_bin: Optional[str], go_note: str,
               meter: Meter) -> Dict[str, Contender]:
    js = nc.jetstream()
    lt = LoopThread(url)
    CLOSERS.append(lt.close)

    def cp() -> None:
        for _ in range(n):
            nc.publish(CORE_SUBJECT, payload)
        nc.flush()

    async def ncp(anc: Any) -> None:
        for _ in range(n):
            await anc.publish(CORE_SUBJECT, payload)
        await anc.flush()

    def lcp() -> None:  # ~8k/s: ``--sync-count`` of them, not ``-n``
        for _ in range(ns):
            lt.call(lt.nc.publish(CORE_SUBJECT, payload))
        lt.call(lt.nc.flush())

    async def nrq(anc: Any) -> None:
        for _ in range(ns):
            await anc.request(SERVICE, payload, timeout=5)

    async def nps(anc: Any) -> None:
        ajs = anc.jetstream()
        for _ in range(ns):
            assert (await ajs.publish(JS_SUBJECT, payload)).seq

    async def nps8(anc: Any) -> None:
        ajs = anc.jetstream()

        async def task(k: int) -> None:
            for _ in range(k):
                assert (await ajs.publish(JS_SUBJECT, payload)).seq

        await asyncio.gather(*(task(ns // THREADS + (i < ns % THREADS)) for i in range(THREADS)))

    def go(mode: str, count: int, subject: str, *extra: str) -> Optional[Callable[[], None]]:
        if go_bin is None:
            return None
        argv = [mode, url, subject, str(count), str(len(payload)), *extra]
        return lambda: GO_SAMPLES.append(run_go(go_bin, argv, meter))

    out: Dict[str, Contender] = {
        "cp": ("nc.publish()", cp, ""),
        "ncp": ("nats-py await nc.publish()", natspy_awaited(url, ncp), ""),
        "lcp": ("nats-py nc.publish() from a loop thread", lcp, ""),
        "gcp": ("nats.go nc.Publish()", go("core-publish", n, CORE_SUBJECT), go_note),
        "rq": ("nc.request()", lambda: [nc.request(SERVICE, payload, timeout=5) for _ in range(ns)], ""),
        "nrq": ("nats-py await nc.request()", natspy_awaited(url, nrq), ""),
        "lrq": ("nats-py nc.request() from a loop thread",
                lambda: [lt.call(lt.nc.request(SERVICE, payload, timeout=5)) for _ in range(ns)], ""),
        "grq": ("nats.go nc.Request()", go("request", ns, SERVICE), go_note),
        "ps": ("js.publish()", lambda: [js.publish(JS_SUBJECT, payload) for _ in range(ns)], ""),
        "nps": ("nats-py await js.publish()", natspy_awaited(url, nps), ""),
        "lps": ("nats-py js.publish() from a loop thread",
                lambda: [lt.call(lt.js.publish(JS_SUBJECT, payload)) for _ in range(ns)], ""),
        "ps8": (f"js.publish(), {THREADS} threads", lambda: in_threads(ns, lambda: js.publish(JS_SUBJECT, payload)), ""),
        "lps8": (f"nats-py js.publish() from a loop thread, {THREADS} threads",
                 lambda: in_threads(ns, lambda: lt.call(lt.js.publish(JS_SUBJECT, payload))), ""),
        "nps8": (f"nats-py await js.publish(), {THREADS} tasks", natspy_awaited(url, nps8), ""),
        "gps": ("nats.go js.Publish()", go("publish-sync", ns, JS_SUBJECT, "1"), go_note),
        "gps8": (f"nats.go js.Publish(), {THREADS} goroutines", go("publish-sync", ns, JS_SUBJECT, str(THREADS)), go_note),
    }
    out.update(optional_peers(url, n, ns, payload))
    return out


GO_SAMPLES: List[Sample] = []  # a Go anchor measures its own time; its run appends the sample here

PAIRS = [
    ("(cp) nc.publish / nats-py await nc.publish", "cp", "ncp", 1.0),
    ("(cp) nc.publish / nats-python publish", "cp", "pcp", 3.0),
    ("(cp) nc.publish / nats-py-sync publish", "cp", "scp", 5.0),
    ("(cp) nc.publish / nats.go Publish (moonshot 0.8)", "cp", "gcp", None),
    ("(rq) nc.request / nats-py from a loop thread", "rq", "lrq", 1.5),
    ("(rq) nc.request / nats-python request", "rq", "prq", 1.0),
    ("(rq) nc.request / pynats2 request", "rq", "p2rq", 1.0),
    ("(rq) nc.request / nats-py awaited", "rq", "nrq", None),
    ("(ps) js.publish / nats-py from a loop thread", "ps", "lps", 2.0),
    ("(ps) js.publish / nats-py-sync js.publish", "ps", "sps", 1.5),
    ("(ps) js.publish / nats-py awaited", "ps", "nps", 1.0),
    ("(ps8) 8 threads / nats-py from a loop thread, 8 threads", "ps8", "lps8", 3.0),
    ("(ps8) 8 threads / nats-py, 8 asyncio tasks (moonshot 1.0)", "ps8", "nps8", None),
    ("(ps) js.publish / nats.go js.Publish", "ps", "gps", None),
    ("(ps8) 8 threads / nats.go, 8 goroutines", "ps8", "gps8", 0.8),
]


def main() -> None:
    args = parse_args(__doc__, 100_000, "core publishes per run")
    n, ns, payload = args.count, args.sync_count, b"x" * args.size
    server = start_server()
    responder = start_responder(server.url)
    try:
        nc = jss.connect(server.url, name="bench")
        stream = nc.jetstream().create_stream(name=STREAM, subjects=[JS_SUBJECT])
        go_bin, go_note = build_go("jetstream")
        meter = Meter(server)
        table = contenders(server.url, nc, n, ns, payload, go_bin, go_note, meter)
        if args.only:
            keep = set(args.only.split(","))
            table = {k: v for k, v in table.items() if k in keep}
        counts = {k: (n if k.endswith("cp") and k != "lcp" else ns) for k in table}
        results = {k: Result(k, label, counts[k], args.size, note=why) for k, (label, _, why) in table.items()}
        print(f"{n:,} core publishes / {ns:,} requests and blocking publishes x {args.size} B, {args.runs} runs;"
              f" Go: {go_note}")
        for run in range(args.runs):
            for key, (label, fn, _) in table.items():
                if fn is None:
                    continue
                stream.purge()
                GO_SAMPLES.clear()
                with meter:
                    fn()
                sample = GO_SAMPLES[0] if GO_SAMPLES else meter.sample
                results[key].samples.append(sample)
                print(f"  run {run + 1} ({key:4}) {label:52} {counts[key] / sample.seconds:10,.0f} msgs/s", flush=True)
        nc.close()
    finally:
        for close in CLOSERS:
            close()
        responder.kill()
        server.cleanup()
    ordered = list(results.values())
    print_table(f"synchronous peers x {args.size} B, medians of {args.runs}", ordered)
    ratios = print_pairs(results, PAIRS)
    save("sync_peers", {"count": n, "sync_count": ns, "size": args.size, "runs": args.runs, "go": go_note,
                        "ratios": ratios}, ordered, f"synchronous peers, {args.size} B (median of {args.runs})")


if __name__ == "__main__":
    main()
