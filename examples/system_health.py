"""Check every server of a cluster from a job: the system client.

``nc.system()`` asks the servers' monitoring endpoints (varz, jsz, healthz
...) over the system account, so the user must be one of the system
account's (``NATS_USER``/``NATS_PASSWORD`` here, or a NATS context).
"""

import os
import sys

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
EXPECTED = int(os.environ.get("NATS_SERVERS", "3"))  # how many servers the cluster has

with jss.connect(NATS_URL, user=os.environ.get("NATS_USER"), password=os.environ.get("NATS_PASSWORD")) as nc:
    system = nc.system(timeout=5.0, expected=EXPECTED)  # returns as soon as EXPECTED servers answered
    try:
        varz = system.varz()
    except jss.PermissionDeniedError as exc:
        sys.exit(f"cannot ask the servers: {exc}")
    jsz = {j.server.id: j for j in system.jsz()}
    health = {h.server.id: h for h in system.healthz()}
    for v in varz:
        j, h = jsz[v.server.id], health[v.server.id]
        print(f"{v.server.name}: {v.version}, {v.connections} connections, {v.mem // 2**20} MiB, "
              f"{j.streams} streams, meta leader {j.meta_leader}, health {h.status}")
    healthy = sum(h.ok for h in health.values())
    print(f"{healthy} of {EXPECTED} servers healthy")
    sys.exit(0 if healthy == EXPECTED == len(varz) else 1)
