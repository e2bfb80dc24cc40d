"""The pytest plugin of the test kit: fixtures with a real nats-server.

Registered through the ``pytest11`` entry point ``jetstream_sync.testing.plugin``,
so installing jetstream-sync makes these fixtures available to every test
(disable with ``-p no:jetstream_sync.testing.plugin``). Every fixture is
function-scoped: each test gets servers of its own, free to restart, pause or
kill, and a clean JetStream store; a server starts in about a tenth of a second.
For one server shared by many tests, start a :class:`NatsServer` in a
session-scoped fixture of your own (see docs/testing.md).

- ``nats_server``: a started :class:`NatsServer` with JetStream on a free
  loopback port, its store in ``tmp_path / "nats"``; stopped after the test.
- ``nats_cluster``: a factory, ``nats_cluster(size=3, timeout=30.0, config=None)``, of
  started :class:`NatsCluster` s (routes on loopback, JetStream, each store
  under ``tmp_path``); every cluster made is stopped after the test.
- ``client``: a ``jss.Client`` connected to ``nats_server`` that reconnects
  every 0.2 s for as long as it takes (so it survives a restart); closed
  after the test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, List, Optional

import pytest

from ..client import Client, connect
from .cluster import ClusterFactory, NatsCluster
from .server import NatsServer

__all__ = ["nats_server", "nats_cluster", "client"]


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A nats-server of the test's own (JetStream on, a free loopback port,
    the store in ``tmp_path / "nats"``), stopped after the test."""
    server = NatsServer(store_dir=str(tmp_path / "nats")).start()
    yield server
    server.cleanup()


@pytest.fixture
def nats_cluster(tmp_path: Path) -> Iterator[ClusterFactory]:
    """``nats_cluster(size=3, timeout=30.0, config=None)`` starts a cluster of
    ``size`` routed JetStream servers (stores under ``tmp_path``; ``config`` a
    configuration file each reads, e.g. accounts with a system account) and
    waits up to ``timeout`` seconds for each to be ready; all are stopped
    after the test."""
    made: List[NatsCluster] = []

    def make(size: int = 3, *, timeout: float = 30.0, config: Optional[str] = None) -> NatsCluster:
        cluster = NatsCluster(size, store_root=str(tmp_path / f"nats-cluster-{len(made)}"), config=config)
        made.append(cluster)
        return cluster.start(timeout)

    yield make
    for cluster in made:
        cluster.cleanup()


@pytest.fixture
def client(nats_server: NatsServer) -> Iterator[Client]:
    """A client of ``nats_server`` that keeps reconnecting (every 0.2 s, for
    ever) across a restart; closed after the test."""
    nc = connect(nats_server.url, name="jetstream-sync-testing", reconnect_time_wait=0.2, max_reconnect_attempts=-1)
    yield nc
    nc.close()
