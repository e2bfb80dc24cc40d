"""Static partitioned consumer groups (orbit.go pcgroups) on a real server:
the stored config orbit.go reads, the member consumers it creates, members
seeing only their partitions, and the acceptance run of issue 21 (3 members,
30,000 messages on 1,000 keys, one instance killed mid-way)."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from typing import Dict, List, Tuple

import pytest

import jetstream_sync as jss

from ..helpers import wait_until

pytestmark = pytest.mark.timeout(120)

BUCKET = "static-consumer-groups"


def partitioned_stream(js: jss.JetStream, name: str, partitions: int) -> None:
    """A stream on ``<name>.*`` whose subjects get the key's partition first."""
    prefix = name.lower()
    js.create_stream(
        name=name, subjects=[f"{prefix}.*"], subject_transform=jss.partition_transform(partitions, f"{prefix}.*", [1])
    )


def test_the_config_is_stored_where_and_as_orbit_stores_it(js):
    partitioned_stream(js, "PCG1", 4)
    group = js.create_static_group("PCG1", "cg", 4, members=["m2", "m1"], filters=["pcg1.*"])
    entry = js.key_value(BUCKET).get("PCG1.cg")
    # orbit.go StaticConsumerGroupConfig: max_members, filters/members/member_mappings omitempty
    assert json.loads(entry.value) == {"max_members": 4, "filters": ["pcg1.*"], "members": ["m2", "m1"]}
    assert group.config == js.static_group("PCG1", "cg").config
    # the same config again is fine, another one is refused
    js.create_static_group("PCG1", "cg", 4, members=["m2", "m1"], filters=["pcg1.*"])
    with pytest.raises(jss.ConsumerGroupError, match="another config"):
        js.create_static_group("PCG1", "cg", 4, members=["m1"])
    js.create_static_group("PCG1", "other", 4, member_mappings={"a": [0, 1], "b": [2, 3]})
    assert js.static_groups("PCG1") == ["cg", "other"]
    assert js.static_groups("NOPE") == []


def test_a_config_orbit_wrote_is_read_and_joined(js):
    """The JSON orbit.go's json.Marshal writes for member mappings, put into
    the bucket as orbit.go's CreateStatic makes it (history 1, file storage)."""
    partitioned_stream(js, "PCG2", 3)
    kv = js.create_key_value(BUCKET, storage="file")
    kv.put("PCG2.cg", b'{"max_members":3,"member_mappings":[{"member":"a","partitions":[0,2]},{"member":"b","partitions":[1]}]}')
    group = js.static_group("PCG2", "cg")
    assert group.config.member_mappings == (jss.MemberMapping("a", (0, 2)), jss.MemberMapping("b", (1,)))
    assert group.config.partitions_of("a") == [0, 2] and group.config.member_filters("a") == ["0.>", "2.>"]
    for i in range(30):
        js.publish(f"pcg2.k{i}", b"x")
    with group.join("a") as ctx:
        got = [ctx.next(5.0) for _ in range(ctx.stats.delivered or 1)]
        first = got[0].subject
    assert first.split(".")[0] in ("0", "2")
    assert jss.strip_partition(first).startswith("pcg2.k")


def test_a_consumer_made_as_orbit_makes_it_is_the_one_join_makes(js, nc):
    """orbit.go's StaticConsume creates <group>-<member> with CreateConsumer
    (action create); a config that differed in any field would be refused
    (10148), so both clients' instances of one member share one consumer."""
    partitioned_stream(js, "PCG3", 2)
    js.create_static_group("PCG3", "cg", 2, members=["a", "b"])
    # nats.go's jetstream.ConsumerConfig as StaticConsume fills it, marshaled (durations in ns)
    go_config = {
        "durable_name": "cg-a", "deliver_policy": "all", "ack_policy": "explicit", "ack_wait": 5_000_000_000,
        "replay_policy": "instant", "filter_subjects": ["0.>"], "num_replicas": 0,
        "priority_groups": ["PCG"], "priority_policy": "pinned_client", "priority_timeout": 5_000_000_000,
    }  # fmt: skip
    body = json.dumps({"stream_name": "PCG3", "config": go_config, "action": "create"}).encode()
    reply = json.loads(nc.request("$JS.API.CONSUMER.CREATE.PCG3.cg-a", body, timeout=5).data)
    assert "error" not in reply, reply
    with js.join_static_group("PCG3", "cg", "a") as ctx:  # the same consumer: no 10148
        assert ctx.partitions == [0]
    info = js.consumer_info("PCG3", "cg-a")
    assert info.config.filter_subjects == ["0.>"] and info.config.priority_groups == ["PCG"]
    assert info.config.priority_policy == "pinned_client" and info.config.priority_timeout == 5.0


