"""Callback-driven: cons.consume(handler) on a worker thread, then drain()."""

import os
import threading

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
TOTAL = 50

done = threading.Event()
handled = []


def handle(msg: jss.Msg) -> None:
    if msg.data == b"poison":
        msg.term("cannot be processed")  # never redelivered
    else:
        handled.append(msg.data)
        msg.ack()  # a message the handler neither acks nor terms is NAK'd after it returns
    if len(handled) == TOTAL:
        done.set()


def on_error(exc: Exception) -> None:
    print(f"consume reported: {exc!r}")  # transient problems and handler exceptions


with jss.connect(NATS_URL) as nc:
    js = nc.jetstream()
    stream = js.create_stream(name="EX_CONSUME", subjects=["ex.consume"])
    try:
        js.publish("ex.consume", b"poison")
        for i in range(TOTAL):
            js.publish_async("ex.consume", f"job {i}".encode())
        js.publish_async_complete(timeout=10)

        cons = stream.create_consumer(durable_name="jobs", ack_policy="explicit")
        cc = cons.consume(handle, error_handler=on_error, max_messages=20)
        done.wait(timeout=10)
        cc.drain()  # no new pulls; what was received is still handled
        cc.wait(timeout=10)
        print(f"handled {len(handled)} jobs, closed={cc.closed}")
    finally:
        js.delete_stream("EX_CONSUME")
