"""OpenTelemetry instrumentation, off by default.

``active`` is None until :func:`instrument` is called; every hot path checks
only ``otel.active is not None`` and does nothing more when it is None.
opentelemetry (the ``otel`` extra, ``opentelemetry-api``) is imported by
:func:`instrument` only, never when the package is imported.

Spans follow the OpenTelemetry messaging semantic conventions
(``messaging.system=nats``): ``send <subject>`` (PRODUCER) for publishes,
``send <subject>`` (CLIENT) for core requests, ``receive <subject>``
(CONSUMER, linked to the producer's context) for every message a consumer
hands out, and ``process <subject>`` (CONSUMER, child of and linked to the
producer's context) around handler calls; a batch is one ``send`` span
whose context all its messages carry. W3C ``traceparent`` /
``tracestate`` travel in the message headers. Counters, and consumer lag as
a gauge, go through the metrics API.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from typing import Any, Dict, Iterator, List, Optional, Tuple

from .. import options

Msg = Any  # a _core.message.Msg (not imported: message.py imports this module)

# The instrumentation in force, or None (off): the one thing hot paths look at.
active: Optional["Instrumentation"] = None

SCOPE = "jetstream_sync"
SYSTEM = "nats"


class Instrumentation:
    """The tracer, meter and counters used while instrumentation is on."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        # opentelemetry is an optional dependency: imported here, when turned on.
        from opentelemetry import context, metrics, propagate, trace

        self._trace = trace
        self._context = context
        self._propagate = propagate
        self._kind = trace.SpanKind
        self.tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self.published = meter.create_counter("messaging.client.sent.messages", unit="{message}",
                                              description="Messages published (core and JetStream)")
        self.consumed = meter.create_counter("messaging.client.consumed.messages", unit="{message}",
                                             description="Messages handed to the user by a consumer")
        self.acked = meter.create_counter("messaging.nats.acked.messages", unit="{message}",
                                          description="JetStream messages acknowledged (+ACK)")
        self.naked = meter.create_counter("messaging.nats.naked.messages", unit="{message}",
                                          description="JetStream messages negatively acknowledged (-NAK)")
        self.redelivered = meter.create_counter("messaging.nats.redelivered.messages", unit="{message}",
                                                description="Messages handed out with a delivery count above 1")
        # The conventions name no lag metric (Kafka's was dropped): ours, recorded per message handed out.
        self.lag = meter.create_gauge("messaging.nats.consumer.lag", unit="{message}",
                                      description="Messages pending on the server for the consumer (the num_pending "
                                                  "of the last message it handed out)")

    # -- producing ----------------------------------------------------------

    def _inject(self, headers: Optional[Dict[str, str]], payload: bytes, max_payload: int) -> Tuple[Dict[str, str], bytes]:
        """The headers with the current context's ``traceparent``/``tracestate``
        added, and their header block; too big a message raises before sending."""
        out = dict(headers) if headers else {}
        self._propagate.inject(out)
        block = options.header_block(out)
        options.payload_size(len(block) + len(payload), max_payload)
        return out, block

    def _attrs(self, subject: str, operation: str, payload: bytes, headers: Optional[Dict[str, str]]) -> Dict[str, Any]:
        attrs: Dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": subject,
            "messaging.operation.type": operation,
            "messaging.operation.name": operation,
            "messaging.message.body.size": len(payload),
        }
        if headers and "Nats-Msg-Id" in headers:
            attrs["messaging.message.id"] = headers["Nats-Msg-Id"]
        return attrs

    def _failed(self, span: Any, exc: Optional[BaseException]) -> None:
        """End ``span`` with an error status (and the exception as an event)."""
        if exc is not None:
            span.record_exception(exc)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(exc) if exc is not None else "cancelled"))
        span.end()

    @contextlib.contextmanager
    def _producing(self, name: str, kind: Any, attrs: Dict[str, Any]) -> Iterator[Any]:
        """A span made current that ends with an error if the block raises,
        and stays open (for the PubAck) if it does not."""
        with self.tracer.start_as_current_span(
            name, kind=kind, attributes=attrs,
            end_on_exit=False, record_exception=False, set_status_on_exception=False,  # done in _failed, once
        ) as span:
            try:
                yield span
            except BaseException as exc:
                self._failed(span, exc)
                raise

    @contextlib.contextmanager
    def send(self, subject: str, payload: bytes, headers: Optional[Dict[str, str]], max_payload: int,
             client: bool = False) -> Iterator[Tuple[Any, Dict[str, str], bytes]]:
        """A ``send`` span (PRODUCER, or CLIENT for a request) made current;
        yields (span, headers with the trace context, their header block)."""
        kind = self._kind.CLIENT if client else self._kind.PRODUCER
        with self._producing(f"send {subject}", kind, self._attrs(subject, "send", payload, headers)) as span:
            hdrs, block = self._inject(headers, payload, max_payload)
            yield span, hdrs, block
        self.published.add(1, {"messaging.system": SYSTEM, "messaging.destination.name": subject})

    def _batch_attrs(self, subjects: List[str], batch_id: str) -> Tuple[str, Dict[str, Any]]:
        """The name and attributes of a batch's ``send`` span: ``send <subject>``
        when every message goes to one subject, else ``send`` (the conventions)."""
        attrs: Dict[str, Any] = {"messaging.system": SYSTEM, "messaging.operation.type": "send",
                                 "messaging.operation.name": "send", "messaging.nats.batch.id": batch_id}
        if len(set(subjects)) == 1:
            attrs["messaging.destination.name"] = subjects[0]
            return f"send {subjects[0]}", attrs
        return "send", attrs

    @contextlib.contextmanager
    def send_batch(self, subjects: List[str], batch_id: str) -> Iterator[Tuple[Any, Dict[str, str]]]:
        """One ``send`` span (PRODUCER) for an atomic batch of messages to
        ``subjects``, made current; yields (span, the trace headers that every
        message of the batch carries). End it with :meth:`puback`."""
        name, attrs = self._batch_attrs(subjects, batch_id)
        attrs["messaging.batch.message_count"] = len(subjects)
        with self._producing(name, self._kind.PRODUCER, attrs) as span:
            carrier: Dict[str, str] = {}
            self._propagate.inject(carrier)
            yield span, carrier
        for subject in subjects:
            self.published.add(1, {"messaging.system": SYSTEM, "messaging.destination.name": subject})

    def start_stream_batch(self, subject: str, batch_id: str) -> Tuple[Any, Dict[str, str]]:
        """A ``send`` span (PRODUCER, child of the current context, not made
        current) for a fast batch that spans several calls, and the trace
        headers its messages carry. End it with :meth:`stream_batch_ended`."""
        name, attrs = self._batch_attrs([subject], batch_id)
        span = self.tracer.start_span(name, kind=self._kind.PRODUCER, attributes=attrs)
        carrier: Dict[str, str] = {}
        self._propagate.inject(carrier, context=self._trace.set_span_in_context(span))
        return span, carrier

    def stream_batch_ended(self, span: Any, ack: Any, exc: Optional[BaseException], subject: str) -> None:
        """End a fast batch's span: with its PubAck, or with the error that ended it."""
        if exc is not None:
            self._failed(span, exc)
            return
        span.set_attribute("messaging.batch.message_count", ack.batch_size or 0)
        self.published.add(ack.batch_size or 0, {"messaging.system": SYSTEM, "messaging.destination.name": subject})
        self.puback(span, ack)

    def puback(self, span: Any, ack: Any) -> None:
        """Record a PubAck on a publish span and end it."""
        span.set_attribute("messaging.nats.stream", ack.stream)
        span.set_attribute("messaging.nats.stream.sequence", ack.seq)
        if ack.duplicate:
            span.set_attribute("messaging.nats.duplicate", True)
        span.end()

    def puback_future(self, span: Any, fut: "concurrent.futures.Future[Any]") -> None:
        """End ``span`` when the publish_async Future resolves (PubAck or error)."""
        def done(f: "concurrent.futures.Future[Any]") -> None:
            exc = f.exception() if not f.cancelled() else None
            if f.cancelled() or exc is not None:
                self._failed(span, exc)
            else:
                self.puback(span, f.result())

        fut.add_done_callback(done)

    # -- consuming ----------------------------------------------------------

    def _msg_attrs(self, msg: "Msg", operation: str) -> Dict[str, Any]:
        headers = msg.headers
        attrs = self._attrs(msg.subject, operation, msg.data, headers)
        if msg.reply.startswith("$JS.ACK."):
            meta = msg.metadata
            attrs["messaging.nats.stream"] = meta.stream
            attrs["messaging.consumer.group.name"] = meta.consumer
            attrs["messaging.nats.stream.sequence"] = meta.sequence.stream
            attrs["messaging.nats.consumer.sequence"] = meta.sequence.consumer
            attrs["messaging.nats.delivery_count"] = meta.num_delivered
        return attrs

    def _producer(self, msg: "Msg") -> Tuple[Any, list]:  # type: ignore[type-arg]
        """The producer's context from the headers and a link to it (if any)."""
        parent = self._propagate.extract(msg.headers or {})
        sc = self._trace.get_current_span(parent).get_span_context()
        links = [self._trace.Link(sc)] if sc.is_valid else []
        return parent, links

    def received(self, msg: "Msg") -> None:
        """A ``receive`` span (CONSUMER, linked to the producer) for a message
        handed to the user, and the consumed/redelivered counters."""
        attrs = self._msg_attrs(msg, "receive")
        _, links = self._producer(msg)
        span = self.tracer.start_span(f"receive {msg.subject}", kind=self._kind.CONSUMER, attributes=attrs, links=links)
        span.end()
        labels = {"messaging.system": SYSTEM, "messaging.destination.name": msg.subject}
        self.consumed.add(1, labels)
        if attrs.get("messaging.nats.delivery_count", 1) > 1:
            self.redelivered.add(1, labels)
        if "messaging.nats.stream" in attrs:  # a JetStream message: its reply subject says what is left
            self.lag.set(msg.metadata.num_pending, {
                "messaging.system": SYSTEM, "messaging.nats.stream": attrs["messaging.nats.stream"],
                "messaging.consumer.group.name": attrs["messaging.consumer.group.name"],
            })

    @contextlib.contextmanager
    def process(self, msg: "Msg") -> Iterator[Any]:
        """A ``process`` span (CONSUMER) around a handler call: child of the
        producer's context (and linked to it), current while the handler runs."""
        parent, links = self._producer(msg)
        with self.tracer.start_as_current_span(
            f"process {msg.subject}", context=parent, kind=self._kind.CONSUMER,
            attributes=self._msg_attrs(msg, "process"), links=links,
        ) as span:
            yield span

    def current_headers(self) -> Dict[str, str]:
        """The W3C trace headers of the current context ({} when no span is current)."""
        carrier: Dict[str, str] = {}
        self._propagate.inject(carrier)
        return carrier

    @contextlib.contextmanager
    def attached(self, headers: Dict[str, str]) -> Iterator[None]:
        """The context of these W3C trace headers made current (a process
        continuing work started elsewhere: a Spark task, its driver's)."""
        token = self._context.attach(self._propagate.extract(headers))
        try:
            yield
        finally:
            self._context.detach(token)

    def settled(self, msg: "Msg", nak: bool) -> None:
        """Count an ack or a nak."""
        (self.naked if nak else self.acked).add(1, {"messaging.system": SYSTEM, "messaging.destination.name": msg.subject})


def instrument(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Turn OpenTelemetry instrumentation on for every connection of this
    process (idempotent: a second call replaces the providers).

    ``tracer_provider`` / ``meter_provider`` default to the global ones
    (``opentelemetry.trace`` / ``opentelemetry.metrics``). Needs the ``otel``
    extra (``pip install jetstream-sync[otel]``); without opentelemetry-api
    raises ImportError and changes nothing.
    """
    global active
    active = Instrumentation(tracer_provider, meter_provider)


def trace_headers() -> Dict[str, str]:
    """The ``traceparent``/``tracestate`` of the current span, to carry it to
    another process; {} when instrumentation is off or no span is current."""
    tr = active
    return tr.current_headers() if tr is not None else {}


def uninstrument() -> None:
    """Turn instrumentation off again: no spans, no metrics, headers as given."""
    global active
    active = None
