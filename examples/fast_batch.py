"""Fast-ingest batch publish (ADR-50, server 2.14+): many messages, one batch, flow-controlled."""

import os

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

with jss.connect(NATS_URL) as nc:
    js = nc.jetstream()
    js.create_stream(name="EX_FAST", subjects=["ex.fast.>"], allow_batched=True)
    try:
        # A list in one call: the last message commits the batch.
        ack = js.publish_fast_batch([("ex.fast.readings", b"%d" % i) for i in range(10_000)])
        print(f"publish_fast_batch: {ack.batch_size} stored, last sequence {ack.seq}")

        # Or message by message: add() waits only when the server's flow acks are due.
        with js.fast_batch(flow=50) as batch:
            for i in range(999):
                batch.add("ex.fast.events", b"event %d" % i)
            done = batch.commit("ex.fast.events", b"last event")
        print(f"fast_batch: {done.batch_size} stored, {batch.flow_acks} flow acks")

        # A refused message ends the batch and says what was stored before it.
        try:
            with js.fast_batch(flow=2, max_outstanding_acks=1) as batch:
                for i in range(3):
                    batch.add("ex.fast.checked", b"%d" % i)
                batch.add("ex.fast.checked", b"stale", headers={"Nats-Expected-Last-Subject-Sequence": "1"})
                batch.commit("ex.fast.checked", b"never stored")
        except jss.FastBatchError as exc:
            print(f"refused at message {exc.failed_seq}: {exc.stored} stored, the last at sequence {exc.last_seq}")
    finally:
        js.delete_stream("EX_FAST")
