"""Tracing tests' helpers: in-memory OpenTelemetry providers, and a Django
worker (``manage.py jetstream_worker``) run in this process, so that its spans
land in the same in-memory exporter as the test's."""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

import jetstream_sync as jss

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Otel:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("app")

    def spans(self, name_prefix: str = "") -> List[Any]:
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(name_prefix)]

    def counters(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out[m.name] = sum(p.value for p in m.data.data_points)
        return out

    def points(self, name: str) -> List[Tuple[Dict[str, Any], Any]]:
        """(attributes, value) of each data point of the metric ``name``."""
        data = self.reader.get_metrics_data()
        return [
            (dict(p.attributes), p.value)
            for rm in (data.resource_metrics if data else []) for sm in rm.scope_metrics
            for m in sm.metrics if m.name == name for p in m.data.data_points
        ]


def order_app(otel: Otel, js: jss.JetStream, subject: str) -> Any:
    """A Flask app whose ``POST /orders`` publishes ``order-1`` to ``subject``
    inside a SERVER span named ``POST /orders``: where the trace starts."""
    flask = pytest.importorskip("flask")
    from opentelemetry.trace import SpanKind

    app = flask.Flask("orders")

    @app.post("/orders")
    def create_order() -> Tuple[str, int]:
        with otel.tracer.start_as_current_span("POST /orders", kind=SpanKind.SERVER):
            js.publish(subject, b"order-1", msg_id="order-1")
        return "queued", 202

    return app


# -- a Django worker in this process ---------------------------------------------------

DJANGO_APP = "jetstream_sync.contrib.django"

# What the Django handler below does after noting the message; set by a test.
next_step: Optional[Callable[[jss.Msg], None]] = None
handled: List[Tuple[jss.Msg, Any]] = []  # (message, the span context current in the handler)


def handle(msg: jss.Msg) -> None:
    """The Django worker's handler (``tests.tracing:handle``)."""
    from opentelemetry import trace

    handled.append((msg, trace.get_current_span().get_span_context()))
    if next_step is not None:
        next_step(msg)


def django_configured() -> None:
    """Django settings for this process (once): the contrib app, an in-memory database."""
    django = pytest.importorskip("django")
    from django.conf import settings

    if not settings.configured:
        settings.configure(INSTALLED_APPS=[DJANGO_APP], USE_TZ=True,
                           DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}})
        django.setup()
    elif DJANGO_APP not in settings.INSTALLED_APPS:  # pragma: no cover - another test configured Django
        pytest.skip("Django is configured without jetstream_sync.contrib.django in this process")


class DjangoWorker:
    """``manage.py jetstream_worker tests.tracing:handle`` run by Django's
    call_command on a thread; :meth:`stop` stops the Worker the command built."""

    def __init__(self, monkeypatch: Any, server_url: str, stream: str, consumer: str,
                 then: Optional[Callable[[jss.Msg], None]] = None) -> None:
        django_configured()
        from django.core.management import call_command

        from jetstream_sync.contrib.django.management.commands import jetstream_worker as command

        built: List[jss.Worker] = []

        def build_worker(*args: Any, **kwargs: Any) -> jss.Worker:
            built.append(real(*args, **kwargs))
            return built[-1]

        real = command.build_worker
        monkeypatch.setattr(command, "build_worker", build_worker)
        monkeypatch.setattr(f"{__name__}.next_step", then)
        handled.clear()
        self._built = built
        self.error: Optional[BaseException] = None

        def run() -> None:
            try:
                call_command("jetstream_worker", "tests.tracing:handle", "--server", server_url, "--stream", stream,
                             "--consumer", consumer, "--stats-interval", "0", "--log-level", "WARNING")
            except BaseException as exc:  # noqa: BLE001 - the test looks
                self.error = exc

        self.thread = threading.Thread(target=run, name="django-worker", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        from jetstream_sync.testing import wait_until

        wait_until(lambda: self._built or not self.thread.is_alive(), timeout=timeout)
        if self._built:
            self._built[0].stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the Django worker did not stop"
        assert self.error is None, self.error