def test_members_get_only_their_partitions_and_delete_ends_them(js):
    partitioned_stream(js, "PCG4", 6)
    group = js.create_static_group("PCG4", "cg", 6, members=["a", "b", "c"])
    seen: Dict[str, List[str]] = defaultdict(list)
    seqs: Dict[str, List[int]] = defaultdict(list)
    lock = threading.Lock()

    def handler(member):
        def handle(msg):
            with lock:
                seen[member].append(msg.subject)
                seqs[jss.strip_partition(msg.subject)].append(msg.metadata.sequence.stream)
            msg.ack()
        return handle

    ctxs = {m: group.join(m, handler(m), ack_wait=2.0) for m in "abc"}
    for i in range(300):
        js.publish(f"pcg4.k{i % 40}", b"x")
    wait_until(lambda: sum(len(v) for v in seen.values()) == 300, timeout=20)
    for m, subjects in seen.items():
        assert {int(s.split(".")[0]) for s in subjects} <= set(group.config.partitions_of(m))
    assert all(s == sorted(s) and len(s) == len(set(s)) for s in seqs.values())  # per key: in order, once
    wait_until(lambda: sorted(group.active_members()) == ["a", "b", "c"], timeout=10)
    js.delete_static_group("PCG4", "cg")  # the config goes: every member ends, consumers go
    for ctx in ctxs.values():
        assert ctx.wait(10) and ctx.error is None
    assert js.consumer_names("PCG4") == [] and js.static_groups("PCG4") == []
    with pytest.raises(jss.ConsumerGroupNotFoundError):
        js.static_group("PCG4", "cg")


def test_a_changed_config_ends_the_member_with_an_error(js):
    partitioned_stream(js, "PCG5", 2)
    group = js.create_static_group("PCG5", "cg", 2, members=["a"])
    ctx = group.join("a")
    js.key_value(BUCKET).put("PCG5.cg", b'{"max_members":2,"members":["a","b"]}')
    assert ctx.wait_closed(10)
    with pytest.raises(jss.ConsumerGroupError, match="changed"):
        next(ctx)
    with pytest.raises(jss.ConsumerGroupError, match="not a member"):
        js.join_static_group("PCG5", "cg", "z")


class Instance:
    """One member instance on a connection of its own (as a process would
    be): records (key, stream seq) of each message it handled and confirmed
    the ack of; ``kill()`` makes it drop everything unacked and closes its
    connection, with no stop and no NAK."""

    def __init__(self, url: str, stream: str, member: str, log: List[Tuple[str, int, str]]) -> None:
        self.nc = jss.connect(url, name=f"pcg-{member}")
        self.member, self.log = member, log
        self.lock = threading.Lock()
        self.dead = False
        self.handled = 0
        # max_ack_pending=1: what keeps per-key order across a failover (the
        # killed instance's unacked message is redelivered before any later one)
        self.ctx = self.nc.jetstream().join_static_group(stream, "cg", member, self.handle, ack_wait=2.0, max_ack_pending=1)

    def handle(self, msg: jss.Msg) -> None:
        with self.lock:
            if self.dead:
                return
            msg.ack_sync()
            self.log.append((jss.strip_partition(msg.subject), msg.metadata.sequence.stream, self.member))
            self.handled += 1

    def kill(self) -> None:
        with self.lock:
            self.dead = True
        self.nc.close()


