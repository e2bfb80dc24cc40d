"""Fixtures: a real nats-server on a loopback port, and clients on it.

The servers, clusters and fault helpers are the test kit's that users get
(jetstream_sync.testing: its plugin's ``nats_server``, ``nats_cluster`` and
``client`` fixtures); the names below are what this project's tests call them.
"""

from __future__ import annotations

import itertools
import os
import signal
from typing import TYPE_CHECKING, Iterator

import pytest

import jetstream_sync as jss
from jetstream_sync.testing import ClusterFactory, NatsCluster, NatsServer

from .helpers import wait_until

if TYPE_CHECKING:
    from .tracing import Otel

# The kit's fixtures, whether or not the installed package registered its entry
# point (the entry point has this name, so pytest loads the plugin once).
pytest_plugins = ["jetstream_sync.testing.plugin"]

_names = itertools.count(1)

# A run started in the background (`pytest &` in a script, CI runners that do
# so) inherits an ignored SIGINT, and so would the processes the Ctrl-C tests
# start (Python and the worker leave an ignored SIGINT alone, as they should).
# Those tests check what Ctrl-C in a terminal does: give SIGINT back its default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def server() -> Iterator[NatsServer]:
    """One server shared by the tests that need no faults."""
    srv = NatsServer().start()
    yield srv
    srv.cleanup()


@pytest.fixture
def private_server(nats_server: NatsServer) -> NatsServer:
    """A server of the test's own, free to restart, pause or stop (the kit's ``nats_server``)."""
    return nats_server


@pytest.fixture
def fnc(client: jss.Client) -> jss.Client:
    """A client of ``private_server`` that keeps reconnecting, for fault tests (the kit's ``client``)."""
    return client


@pytest.fixture
def nc(server: NatsServer) -> Iterator[jss.Client]:
    client = jss.connect(server.url, name="test")
    yield client
    if not client.is_closed:
        js = client.jetstream()
        names = js.stream_names()
        for name in names:
            js.delete_stream(name)
        # The server renames a deleted stream's directory and removes it in the
        # background; a test re-creating the same name before that is done once
        # got the old stream's last sequence (KV_TEST at 3 instead of 1).
        streams = os.path.join(server.store_dir, "jetstream", "$G", "streams")
        left = [os.path.join(streams, d) for name in names for d in (name, "." + name)]
        wait_until(lambda: not any(os.path.exists(p) for p in left), timeout=30)
    client.close()


@pytest.fixture
def js(nc: jss.Client) -> jss.JetStream:
    return nc.jetstream()


@pytest.fixture
def stream_name() -> str:
    return f"T{next(_names)}"


@pytest.fixture
def stream(js: jss.JetStream, stream_name: str, server: NatsServer) -> jss.Stream:
    """A fresh file-storage stream capturing ``<name>.>``."""
    try:
        return js.create_stream(name=stream_name, subjects=[f"{stream_name.lower()}.>"])
    except jss.APIError as exc:
        # Seen twice in ~10 full runs: 500/10049 "error creating store for
        # stream"; the server logs the cause ("Stream create failed ...").
        raise AssertionError(f"creating {stream_name} failed: {exc}\nserver log:\n{server.log_tail(40)}") from exc


@pytest.fixture
def subj(stream: jss.Stream) -> str:
    """A subject of ``stream``."""
    return f"{stream.name.lower()}.x"


@pytest.fixture
def cons(stream: jss.Stream) -> jss.Consumer:
    """A durable pull consumer ``c`` on ``stream`` with explicit acks."""
    return stream.create_consumer(durable_name="c", ack_policy="explicit")


@pytest.fixture
def cluster(nats_cluster: ClusterFactory) -> NatsCluster:
    """Three routed JetStream servers of the test's own (the kit's ``nats_cluster(3)``)."""
    return nats_cluster(3)


@pytest.fixture
def otel() -> Iterator["Otel"]:
    """OpenTelemetry on, into in-memory providers (tests/tracing.py), for the test; off after it."""
    pytest.importorskip("opentelemetry.sdk")
    from .tracing import Otel

    o = Otel()
    jss.instrument(tracer_provider=o.tracer_provider, meter_provider=o.meter_provider)
    try:
        yield o
    finally:
        jss.uninstrument()
