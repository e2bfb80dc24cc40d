"""One pull at a time: fetch(), fetch_no_wait() and next()."""

import os

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

with jss.connect(NATS_URL) as nc:
    js = nc.jetstream()
    stream = js.create_stream(name="EX_FETCH", subjects=["ex.fetch"])
    try:
        for i in range(25):
            js.publish("ex.fetch", str(i).encode())
        cons = stream.create_consumer(durable_name="batcher", ack_policy="explicit")

        # Up to 10 messages, waiting at most 2 s; iterating blocks per message.
        batch = list(cons.fetch(10, expires=2.0))
        for msg in batch:
            msg.ack()
        print(f"fetch: {len(batch)} messages")

        # Only what the consumer has for us now; never waits for new messages.
        rest = list(cons.fetch_no_wait(100))
        for msg in rest:
            msg.ack()
        print(f"fetch_no_wait: {len(rest)} messages")

        try:
            cons.next(timeout=1.0)
        except jss.TimeoutError:
            print("next: nothing left")
    finally:
        js.delete_stream("EX_FETCH")
