"""A continuous pull: iterate cons.messages(), ack each message, stop when done."""

import os

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

with jss.connect(NATS_URL) as nc:
    js = nc.jetstream()
    stream = js.create_stream(name="EX_MESSAGES", subjects=["ex.messages.>"])
    try:
        for i in range(100):
            js.publish_async(f"ex.messages.{i % 4}", f"order {i}".encode())
        js.publish_async_complete(timeout=10)

        cons = stream.create_consumer(durable_name="worker", ack_policy="explicit")
        handled = 0
        # max_messages bounds what is buffered and not yet handed out (default 500).
        with cons.messages(max_messages=50, expires=5.0) as it:
            for msg in it:
                handled += 1
                msg.ack()
                if handled == 100:
                    break  # leaving the with block stops the context
        print(f"handled {handled} messages")
    finally:
        js.delete_stream("EX_MESSAGES")
