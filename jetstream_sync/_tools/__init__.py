"""The demo and the benchmark CLI (layer 7); their embedded nats-server is the test kit's."""
