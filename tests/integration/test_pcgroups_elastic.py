"""Elastic partitioned consumer groups (orbit.go pcgroups) on a real server:
the stored config and work-queue stream as orbit.go makes them, membership
changes, and the acceptance run of issue 21: 3 members over 30,000 messages
on 1,000 keys, one member's process SIGKILLed mid-way (a standby instance
takes its partitions after the pin timeout), and a member added later."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Set

import pytest

import jetstream_sync as jss

from ..helpers import wait_until

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]


def test_config_and_work_stream_are_orbits(js):
    js.create_stream(name="EL1", subjects=["el1.*"])
    group = js.create_elastic_group("EL1", "cg", 4, partitioning_filters=[("el1.*", [1])])
    raw = js.key_value("elastic-consumer-groups").get("EL1.cg").value
    # orbit.go ElasticConsumerGroupConfig: partitioning_filters has no omitempty
    assert json.loads(raw) == {"max_members": 4, "partitioning_filters": [{"filter": "el1.*", "partitioning_wildcards": [1]}]}
    wq = js.stream_info("EL1-cg").config
    assert wq.retention == "workqueue" and wq.discard == "new" and wq.allow_direct
    assert wq.sources[0].name == "EL1"
    assert (wq.sources[0].subject_transforms[0].src, wq.sources[0].subject_transforms[0].dest) == (
        "el1.*", "{{Partition(4,1)}}.el1.{{Wildcard(1)}}")  # fmt: skip
    assert js.create_elastic_group("EL1", "cg", 4, partitioning_filters=[("el1.*", [1])]).config == group.config
    with pytest.raises(jss.ConsumerGroupError):
        js.create_elastic_group("EL1", "cg", 5)
    assert group.add_members(["b", "a"]) == ["b", "a"]
    assert group.add_members(["c", "a"]) == ["b", "a", "c"]
    assert group.delete_members(["b"]) == ["a", "c"]
    assert json.loads(js.key_value("elastic-consumer-groups").get("EL1.cg").value)["members"] == ["a", "c"]
    group.set_member_mappings({"x": [0, 1], "y": [2, 3]})
    with pytest.raises(jss.ConsumerGroupError, match="mappings"):
        group.add_members(["z"])
    assert js.elastic_group("EL1", "cg").config.partitions_of("y") == [2, 3]
    assert js.elastic_groups("EL1") == ["cg"]
    js.delete_elastic_group("EL1", "cg")
    assert js.elastic_groups("EL1") == [] and "EL1-cg" not in js.stream_names()


def test_a_config_orbit_wrote_is_followed(js):
    """An elastic config written as orbit.go's json.Marshal writes it, with
    no partitioning filter (partitioned on the whole subject): join reads it."""
    js.create_stream(name="EL2", subjects=["el2.>"])
    group = js.create_elastic_group("EL2", "cg", 2)
    kv = js.key_value("elastic-consumer-groups")
    assert json.loads(kv.get("EL2.cg").value) == {"max_members": 2, "partitioning_filters": None}
    kv.put("EL2.cg", b'{"max_members":2,"partitioning_filters":null,"members":["m1"]}')
    got: List[str] = []
    with group.join("m1", lambda m: (got.append(m.subject), m.ack())) as member:
        for i in range(10):
            js.publish(f"el2.k{i}", b"x")
        wait_until(lambda: len(got) == 10, timeout=15)
        assert member.partitions == [0, 1]
    assert {s.split(".", 1)[1] for s in got} == {f"el2.k{i}" for i in range(10)}


MEMBER_PROCESS = """
import sys, jetstream_sync as jss
url, stream, group, member = sys.argv[1:5]
nc = jss.connect(url, name="pcg-proc")

def handle(msg):
    key = jss.strip_partition(msg.subject)
    print("H", key, msg.data.decode(), flush=True)
    msg.ack_sync()
    print("A", key, msg.data.decode(), flush=True)

