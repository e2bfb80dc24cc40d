"""Publishing: publish_async and its window, msg_id dedup, expected-last-sequence."""

import os

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

with jss.connect(NATS_URL) as nc:
    js = nc.jetstream()
    js.create_stream(name="EX_PUBLISH", subjects=["ex.publish.>"], duplicate_window=120.0)
    try:
        # At most 4000 publishes are in flight by default; beyond that the call waits.
        js.set_publish_async_max_pending(1000)
        futures = [js.publish_async("ex.publish.bulk", f"{i}".encode()) for i in range(5000)]
        if not js.publish_async_complete(timeout=30):
            raise SystemExit("publish acks did not come back in 30 s")
        last = futures[-1].result()  # a PubAck, or the exception the publish failed with
        print(f"publish_async: {len(futures)} acked, last sequence {last.seq}")

        # The same msg_id within the duplicate window is stored once.
        first = js.publish("ex.publish.order", b"{}", msg_id="order-1")
        again = js.publish("ex.publish.order", b"{}", msg_id="order-1")
        print(f"msg_id: duplicate={again.duplicate}, same sequence={again.seq == first.seq}")

        # Optimistic concurrency: only store if the subject's last sequence is still ours.
        js.publish("ex.publish.order", b"v2", expected_last_subject_seq=first.seq)
        try:
            js.publish("ex.publish.order", b"v2-again", expected_last_subject_seq=first.seq)
        except jss.APIError as exc:
            print(f"expected_last_subject_seq: refused ({exc.err_code})")
    finally:
        js.delete_stream("EX_PUBLISH")
