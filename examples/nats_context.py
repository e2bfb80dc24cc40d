"""Connect through a NATS context (ADR-21), as the ``nats`` CLI does.

A context is a JSON file in ``~/.config/nats/context/`` (``nats context save``
writes one). This script writes one into a temporary config directory, then
connects by its name, by its path, and through ``NATS_CONTEXT``.
"""

import json
import os
import tempfile

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

with tempfile.TemporaryDirectory() as config_home:
    os.environ["XDG_CONFIG_HOME"] = config_home  # instead of ~/.config, for this example
    os.makedirs(os.path.join(config_home, "nats", "context"))
    path = os.path.join(config_home, "nats", "context", "example.json")
    with open(path, "w") as f:  # the fields the nats CLI writes; empty means "not set"
        json.dump({"description": "the example server", "url": NATS_URL, "user": "", "password": "", "creds": "",
                   "nkey": "", "cert": "", "key": "", "ca": "", "jetstream_domain": "", "inbox_prefix": "_EXAMPLE"}, f)

    with jss.connect(context="example") as nc:  # by name
        print(f"context {nc.nats_context.name!r}: {nc.nats_context.description}, inbox {nc.new_inbox()[:9]}...")

    with jss.connect(context=path, name="by-path") as nc:  # by path; explicit arguments win over the file
        js = nc.jetstream()
        print(f"by path: connected={nc.is_connected}, JetStream API {js.api_prefix}")

    os.environ["NATS_CONTEXT"] = "example"  # what `nats --context example` would use
    with jss.connect() as nc:  # no servers given: NATS_CONTEXT's context
        print(f"NATS_CONTEXT: connected to the context's server: {nc.is_connected}")
