"""How a Spark partition should read its sequence range: through an ephemeral
pull consumer (what the data source does) or with direct-get batches (ADR-31).

    python benchmarks/direct_get.py [-n 200000] [--size 128] [--runs 3] [--batch 1000]

Same stream (file storage, allow_direct), same range [1, n], one process,
interleaved, medians of the runs: (r1) jetstream_sync.spark's read_messages()
(ephemeral AckNone consumer, messages(max_messages=batch)); (r2)
stream.get_msgs(seq, batch=batch) in a loop, one request per batch.
"""

from __future__ import annotations

import argparse

from _common import Meter, Result, fill_stream, print_pairs, print_table, run_rounds, save, start_server

import jetstream_sync as jss
from jetstream_sync.options.connection import connection_settings
from jetstream_sync.spark._read import SeqRange, read_messages

STREAM, SUBJECT = "DIRECT", "direct.data"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--count", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1000)
    args = ap.parse_args()
    n, batch = args.count, args.batch
    server = start_server()
    try:
        fill_stream(server.url, STREAM, SUBJECT, n, args.size)
        nc = jss.connect(server.url)
        js = nc.jetstream()
        cfg = js.stream_info(STREAM).config
        cfg.allow_direct = True
        js.update_stream(cfg)
        stream = js.stream(STREAM)
        meter = Meter(server)
        settings = connection_settings(server.url)

        def consumer_read(tag: str) -> object:
            r = SeqRange(STREAM, 1, n + 1, (), False, batch, 10.0, settings)
            with meter:
                got = sum(1 for _ in read_messages(r))
            assert got == n, got
            return meter.sample

        def direct_read(tag: str) -> object:
            with meter:
                seq, got = 1, 0
                while seq <= n:
                    msgs = stream.get_msgs(seq=seq, batch=min(batch, n - seq + 1))
                    got += len(msgs)
                    seq = msgs[-1].seq + 1
            assert got == n, got
            return meter.sample

        results = {
            "r1": Result("r1", f"read_messages(): ephemeral consumer, messages({batch})", n, args.size),
            "r2": Result("r2", f"direct get: get_msgs(batch={batch}) per request", n, args.size),
        }
        run_rounds({"r1": (results["r1"].label, consumer_read), "r2": (results["r2"].label, direct_read)},
                   results, args.runs, n)
        nc.close()
        title = f"Reading a sequence range, {n:,} x {args.size} B, file storage, one process"
        print_table(title, list(results.values()))
        ratios = print_pairs(results, [("direct get / ephemeral consumer (the reader keeps the faster)", "r2", "r1", None)])
        save("direct_get", {"ratios": ratios, "count": n, "size": args.size, "batch": batch}, list(results.values()), title)
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
