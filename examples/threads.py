"""Threads share one Client, and may share one messages() context."""

import os
import threading

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
THREADS, TOTAL = 4, 400

with jss.connect(NATS_URL) as nc:
    js = nc.jetstream()
    stream = js.create_stream(name="EX_THREADS", subjects=["ex.threads"])
    try:
        def publisher(n: int) -> None:  # every thread publishes through the same Client
            for i in range(TOTAL // THREADS):
                js.publish_async("ex.threads", f"{n}-{i}".encode())

        pubs = [threading.Thread(target=publisher, args=(n,)) for n in range(THREADS)]
        for t in pubs:
            t.start()
        for t in pubs:
            t.join()
        js.publish_async_complete(timeout=10)

        cons = stream.create_consumer(durable_name="pool", ack_policy="explicit")
        counts = [0] * THREADS
        with cons.messages(stop_after=TOTAL) as it:  # ends once TOTAL messages were handed out

            def worker(n: int) -> None:
                for msg in it:  # each message goes to exactly one thread
                    counts[n] += 1
                    msg.ack()

            workers = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
            for t in workers:
                t.start()
            for t in workers:
                t.join(timeout=30)
        print(f"{THREADS} threads handled {sum(counts)} messages")
    finally:
        js.delete_stream("EX_THREADS")
