"""OpenTelemetry (issue 22): a trace started in a Flask request handler that
publishes is continued by a worker's handler; spans and attributes follow the
messaging conventions; off by default, and uninstrument() restores."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any, List, Tuple

import pytest

import jetstream_sync as jss

from ..helpers import wait_until

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace  # noqa: E402
from .. import tracing
from ..tracing import DjangoWorker, Otel, order_app  # noqa: E402

Kind = trace.SpanKind


class Running:
    def __init__(self, worker: jss.Worker) -> None:
        self.status = None
        self.thread = threading.Thread(target=lambda: setattr(self, "status", worker.run()), daemon=True)
        self.thread.start()

    def wait(self, timeout: float) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive()
        return self.status


def test_a_flask_request_trace_is_continued_by_a_worker_handler(otel, nc, js, stream, subj, cons):
    app = order_app(otel, js, subj)

    assert app.test_client().post("/orders").status_code == 202

    handled: List[Tuple[Any, Any]] = []

    def handler(msg: jss.Msg) -> None:
        handled.append((msg, trace.get_current_span().get_span_context()))

    worker = jss.Worker(handler, client=nc, stream=stream.name, consumer=cons.name, stats_interval=None)
    run = Running(worker)
    wait_until(lambda: handled and otel.spans("process "))
    worker.stop()
    assert run.wait(10) == 0

    (request,) = otel.spans("POST /orders")
    (send,) = otel.spans(f"send {subj}")
    (process,) = otel.spans(f"process {subj}")
    (receive,) = otel.spans(f"receive {subj}")
    trace_id = request.context.trace_id
    assert {s.context.trace_id for s in (request, send, process)} == {trace_id}  # one trace
    # (the receive span is in the consumer's own context: linked, not parented, as the conventions say)
    # publish: a PRODUCER child of the request span, ended with the PubAck
    assert send.kind == Kind.PRODUCER and send.parent.span_id == request.context.span_id
    assert send.attributes["messaging.system"] == "nats"
    assert send.attributes["messaging.destination.name"] == subj
    assert send.attributes["messaging.operation.type"] == "send"
    assert send.attributes["messaging.message.id"] == "order-1"
    assert send.attributes["messaging.nats.stream"] == stream.name
    assert send.attributes["messaging.nats.stream.sequence"] == 1
    # the worker's handler ran inside a CONSUMER "process" span, child of and linked to the publish
    assert process.kind == Kind.CONSUMER and process.parent.span_id == send.context.span_id
    assert [link.context.span_id for link in process.links] == [send.context.span_id]
    assert handled[0][1].span_id == process.context.span_id  # current in the handler
    attrs = process.attributes
    assert attrs["messaging.operation.type"] == "process"
    assert attrs["messaging.nats.stream"] == stream.name and attrs["messaging.consumer.group.name"] == cons.name
    assert attrs["messaging.nats.stream.sequence"] == 1 and attrs["messaging.nats.consumer.sequence"] == 1
    assert attrs["messaging.nats.delivery_count"] == 1 and attrs["messaging.message.id"] == "order-1"
    # the receive span (the message handed out by messages()) links to the publish
    assert receive.kind == Kind.CONSUMER and [lk.context.span_id for lk in receive.links] == [send.context.span_id]
    # the traceparent travelled in the headers, next to the user's
    headers = handled[0][0].headers
    assert headers["Nats-Msg-Id"] == "order-1"
    assert headers["traceparent"].split("-")[1:3] == [f"{trace_id:032x}", f"{send.context.span_id:016x}"]
    wait_until(lambda: otel.counters().get("messaging.nats.acked.messages") == 1)
    counts = otel.counters()
    assert counts["messaging.client.sent.messages"] == 1 and counts["messaging.client.consumed.messages"] == 1


def test_a_django_worker_continues_the_trace_of_a_flask_request(otel, monkeypatch, server, nc, js, subj, cons):
    app = order_app(otel, js, subj)

    shipped = nc.subscribe("otel.shipped")
    # manage.py jetstream_worker tests.tracing:handle; the handler publishes onward
    worker = DjangoWorker(monkeypatch, server.url, cons.stream_name, cons.name,
                          then=lambda msg: nc.publish("otel.shipped", b"shipped " + msg.data))
    try:
        assert app.test_client().post("/orders").status_code == 202
        onward = shipped.next_msg(timeout=30)
    finally:
        worker.stop()
        shipped.unsubscribe()
    assert onward.data == b"shipped order-1"

    (request,) = otel.spans("POST /orders")
    (send,) = otel.spans(f"send {subj}")
    (process,) = otel.spans(f"process {subj}")
    (send_onward,) = otel.spans("send otel.shipped")
    (receive_onward,) = otel.spans("receive otel.shipped")
    trace_id = request.context.trace_id
    assert {s.context.trace_id for s in (request, send, process, send_onward)} == {trace_id}  # one trace
    assert send.parent.span_id == request.context.span_id
    # the Django worker's handler: a CONSUMER process span, child of and linked to the publish
    assert process.kind == Kind.CONSUMER and process.parent.span_id == send.context.span_id
    assert [link.context.span_id for link in process.links] == [send.context.span_id]
    assert process.attributes["messaging.consumer.group.name"] == cons.name
    (msg, current), = tracing.handled
    assert msg.data == b"order-1" and current.span_id == process.context.span_id  # current in the handler
    # what the handler publishes is the next hop of the same trace
    assert send_onward.kind == Kind.PRODUCER and send_onward.parent.span_id == process.context.span_id
    assert onward.headers["traceparent"].split("-")[1:3] == [f"{trace_id:032x}", f"{send_onward.context.span_id:016x}"]
    assert [link.context.span_id for link in receive_onward.links] == [send_onward.context.span_id]


def test_next_fetch_and_consume_continue_the_trace(otel, js, subj, cons):
    with otel.tracer.start_as_current_span("batch"):
        for i in range(3):
            js.publish(subj, b"%d" % i)
    sends = otel.spans("send ")
    assert len(sends) == 3
    msg = cons.next(timeout=5)
    msg.nak()
    fetched = list(cons.fetch(3, expires=5))  # the other two and the nak'd one again
    assert sorted(m.metadata.num_delivered for m in fetched) == [1, 1, 2]
    for m in fetched:
        m.ack()
    receives = otel.spans("receive ")
    assert len(receives) == 4
    send_ids = {s.context.span_id for s in sends}
    for r in receives:
        assert r.kind == Kind.CONSUMER and r.attributes["messaging.operation.type"] == "receive"
        assert {lk.context.span_id for lk in r.links} <= send_ids and len(r.links) == 1
    assert sorted(r.attributes["messaging.nats.delivery_count"] for r in receives) == [1, 1, 1, 2]
    counts = otel.counters()
    assert counts["messaging.client.consumed.messages"] == 4
    assert counts["messaging.nats.redelivered.messages"] == 1 and counts["messaging.nats.naked.messages"] == 1

    seen: List[Any] = []
    cc = cons.consume(lambda m: (seen.append(trace.get_current_span().get_span_context()), m.ack()))
    try:
        js.publish(subj, b"late")
        wait_until(lambda: seen)
    finally:
        cc.stop()
    # the process span ends when the handler has returned, on the consume's own thread
    process = wait_until(lambda: otel.spans("process "))[-1]
    assert seen[0].span_id == process.context.span_id
    assert process.parent.span_id == otel.spans("send ")[-1].context.span_id


def test_publish_async_span_ends_with_the_puback(otel, js, stream, subj):
    futs = [js.publish_async(subj, b"x") for _ in range(3)]
    acks = [f.result(timeout=5) for f in futs]
    wait_until(lambda: len(otel.spans("send ")) == 3)
    seqs = sorted(s.attributes["messaging.nats.stream.sequence"] for s in otel.spans("send "))
    assert seqs == sorted(a.seq for a in acks)
    assert all(s.kind == Kind.PRODUCER for s in otel.spans("send "))


def test_core_publish_and_request_carry_the_trace(otel, nc):
    sub = nc.subscribe("otel.core")
    nc.publish("otel.core", b"hi")
    msg = sub.next_msg(timeout=5)
    (send,) = otel.spans("send otel.core")
    assert send.kind == Kind.PRODUCER
    assert msg.headers["traceparent"].split("-")[2] == f"{send.context.span_id:016x}"

    replier = nc.subscribe("otel.svc", cb=lambda m: nc.publish(m.reply, m.headers["traceparent"].encode()))
    try:
        reply = nc.request("otel.svc", b"q", timeout=5)
    finally:
        replier.unsubscribe()
    (req,) = otel.spans("send otel.svc")
    assert req.kind == Kind.CLIENT and req.attributes["messaging.destination.name"] == "otel.svc"
    assert reply.data.decode().split("-")[2] == f"{req.context.span_id:016x}"
    sub.unsubscribe()


def test_off_by_default_and_uninstrument_restores(nc, js, subj, cons):
    o = Otel()
    trace_provider_spans = o.exporter
    js.publish(subj, b"plain")  # never instrumented: no headers added
    assert cons.next(timeout=5).headers is None
    jss.instrument(tracer_provider=o.tracer_provider, meter_provider=o.meter_provider)
    jss.uninstrument()
    with o.tracer.start_as_current_span("outer"):
        js.publish(subj, b"after")
        nc.publish(subj, b"core")
    for _ in range(2):
        msg = cons.next(timeout=5)
        assert msg.headers is None
    assert [s.name for s in trace_provider_spans.get_finished_spans()] == ["outer"]


def test_bad_input_raises_before_anything_is_sent_when_traced(otel, js, subj):
    with pytest.raises(jss.errors.InvalidOptionError):
        js.publish(subj, b"x", headers={"bad key": "v"})
    assert otel.spans() == []


def test_importing_the_package_does_not_import_opentelemetry():
    code = "import sys, jetstream_sync; assert not any(m.startswith('opentelemetry') for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_push_and_ordered_consumers_hand_out_linked_receive_spans(otel, js, stream, subj):
    js.publish(subj, b"one")
    (send,) = otel.spans("send ")
    p = stream.create_push_consumer(durable_name="p", deliver_subject=f"deliver.{stream.name}.p", ack_policy="explicit")
    with p.messages() as ctx:
        msg = ctx.next(timeout=5)
        msg.ack()
    with stream.ordered_consumer().messages() as ctx:
        ctx.next(timeout=5)
    receives = otel.spans("receive ")
    assert len(receives) == 2
    for r in receives:
        assert [lk.context.span_id for lk in r.links] == [send.context.span_id]
        assert r.attributes["messaging.nats.stream"] == stream.name


def test_a_service_handler_runs_in_a_process_span_under_the_request(otel, nc):
    svc = nc.add_service("otelsvc", "1.0.0")
    seen: List[Any] = []

    def handler(req: Any) -> None:
        seen.append(trace.get_current_span().get_span_context())
        req.respond(b"ok")

    svc.add_endpoint("h", handler, subject="otelsvc.h")
    try:
        with otel.tracer.start_as_current_span("caller"):
            assert nc.request("otelsvc.h", b"q", timeout=5).data == b"ok"
    finally:
        svc.stop()
    (req,) = otel.spans("send otelsvc.h")
    wait_until(lambda: otel.spans("process otelsvc.h"))
    (process,) = otel.spans("process otelsvc.h")
    assert process.parent.span_id == req.context.span_id and process.context.trace_id == req.context.trace_id
    assert seen[0].span_id == process.context.span_id


def test_a_failed_request_ends_its_span_with_an_error(otel, nc):
    with pytest.raises(jss.NoRespondersError):
        nc.request("otel.nobody", b"q", timeout=2)
    (span,) = otel.spans("send otel.nobody")
    assert span.status.status_code == trace.StatusCode.ERROR
    assert [e.name for e in span.events] == ["exception"]


def test_consumer_lag_is_the_num_pending_of_the_last_message_handed_out(otel, js, stream, subj, cons):
    for i in range(5):
        js.publish(subj, b"%d" % i)
    other = stream.create_consumer(durable_name="other", ack_policy="explicit")
    got = list(cons.fetch(2, expires=5))
    assert [m.metadata.num_pending for m in got] == [4, 3]
    labels = {"messaging.system": "nats", "messaging.nats.stream": stream.name}
    assert otel.points("messaging.nats.consumer.lag") == [({**labels, "messaging.consumer.group.name": cons.name}, 3)]
    other.next(timeout=5)
    cons.next(timeout=5)
    lags = {a["messaging.consumer.group.name"]: v for a, v in otel.points("messaging.nats.consumer.lag")}
    assert lags == {cons.name: 2, "other": 4}  # one gauge per consumer
    with stream.ordered_consumer().messages() as ctx:  # ordered: its own ephemeral consumer, one value too
        for _ in range(5):
            ctx.next(timeout=5)
    assert sorted(v for _, v in otel.points("messaging.nats.consumer.lag")) == [0, 2, 4]


def test_an_atomic_batch_is_one_send_span_whose_context_every_message_carries(otel, js, cons, subj):
    js.update_stream(name=cons.stream_name, subjects=[f"{subj.split('.')[0]}.>"], allow_atomic=True)
    with otel.tracer.start_as_current_span("import"):
        ack = js.publish_batch([(subj, b"1"), (subj, b"2", {"k": "v"}), (subj, b"3")])
    (request,) = otel.spans("import")
    (send,) = otel.spans("send ")
    assert send.name == f"send {subj}" and send.kind == Kind.PRODUCER
    assert send.parent.span_id == request.context.span_id
    attrs = send.attributes
    assert attrs["messaging.batch.message_count"] == 3 and attrs["messaging.nats.batch.id"] == ack.batch_id
    assert attrs["messaging.nats.stream.sequence"] == ack.seq == 3 and attrs["messaging.destination.name"] == subj
    msgs = list(cons.fetch(3, expires=5))
    assert [m.headers["traceparent"].split("-")[2] for m in msgs] == [f"{send.context.span_id:016x}"] * 3
    assert msgs[1].headers["k"] == "v"
    assert otel.counters()["messaging.client.sent.messages"] == 3
    # to several subjects: the span is named "send" without a destination
    js.publish_batch([(subj, b"a"), (subj + ".x", b"b")])
    assert [s.name for s in otel.spans("send")][-1] == "send"
    assert "messaging.destination.name" not in otel.spans("send")[-1].attributes


def test_a_refused_atomic_batch_ends_its_span_with_the_error(otel, js, stream, subj):
    with pytest.raises(jss.APIError):  # the stream has no allow_atomic
        js.publish_batch([(subj, b"1"), (subj, b"2")])
    (send,) = otel.spans("send ")
    assert send.status.status_code == trace.StatusCode.ERROR and [e.name for e in send.events] == ["exception"]
    with pytest.raises(jss.InvalidOptionError):  # bad input: no span at all
        js.publish_batch([(subj, b"1"), ("bad subject", b"2")])
    assert len(otel.spans("send")) == 1


def test_a_fast_batch_is_one_send_span_from_its_first_message_to_its_puback(otel, js, stream_name):
    name = f"FAST{stream_name}"
    js.create_stream(name=name, subjects=["otelfast.>"], allow_batched=True, max_msg_size=1024)
    try:
        with otel.tracer.start_as_current_span("load"):
            batch = js.fast_batch(flow=2)
        batch.add("otelfast.a", b"1")  # the span's parent is the context of its first message...
        with otel.tracer.start_as_current_span("elsewhere"):
            batch.add("otelfast.a", b"2", headers={"k": "v"})  # ...not of later calls
        assert otel.spans("send ") == []  # open until the PubAck
        ack = batch.commit("otelfast.a", b"3")
        (send,) = otel.spans("send ")
        assert send.name == "send otelfast.a" and send.kind == Kind.PRODUCER and send.parent is None
        attrs = send.attributes
        assert attrs["messaging.batch.message_count"] == 3 and attrs["messaging.nats.batch.id"] == ack.batch_id
        assert attrs["messaging.nats.stream"] == name and attrs["messaging.nats.stream.sequence"] == 3
        stored = [js.get_msg(name, seq=i) for i in (1, 2, 3)]
        assert {m.headers["traceparent"].split("-")[2] for m in stored} == {f"{send.context.span_id:016x}"}
        assert stored[1].headers["k"] == "v"
        assert otel.counters()["messaging.client.sent.messages"] == 3

        with otel.tracer.start_as_current_span("load") as load:
            with pytest.raises(jss.FastBatchError):
                js.publish_fast_batch([("otelfast.b", b"ok")] * 3 + [("otelfast.b", b"x" * 2000)] + [("otelfast.b", b"ok")] * 30,
                                      flow=2, max_outstanding_acks=1)  # fmt: skip
        failed = otel.spans("send ")[-1]
        assert failed.parent.span_id == load.get_span_context().span_id
        assert failed.status.status_code == trace.StatusCode.ERROR
        assert [e.attributes["exception.type"] for e in failed.events] == ["jetstream_sync.FastBatchError"]
    finally:
        js.delete_stream(name)


def test_a_core_subscription_hands_out_receive_spans_and_runs_its_callback_in_a_process_span(otel, nc):
    sub = nc.subscribe("otel.sub")
    seen: List[Any] = []
    cb_sub = nc.subscribe("otel.cb", cb=lambda m: seen.append(trace.get_current_span().get_span_context()))
    try:
        with otel.tracer.start_as_current_span("caller"):
            nc.publish("otel.sub", b"a")
            nc.publish("otel.cb", b"b")
        msg = sub.next_msg(timeout=5)
        wait_until(lambda: seen and otel.spans("process otel.cb"))
    finally:
        sub.unsubscribe()
        cb_sub.unsubscribe()
    (send_a,) = otel.spans("send otel.sub")
    (receive,) = otel.spans("receive otel.sub")
    assert msg.data == b"a" and receive.kind == Kind.CONSUMER
    assert [lk.context.span_id for lk in receive.links] == [send_a.context.span_id]
    assert receive.attributes["messaging.operation.type"] == "receive"
    (send_b,) = otel.spans("send otel.cb")
    (process,) = otel.spans("process otel.cb")
    assert process.kind == Kind.CONSUMER and process.parent.span_id == send_b.context.span_id
    assert process.context.trace_id == send_b.context.trace_id
    assert [lk.context.span_id for lk in process.links] == [send_b.context.span_id]
    assert seen[0].span_id == process.context.span_id  # current in the callback
    assert otel.spans("receive otel.cb") == []  # a callback's message gets the process span only


def _in_a_thread(fn: Any) -> None:
    """Run ``fn`` on another thread (an executor's task: no span of the caller is current there)."""
    errors: List[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert not t.is_alive() and not errors, errors


def test_publish_partition_continues_the_drivers_trace_on_an_instrumented_executor(otel, server, js, subj, cons):
    from jetstream_sync.spark import publish_partition

    with otel.tracer.start_as_current_span("handler") as handler:
        write = publish_partition(server.url, subject=subj)  # on the driver: the current span is captured
    _in_a_thread(lambda: write(iter([{"data": b"1"}, {"data": b"2"}])))
    sends = otel.spans(f"send {subj}")
    assert len(sends) == 2
    assert {s.parent.span_id for s in sends} == {handler.get_span_context().span_id}
    assert {s.context.trace_id for s in sends} == {handler.get_span_context().trace_id}
    msgs = list(cons.fetch(2, expires=5))
    assert {m.headers["traceparent"].split("-")[2] for m in msgs} == {f"{s.context.span_id:016x}" for s in sends}


def test_publish_partition_carries_the_drivers_trace_to_an_executor_without_instrumentation(otel, server, js, subj, cons):
    from jetstream_sync.spark import publish_partition

    with otel.tracer.start_as_current_span("handler") as handler:
        write = publish_partition(server.url, subject=subj)
    jss.uninstrument()  # the executor's process: nothing instrumented there
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    rows = [{"data": b"1", "headers": None}, {"data": b"2", "headers": {"traceparent": own, "k": "v"}}]
    _in_a_thread(lambda: write(iter(rows)))
    first, second = cons.fetch(2, expires=5)
    ctx = handler.get_span_context()
    assert first.headers["traceparent"].split("-")[:3] == ["00", f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"]
    assert second.headers == {"traceparent": own, "k": "v"}  # a row's own trace context wins
    # an explicit traceparent, as a data source option would give it
    explicit = publish_partition(server.url, subject=subj, traceparent=own, tracestate="v=1")
    _in_a_thread(lambda: explicit(iter([{"data": b"3"}])))
    assert cons.next(timeout=5).headers == {"traceparent": own, "tracestate": "v=1"}
    with pytest.raises(jss.InvalidOptionError, match="traceparent"):
        publish_partition(server.url, subject=subj, traceparent="00-abc")
