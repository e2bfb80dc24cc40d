"""A cron job: work off a queue in bounded batches, stop when it is empty."""

import os
import sys

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
exported = []


def export(data: bytes) -> None:
    exported.append(data)  # stands for the real work; raising here leaves the message un-acked


with jss.connect(NATS_URL, name="nightly-export") as nc:
    js = nc.jetstream()
    # Set-up for this example; a real job finds stream and consumer in place.
    stream = js.create_or_update_stream(name="EX_EXPORTS", subjects=["ex.exports"])
    for i in range(250):
        js.publish_async("ex.exports", f"row {i}".encode())
    js.publish_async_complete(timeout=10)
    cons = stream.create_or_update_consumer(durable_name="nightly", ack_policy="explicit")

    done = 0
    while True:
        batch = list(cons.fetch(100, expires=1.0))  # at most 100, waiting at most 1 s
        if not batch:
            break  # nothing came within 1 s: the queue is empty
        for msg in batch:
            export(msg.data)
            msg.ack()
        done += len(batch)
    print(f"exported {done}")
    js.delete_stream("EX_EXPORTS")
sys.exit(0 if done == len(exported) else 1)
