"""A user's script along the README tour, checked by mypy (tests/unit/test_typing.py).

Never run: it only has to type-check. Each reveal_type() must print a
concrete type (no Any) and ``mypy --strict`` must pass on the whole file.
"""

from typing import reveal_type

import jetstream_sync as jss


def handler(msg: jss.Msg) -> None:
    msg.ack()


def tour() -> None:
    with jss.connect("nats://127.0.0.1:4222", name="worker") as nc:
        reveal_type(nc)
        js = nc.jetstream()
        reveal_type(js)
        reveal_type(js.publish("orders.new", b"{}", msg_id="o-1"))
        reveal_type(js.publish_async("orders.bulk", b"x"))
        stream = js.create_stream(name="ORDERS", subjects=["orders.>"])
        reveal_type(stream)
        reveal_type(js.stream("ORDERS"))
        reveal_type(stream.info())

        cons = stream.create_consumer(durable_name="billing", ack_policy="explicit")
        reveal_type(cons)
        reveal_type(stream.consumer("billing"))
        reveal_type(js.consumer("ORDERS", "billing"))
        reveal_type(js.consumer("ORDERS", "billing").fetch(10))
        reveal_type(js.create_consumer("ORDERS", durable_name="audit"))
        reveal_type(stream.push_consumer("audit-push"))
        reveal_type(js.push_consumer("ORDERS", "audit-push"))
        reveal_type(stream.create_push_consumer(durable_name="audit-push", deliver_subject="audit.push"))
        reveal_type(js.create_or_update_push_consumer("ORDERS", durable_name="audit-push", deliver_subject="audit.push"))
        reveal_type(stream.create_push_consumer(jss.ConsumerConfig(durable_name="audit-push", deliver_subject="audit.push")))
        reveal_type(stream.create_or_update_consumer(jss.ConsumerConfig(durable_name="audit")))
        reveal_type(js.update_consumer("ORDERS", jss.ConsumerConfig(durable_name="audit")))
        reveal_type(stream.update_consumer(durable_name="audit"))
        reveal_type(cons.info())

        with cons.messages(max_messages=500) as it:
            reveal_type(it)
            for msg in it:
                reveal_type(msg)
                reveal_type(msg.data)
                reveal_type(msg.subject)
                reveal_type(msg.headers)
                reveal_type(msg.metadata)
                reveal_type(msg.metadata.sequence.stream)
                reveal_type(msg.metadata.timestamp)
                msg.ack()
            reveal_type(it.next(timeout=1.0))

        fetched = cons.fetch(100, expires=5.0)
        reveal_type(fetched)
        for m in fetched:
            reveal_type(m)
        reveal_type(cons.next(timeout=5.0))

        cc = cons.consume(handler, max_messages=200)
        reveal_type(cc)
        reveal_type(cc.wait(timeout=10))

        kv = js.create_key_value("CONFIG", history=5)
        reveal_type(kv)
        reveal_type(js.key_value("CONFIG"))
        reveal_type(kv.put("db.url", b"postgres://"))
        entry = kv.get("db.url")
        reveal_type(entry)
        reveal_type(entry.value)
        reveal_type(entry.revision)

        store = js.create_object_store("files")
        reveal_type(store)
        reveal_type(js.object_store("files"))
        reveal_type(store.put("report.pdf", b"%PDF"))
        reveal_type(store.get_bytes("report.pdf"))
        with store.get("report.pdf") as result:
            reveal_type(result)
            reveal_type(result.read())

        reveal_type(nc.request("svc.echo", b"hi", timeout=2))
        worker(js, stream)


def worker(js: jss.JetStream, stream: jss.Stream) -> None:
    """A plain worker script: the lookup it writes gives the kind of handle it names."""
    cons: jss.Consumer = stream.consumer("c")
    same: jss.Consumer = js.consumer("ORDERS", "c")
    push: jss.PushConsumer = stream.push_consumer("p")
    also_push: jss.PushConsumer = js.push_consumer("ORDERS", "p")
    made: jss.Consumer = stream.create_or_update_consumer(jss.ConsumerConfig(durable_name="w"))
    made_push: jss.PushConsumer = js.create_push_consumer("ORDERS", durable_name="wp", deliver_subject="wp.in")
    made.delete()
    made_push.delete()
    for msg in cons.fetch(10, expires=5.0):
        msg.ack()
    same.unpin("jobs")
    with push.messages() as it:
        for m in it:
            m.ack()
    reveal_type(also_push.deliver_subject)
