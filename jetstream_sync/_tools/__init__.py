"""The demo, the benchmark CLI and the embedded nats-server helper (layer 7)."""
