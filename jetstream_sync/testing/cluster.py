"""A cluster of nats-servers with JetStream, routed together on loopback ports."""

from __future__ import annotations

import os
from typing import Any, List, Optional, Protocol, Sequence

from .server import HOST, NatsServer, free_port
from .waiting import wait_until

__all__ = ["ClusterFactory", "NatsCluster"]


class NatsCluster:
    """``size`` JetStream servers (default 3) routed together on loopback.

    :param size: how many servers (default 3); named ``n0``, ``n1`` ...
    :param store_root: a directory under which each server keeps its store
        (``<store_root>/n0`` ...); default a temporary directory per server,
        removed by :meth:`cleanup`.
    :param name: the cluster's name (default ``"jss"``).
    :param args: more command-line arguments for every server.
    :param config: a configuration file every server reads (``-c``; default
        none), e.g. with ``accounts`` and a ``system_account``; the cluster's
        ports, routes and names given on the command line win over it.

    Each server is a :class:`NatsServer` in :attr:`servers`: restart, pause
    or kill one of them to test a fault; its route comes back on its port.
    """

    def __init__(
        self, size: int = 3, *, store_root: Optional[str] = None, name: str = "jss", args: Sequence[str] = (),
        config: Optional[str] = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"a cluster needs at least one server, not {size}")
        ports = [free_port() for _ in range(size)]
        routes = ",".join(f"nats://{HOST}:{p}" for p in ports)
        self.names = [f"n{i}" for i in range(size)]
        self.servers = [
            NatsServer(
                store_dir=os.path.join(store_root, node) if store_root else None,
                config=config,
                args=["--cluster_name", name, "--cluster", f"nats://{HOST}:{p}", "--routes", routes, "-n", node, *args],
            )
            for node, p in zip(self.names, ports)
        ]

    @property
    def urls(self) -> List[str]:
        """Every server's client URL, for ``jss.connect(cluster.urls)``."""
        return [s.url for s in self.servers]

    def start(self, timeout: float = 30.0) -> "NatsCluster":
        """Start every server and wait up to ``timeout`` seconds (default 30)
        for each to be ready. Returns ``self``."""
        # /healthz of each needs the others: launch all, then wait.
        for s in self.servers:
            s.launch()
        for s in self.servers:
            s.wait_ready(timeout)
        return self

    def meta_leader(self) -> Optional[str]:
        """The name of the JetStream meta leader as a running server reports
        it (``"n0"`` ...), or None while there is none."""
        for s in self.servers:
            if not s.running:
                continue
            try:
                leader = (s.jsz().get("meta_cluster") or {}).get("leader")
            except OSError:  # paused, or stopping
                continue
            if leader:
                return str(leader)
        return None

    def wait_for_meta_leader(self, timeout: float = 30.0, interval: float = 0.05) -> str:
        """Poll :meth:`meta_leader` every ``interval`` seconds (default 0.05)
        until there is one; its name. ``AssertionError`` after ``timeout``
        seconds (default 30)."""
        try:
            return wait_until(self.meta_leader, timeout=timeout, interval=interval)
        except AssertionError:
            raise AssertionError(f"the cluster elected no JetStream meta leader within {timeout}s") from None

    def server(self, name: str) -> NatsServer:
        """The server named ``name`` (``"n0"`` ...), e.g. the meta leader's."""
        return self.servers[self.names.index(name)]

    def cleanup(self) -> None:
        """Stop every server and remove the stores the cluster made."""
        for s in self.servers:
            s.cleanup()

    def __enter__(self) -> "NatsCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.cleanup()


class ClusterFactory(Protocol):
    """The ``nats_cluster`` fixture: call it to start a cluster (a type for your tests' hints)."""

    def __call__(self, size: int = 3, *, timeout: float = 30.0, config: Optional[str] = None) -> NatsCluster: ...