m = nc.jetstream().elastic_group(stream, group).join(member, handle, ack_wait=2.0, max_ack_pending=1)
print("joined", flush=True)
m.wait()
"""


class Recorder:
    """Per instance, the message numbers (payloads) per key it handled and confirmed the ack of."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: Dict[str, Dict[str, List[int]]] = defaultdict(lambda: defaultdict(list))
        self.unconfirmed: Set[int] = set()  # handled by the killed process, ack not confirmed
        self.in_hand = 0  # handlers between taking a message and recording it

    def handler(self, instance: str):
        def handle(msg: jss.Msg) -> None:
            with self.lock:
                self.in_hand += 1
            try:
                msg.ack_sync()
                with self.lock:
                    self.acked[instance][jss.strip_partition(msg.subject)].append(int(msg.data))
            finally:
                with self.lock:
                    self.in_hand -= 1
        return handle

    def idle(self) -> bool:
        """No handler holds a message it has not recorded yet."""
        with self.lock:
            return self.in_hand == 0

    def count(self) -> int:
        with self.lock:
            return sum(len(v) for keys in self.acked.values() for v in keys.values())

    def numbers(self) -> List[int]:
        with self.lock:
            return [n for keys in self.acked.values() for v in keys.values() for n in v]


@pytest.mark.timeout(300)
def test_acceptance_elastic_sigkill_and_a_member_added_later(js, server):
    js.create_stream(name="ELA", subjects=["ela.*"])
    group = js.create_elastic_group("ELA", "cg", 6, partitioning_filters=[("ela.*", [1])])
    group.add_members(["a", "b", "c"])
    rec = Recorder()
    opts = dict(ack_wait=2.0, max_ack_pending=1)
    clients = [jss.connect(server.url, name=f"pcg-{i}") for i in range(4)]
    a = clients[0].jetstream().elastic_group("ELA", "cg").join("a", rec.handler("a"), **opts)
    c = clients[1].jetstream().elastic_group("ELA", "cg").join("c", rec.handler("c"), **opts)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", MEMBER_PROCESS, server.url, "ELA", "cg", "b"],
                            stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
    proc_lines: List[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            # SIGKILL can cut the last line mid-write: a line without its newline is partial
            if line.endswith("\n") and line.strip():
                proc_lines.append(line.split())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def all_acked_and_recorded(published: int) -> bool:
        """The work-queue stream has taken in all ``published`` (it sources them
        asynchronously) and holds none of them (acked, so removed); and every
        handler that acked one has recorded it: a handler records after
        ack_sync() returns, so the stream can be empty just before then."""
        state = js.stream_info("ELA-cg").state
        return state.last_seq >= published and state.messages == 0 and rec.idle()  # in this order

    try:
        wait_until(lambda: proc_lines and proc_lines[0] == ["joined"], timeout=15)
        standby = clients[2].jetstream().elastic_group("ELA", "cg").join("b", rec.handler("b-standby"), **opts)
        total, keys = 30_000, 1_000
        for i in range(total):
            js.publish_async(f"ela.k{i % keys}", str(i).encode())
        assert js.publish_async_complete(timeout=60)
        wait_until(lambda: sum(1 for line in proc_lines if line[0] == "A") >= 1_000, timeout=60)
        assert not rec.acked["b-standby"]  # a standby, not pinned while the process pulls
        proc.kill()  # SIGKILL: no stop, no NAK, the connection just goes
        proc.wait(10)
        reader.join(10)
        # the standby is pinned once the pin timeout (ack_wait, 2 s) passed without a pull of the
        # dead one; its first message is the dead one's unacked one, redelivered after ack_wait
        # (2 s); plus a pull's expiry (1 s) and room for a loaded machine
        wait_until(lambda: rec.acked["b-standby"], timeout=2.0 + 2.0 + 1.0 + 3.0)
        wait_until(lambda: all_acked_and_recorded(total), timeout=120)

        confirmed = [int(line[2]) for line in proc_lines if line[0] == "A"]
        handled = [int(line[2]) for line in proc_lines if line[0] == "H"]
        unconfirmed = set(handled) - set(confirmed)
        numbers = rec.numbers() + confirmed
        assert len(numbers) == len(set(numbers)), "a message was handled and acked twice"
        assert set(range(total)) - set(numbers) <= unconfirmed  # the rest was acked by the killed process
        proc_by_key: Dict[str, List[int]] = defaultdict(list)
        for line in proc_lines:
            if line[0] == "A":
                proc_by_key[line[1]].append(int(line[2]))
        for instance, by_key in rec.acked.items():
            for key, ns in by_key.items():
                before = proc_by_key.get(key, []) if instance == "b-standby" else []
                assert before + ns == sorted(before + ns), f"{key} out of order at {instance}"

        # a member added later gets partitions and messages
        d = clients[3].jetstream().elastic_group("ELA", "cg").join("d", rec.handler("d"), **opts)
        assert d.partitions == []
        group.add_members(["d"])
        wait_until(lambda: d.partitions and d.consuming, timeout=10)
        for i in range(total, total + 1_000):
            js.publish(f"ela.k{i % keys}", str(i).encode())
        wait_until(lambda: all_acked_and_recorded(total + 1_000) and rec.acked["d"], timeout=60)
        later = [n for n in rec.numbers() if n >= total]
        assert sorted(later) == list(range(total, total + 1_000))  # each once, none lost
        for instance, by_key in rec.acked.items():  # in order per key across the rebalance too
            assert all(ns == sorted(ns) for ns in by_key.values()), instance
        for ctx in (a, c, standby, d):
            ctx.stop()
    finally:
        if proc.poll() is None:
            proc.kill()
        for nc in clients:
            nc.close()


@pytest.mark.parametrize(
    "call, kwargs",
    [
        ("create", {"max_members": 0}),
        ("create", {"max_members": 2, "partitioning_filters": [("x.y", [])]}),
        ("create", {"max_members": 2, "partitioning_filters": [("x.*", [2])]}),
        ("create", {"max_members": 2, "partitioning_filters": [("x.*", [1, 1])]}),
        ("create", {"max_members": 2, "partitioning_filters": "x.*"}),
        ("create", {"max_members": 2, "max_buffered_msgs": -1}),
        ("create", {"max_members": 2, "max_buffered_bytes": "1"}),
        ("create", {"max_members": 2, "group": "a.b"}),
        ("join", {"member": "a.b"}),
        ("join", {"handler": None}),
        ("join", {"ack_wait": 0}),
        ("join", {"max_ack_pending": -1}),
        ("join", {"expires": 2}),
        ("add", {"members": []}),
        ("add", {"members": ["a b"]}),
        ("delete", {"members": "a"}),
        ("mappings", {"mappings": {"a": [0]}}),
        ("mappings", {"mappings": {"a": [0, 1, 2]}}),
    ],
    ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}={w!r}" for k, w in v.items()),
)
def test_bad_input_is_refused_before_anything_is_sent(js, nc, call, kwargs):
    js.create_stream(name="ELB", subjects=["elb.*"])
    group = js.create_elastic_group("ELB", "cg", 2)
    seen, seen_kv = nc.subscribe("$JS.API.>"), nc.subscribe("$KV.>")
    nc.flush()
    kw = dict(kwargs)
    with pytest.raises(jss.InvalidOptionError):
        if call == "create":
            js.create_elastic_group("ELB", kw.pop("group", "new"), **kw)
        elif call == "join":
            group.join(kw.pop("member", "a"), kw.pop("handler", lambda m: None), **kw)
        elif call == "add":
            group.add_members(**kw)
        elif call == "delete":
            group.delete_members(**kw)
        else:
            group.set_member_mappings(**kw)
    nc.flush()
    assert seen.pending() == 0 and seen_kv.pending() == 0
