"""The connection core: loop thread, connection, wire and C parser, acks, publishing, the JetStream API (layer 2)."""

# nats-py's client, for the layers above that hand it out (CoreClient.async_client,
# run_async) without importing nats-py themselves.
from nats.aio.client import Client as NatsClient

__all__ = ["NatsClient"]
