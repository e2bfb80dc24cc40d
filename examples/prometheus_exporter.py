"""Expose a client's and a consumer's counters to Prometheus.

The collector reads the stats dicts at each scrape (``Client.stats``,
``ctx.stats.as_dict()``), so there is nothing to update by hand on the hot path.
Run with ``pip install prometheus-client``. This script consumes 100 messages,
scrapes itself once and ends; a service keeps ``start_http_server`` running for
as long as it consumes.
"""

from __future__ import annotations

import os
import urllib.request
from typing import Dict, Iterator, Union

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

import jetstream_sync as jss

Context = Union[jss.MessagesContext, jss.ConsumeContext]


class JetStreamCollector:
    """Client counters, plus the counters of the named consume contexts."""

    def __init__(self, nc: jss.Client, contexts: Dict[str, Context]) -> None:
        self.nc, self.contexts = nc, contexts

    def collect(self) -> Iterator[Metric]:
        client = CounterMetricFamily("jetstream_client", "Client counters", labels=["counter"])
        for name, value in self.nc.stats.items():
            client.add_metric([name], value)
        yield client
        counters = CounterMetricFamily("jetstream_consume", "Consume counters", labels=["context", "counter"])
        high_water = GaugeMetricFamily("jetstream_consume_high_water", "Most buffered", labels=["context", "unit"])
        statuses = CounterMetricFamily("jetstream_consume_status", "Pull statuses", labels=["context", "status"])
        for ctx_name, ctx in self.contexts.items():
            stats = ctx.stats.as_dict()
            for status, count in stats.pop("statuses").items():
                statuses.add_metric([ctx_name, status], count)
            high_water.add_metric([ctx_name, "messages"], stats.pop("buffered_high_water"))
            high_water.add_metric([ctx_name, "bytes"], stats.pop("buffered_bytes_high_water"))
            for name, value in stats.items():
                counters.add_metric([ctx_name, name], value)
        yield from (counters, high_water, statuses)


def main() -> None:
    url = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
    port = int(os.environ.get("METRICS_PORT", "9464"))
    with jss.connect(url, name="metrics-example") as nc:
        js = nc.jetstream()
        stream = js.create_stream(name="EXAMPLE_METRICS", subjects=["example.metrics.>"])
        try:
            for i in range(100):
                js.publish("example.metrics.order", b"%d" % i)
            cons = stream.create_consumer(durable_name="billing", ack_policy="explicit")
            with cons.messages(max_messages=50) as ctx:
                registry = CollectorRegistry()
                registry.register(JetStreamCollector(nc, {"billing": ctx}))
                server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
                for n, msg in enumerate(ctx, 1):
                    msg.ack()
                    if n == 100:
                        break
                scrape = f"http://127.0.0.1:{server.server_port}/metrics"
                with urllib.request.urlopen(scrape, timeout=5) as page:
                    text = page.read().decode()
                server.shutdown()
            print(next(line for line in text.splitlines() if line.startswith('jetstream_consume_total{context="billing",counter="delivered"}')))
        finally:
            js.delete_stream(stream.name)


if __name__ == "__main__":
    main()
