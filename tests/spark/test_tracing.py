"""Issue 22's trace, end to end: a Flask request publishes, a Django worker
(``manage.py jetstream_worker``) handles the message and starts a Spark write
(``df.write.format("jetstream")``), and the written messages' handler is still
in the request's trace. Spark's executors are not instrumented: the write's
messages carry the driver's trace context, given as the writer's options."""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest

import jetstream_sync as jss
from jetstream_sync.spark import trace_options

from ..helpers import wait_until

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("flask")

from opentelemetry import trace  # noqa: E402

from ..tracing import DjangoWorker, order_app  # noqa: E402

Kind = trace.SpanKind


@pytest.mark.timeout(180)
def test_a_trace_crosses_flask_jetstream_a_django_worker_and_a_spark_write(spark, server, otel, monkeypatch, js, stream):
    orders, report = f"{stream.name.lower()}.orders", f"{stream.name.lower()}.report"
    # A first Spark job on a busy machine can take longer than the default AckWait (30 s).
    django_cons = stream.create_consumer(durable_name="django", filter_subject=orders, ack_policy="explicit", ack_wait=600)
    report_cons = stream.create_consumer(durable_name="report", filter_subject=report, ack_policy="explicit")
    app = order_app(otel, js, orders)

    written: List[Any] = []  # the options the Django handler gave the Spark write

    def spark_write(msg: jss.Msg) -> None:  # in the Django handler, inside its process span
        opts = trace_options()
        written.append(opts)
        df = spark.createDataFrame([(b"report of " + msg.data,)], "data binary")
        df.write.format("jetstream").option("servers", server.url).option("subject", report).options(**opts) \
            .mode("append").save()

    worker = DjangoWorker(monkeypatch, server.url, stream.name, django_cons.name, then=spark_write)
    reported: List[Tuple[jss.Msg, Any]] = []
    handling = report_cons.consume(lambda m: (reported.append((m, trace.get_current_span().get_span_context())), m.ack()))
    try:
        assert app.test_client().post("/orders").status_code == 202
        wait_until(lambda: reported and otel.spans(f"process {report}") and otel.spans(f"process {orders}"), timeout=150)
    finally:
        handling.stop()
        worker.stop()

    (request,) = otel.spans("POST /orders")
    (send,) = otel.spans(f"send {orders}")
    (django,) = otel.spans(f"process {orders}")
    (report_process,) = otel.spans(f"process {report}")
    trace_id = request.context.trace_id
    assert {s.context.trace_id for s in (request, send, django, report_process)} == {trace_id}  # one trace
    assert send.kind == Kind.PRODUCER and send.parent.span_id == request.context.span_id
    assert django.kind == Kind.CONSUMER and django.parent.span_id == send.context.span_id
    assert [link.context.span_id for link in django.links] == [send.context.span_id]
    # the Spark write's messages carry the Django handler's span (the executors made no span of their own)
    (msg, current), = reported
    assert msg.data == b"report of order-1"
    assert written[0]["traceparent"].split("-")[1:3] == [f"{trace_id:032x}", f"{django.context.span_id:016x}"]
    assert msg.headers["traceparent"] == written[0]["traceparent"]
    assert otel.spans(f"send {report}") == []
    # and their handler is a child of (and linked to) the Django handler's span
    assert report_process.kind == Kind.CONSUMER and report_process.parent.span_id == django.context.span_id
    assert [link.context.span_id for link in report_process.links] == [django.context.span_id]
    assert current.span_id == report_process.context.span_id


def test_a_malformed_traceparent_option_fails_the_write_before_any_task(spark, server, js, stream):
    df = spark.createDataFrame([(b"x",)], "data binary")
    with pytest.raises(Exception, match="must be a W3C traceparent"):
        df.write.format("jetstream").option("servers", server.url).option("subject", f"{stream.name.lower()}.x") \
            .option("traceparent", "00-not-a-trace").mode("append").save()
    assert js.stream_info(stream.name).state.messages == 0
    assert trace_options() == {}  # off, or no span current: nothing to give
