"""Connect, create a stream and a consumer, publish, read, ack, close."""

import os

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

with jss.connect(NATS_URL, name="quickstart") as nc:  # closed (queued acks sent) when the block ends
    js = nc.jetstream()
    stream = js.create_stream(name="QUICKSTART", subjects=["quickstart.>"])
    try:
        ack = js.publish("quickstart.hello", b"hello, JetStream")
        print(f"published to {ack.stream}, sequence {ack.seq}")

        cons = stream.create_consumer(durable_name="reader", ack_policy="explicit")
        msg = cons.next(timeout=5.0)  # jss.TimeoutError if nothing comes within 5 s
        print(f"received {msg.subject}: {msg.data.decode()} (delivery {msg.metadata.num_delivered})")
        msg.ack()  # queued, never blocks; sent before close() returns
    finally:
        js.delete_stream("QUICKSTART")