@pytest.mark.timeout(300)
def test_acceptance_three_members_30000_messages_one_killed(js, server):
    """3 members (6 partitions), 30,000 messages on 1,000 keys; a standby
    instance of member b waits; b's pinned instance is killed mid-way: its
    partitions move to the standby within the pin timeout, and per key the
    group handled every message once, in stream order."""
    partitioned_stream(js, "ACC", 6)
    js.create_static_group("ACC", "cg", 6, members=["a", "b", "c"])
    log: List[Tuple[str, int, str]] = []
    total, keys = 30_000, 1_000
    for i in range(total):
        js.publish_async(f"acc.k{i % keys}", str(i).encode())
    assert js.publish_async_complete(timeout=60)
    instances = {m: Instance(server.url, "ACC", m, log) for m in "abc"}
    b = instances["b"]
    wait_until(lambda: b.handled > 0, timeout=10)
    standby = Instance(server.url, "ACC", "b", log)
    wait_until(lambda: b.handled >= 2_000, timeout=60)
    assert standby.handled == 0  # not pinned while b pulls
    b.kill()
    # the pin moves within the pin timeout (ack_wait 2 s) plus a pull's expiry
    wait_until(lambda: standby.handled > 0, timeout=2.0 + 1.0 + 2.0)
    wait_until(lambda: len(log) >= total, timeout=120)
    by_key: Dict[str, List[int]] = defaultdict(list)
    for key, seq, _ in log:
        by_key[key].append(seq)
    assert len(by_key) == keys
    assert len(log) == total and len({seq for _, seq, _ in log}) == total  # each once, none lost
    for key, seqs in by_key.items():
        assert seqs == sorted(seqs), f"{key} handled out of stream order"
    members_of_key = defaultdict(set)
    for key, _, member in log:
        members_of_key[key].add(member)
    assert all(len(m) == 1 for m in members_of_key.values())  # a key stays with one member
    for inst in (instances["a"], instances["c"], standby):
        inst.ctx.stop()
        inst.nc.close()


@pytest.mark.parametrize(
    "call, kwargs",
    [
        ("create", {"max_members": 0, "members": ["a"]}),
        ("create", {"max_members": -1, "members": ["a"]}),
        ("create", {"max_members": True, "members": ["a"]}),
        ("create", {"max_members": "3", "members": ["a"]}),
        ("create", {"max_members": 2}),  # neither members nor mappings
        ("create", {"max_members": 2, "members": ["a"], "member_mappings": {"a": [0, 1]}}),
        ("create", {"max_members": 2, "members": "a"}),
        ("create", {"max_members": 2, "members": ["a.b"]}),
        ("create", {"max_members": 2, "member_mappings": {"a": [0]}}),  # partition 1 unmapped
        ("create", {"max_members": 2, "member_mappings": {"a": [0, 1], "b": [1]}}),
        ("create", {"max_members": 2, "member_mappings": {"a": [0, 2]}}),
        ("create", {"max_members": 2, "member_mappings": [("a", [0]), ("a", [1])]}),
        ("create", {"max_members": 1, "member_mappings": {"a": [0], "b": []}}),  # more mappings than partitions
        ("create", {"max_members": 2, "members": ["a"], "filters": ["a..b"]}),
        ("create", {"max_members": 2, "members": ["a"], "filters": "a.>"}),
        ("create", {"max_members": 2, "members": ["a"], "group": "c.g"}),
        ("create", {"max_members": 2, "members": ["a"], "stream": "S.T"}),
        ("join", {"ack_wait": 0}),
        ("join", {"ack_wait": -1.0}),
        ("join", {"ack_wait": "5"}),
        ("join", {"max_ack_pending": 0}),
        ("join", {"expires": 1.0}),  # the group sets it
        ("join", {"group": "X"}),
        ("join", {"handler": 5}),
        ("join", {"error_handler": "x"}),
        ("join", {"member": "a b"}),
        ("transform", {"partitions": 0, "filter_": "x.*"}),
        ("transform", {"partitions": 2, "filter_": "x.y"}),
        ("transform", {"partitions": 2, "filter_": "x.*", "wildcards": [2]}),
        ("transform", {"partitions": 2, "filter_": "x.*.*", "wildcards": [1, 1]}),
    ],
    ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}={w!r}" for k, w in v.items()),
)
def test_bad_input_is_refused_before_anything_is_sent(js, nc, call, kwargs):
    partitioned_stream(js, "BAD", 2)
    group = js.create_static_group("BAD", "cg", 2, members=["a"])
    seen = nc.subscribe("$JS.API.>")
    seen_kv = nc.subscribe("$KV.>")
    nc.flush()
    with pytest.raises(jss.InvalidOptionError):
        if call == "create":
            kw = dict(kwargs)
            js.create_static_group(kw.pop("stream", "BAD"), kw.pop("group", "new"), **kw)
        elif call == "join":
            kw = dict(kwargs)
            group.join(kw.pop("member", "a"), kw.pop("handler", None), **kw)
        else:
            jss.partition_transform(**kwargs)
    nc.flush()
    assert seen.pending() == 0 and seen_kv.pending() == 0
