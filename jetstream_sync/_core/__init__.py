"""The connection core: loop thread, connection, wire and C parser, acks, publishing, the JetStream API (layer 2)."""
