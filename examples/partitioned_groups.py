"""A static partitioned consumer group (orbit.go pcgroups compatible): a
stream whose subjects get a partition number from their key, three members
that each handle only their partitions, in order per key, and a standby
instance that takes over a member's partitions when that instance stops.

Run it as a script against a server (NATS_URL, default nats://127.0.0.1:4222).
"""

import os
import threading
from collections import defaultdict

import jetstream_sync as jss
from jetstream_sync.testing import wait_until

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

with jss.connect(NATS_URL, name="pcg-example") as nc:
    js = nc.jetstream()
    # orders.<customer>: the customer token (wildcard 1) picks one of 6 partitions,
    # stored as "<partition>.orders.<customer>"
    js.create_stream(name="PCG_ORDERS", subjects=["orders.*"],
                     subject_transform=jss.partition_transform(6, "orders.*", [1]))  # fmt: skip
    group = js.create_static_group("PCG_ORDERS", "billing", 6, members=["m1", "m2", "m3"])
    print("partitions:", {m: group.config.partitions_of(m) for m in group.config.members})

    handled = defaultdict(list)  # customer -> order numbers, in the order handled
    lock = threading.Lock()

    def handle(msg):
        with lock:
            handled[jss.strip_partition(msg.subject)].append(int(msg.data))
        msg.ack()

    members = [group.join(m, handle, ack_wait=2.0) for m in ("m1", "m2", "m3")]
    standby = group.join("m1", handle, ack_wait=2.0)  # a second instance of m1: waits, unpinned

    for n in range(600):
        js.publish(f"orders.c{n % 20}", str(n).encode())
    wait_until(lambda: sum(map(len, handled.values())) == 600, timeout=30)

    members[0].stop()  # m1's pinned instance goes: after the pin timeout (2 s) the standby has m1
    for n in range(600, 700):
        js.publish(f"orders.c{n % 20}", str(n).encode())
    wait_until(lambda: sum(map(len, handled.values())) == 700, timeout=30)

    in_order = all(v == sorted(v) for v in handled.values())
    print(f"handled {sum(map(len, handled.values()))} orders of {len(handled)} customers, in order per customer: {in_order}")
    print("active members:", group.active_members())
    for ctx in [*members[1:], standby]:
        ctx.stop()
    js.delete_static_group("PCG_ORDERS", "billing")
    js.delete_stream("PCG_ORDERS")
