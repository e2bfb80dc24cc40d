"""Partitioned consumer groups without a server: the partitions of each
member as orbit.go's GeneratePartitionFilters gives them, the config JSON as
orbit.go's Go structs read and write it, and the partitioning transform."""

from __future__ import annotations

import json

import pytest

import jetstream_sync as jss
from jetstream_sync.pcgroups import partition_filters
from jetstream_sync.pcgroups.model import STATIC_BUCKET, group_key, static_consumer_name

# The json tags of orbit.go's structs (pcgroups/static_stream_consumer_group.go,
# stream_consumer_group.go): StaticConsumerGroupConfig and MemberMapping.
GO_STATIC_FIELDS = {"max_members", "filters", "members", "member_mappings"}
GO_MAPPING_FIELDS = {"member", "partitions"}


@pytest.mark.parametrize(
    "members, n, expected",
    [
        # 10 partitions over 3 members: 3 each in blocks, the remainder round-robin from the first
        (["c", "a", "b"], 10, {"a": [0, 1, 2, 9], "b": [3, 4, 5], "c": [6, 7, 8]}),
        # 3 partitions over 2 members: one each, then the third to the first
        (["b", "a"], 3, {"a": [0, 2], "b": [1]}),
        # duplicates are dropped, and members beyond max_members get nothing
        (["a", "a", "b", "c"], 2, {"a": [0], "b": [1], "c": []}),
        (["m1"], 4, {"m1": [0, 1, 2, 3]}),
    ],
)
def test_members_get_partitions_as_orbit_spreads_them(members, n, expected):
    for member, parts in expected.items():
        assert partition_filters(members, n, (), member, ">") == [f"{p}.>" for p in parts]


def test_filters_follow_the_partition_token_and_mappings_ignore_them_as_orbit_does():
    cfg = jss.StaticGroupConfig.checked(2, ["x.*", "y.>"], ["a", "b"], None)
    assert cfg.member_filters("a") == ["0.x.*", "0.y.>"]
    mapped = jss.StaticGroupConfig.checked(2, ["x.*"], None, {"a": [1, 0]})
    assert mapped.member_filters("a") == ["1.>", "0.>"] and mapped.partitions_of("a") == [1, 0]


def test_the_json_has_orbits_field_names_and_leaves_out_empty_fields():
    cfg = jss.StaticGroupConfig.checked(3, None, None, [("a", [0, 1]), ("b", [2])])
    doc = json.loads(cfg.to_json())
    assert set(doc) <= GO_STATIC_FIELDS and set(doc) == {"max_members", "member_mappings"}
    assert all(set(m) == GO_MAPPING_FIELDS for m in doc["member_mappings"])
    assert cfg.to_json() == b'{"max_members":3,"member_mappings":[{"member":"a","partitions":[0,1]},{"member":"b","partitions":[2]}]}'


@pytest.mark.parametrize(
    "go_json, expected",
    [
        # what json.Marshal writes for StaticConsumerGroupConfig{MaxMembers: 4, Members: ...}
        (b'{"max_members":4,"members":["m1","m2"]}', jss.StaticGroupConfig(4, (), ("m1", "m2"))),
        (b'{"max_members":2,"filters":["foo.*"],"members":["m1"]}', jss.StaticGroupConfig(2, ("foo.*",), ("m1",))),
        (b'{"max_members":1,"member_mappings":[{"member":"x","partitions":[0]}]}',
         jss.StaticGroupConfig(1, (), (), (jss.MemberMapping("x", (0,)),))),
        (b'{"max_members":2}', jss.StaticGroupConfig(2)),  # valid for orbit.go too: nobody is a member
    ],
)
def test_a_config_orbit_marshaled_is_read(go_json, expected):
    assert jss.StaticGroupConfig.from_json(go_json) == expected
    assert json.loads(expected.to_json()) == json.loads(go_json)


@pytest.mark.parametrize(
    "bad",
    [b"not json", b"[]", b'{"max_members":0}', b'{"max_members":2,"members":["a"],"member_mappings":[{"member":"a","partitions":[0,1]}]}',
     b'{"max_members":2,"member_mappings":[{"member":"a","partitions":[0]}]}'],
)
def test_a_config_orbit_would_refuse_is_refused(bad):
    with pytest.raises(jss.InvalidOptionError):
        jss.StaticGroupConfig.from_json(bad)


def test_names_are_orbits():
    assert STATIC_BUCKET == "static-consumer-groups"
    assert group_key("ORDERS", "cg") == "ORDERS.cg" and static_consumer_name("cg", "m1") == "cg-m1"
    assert jss.strip_partition("3.orders.k1") == "orders.k1" and jss.strip_partition("x") == "x"


@pytest.mark.parametrize(
    "args, dest",
    [
        ((10, "foo.*", [1]), "{{Partition(10,1)}}.foo.{{Wildcard(1)}}"),
        ((4, "a.*.b.*", [2, 1]), "{{Partition(4,2,1)}}.a.{{Wildcard(1)}}.b.{{Wildcard(2)}}"),
        ((3, ">", []), "{{Partition(3)}}.>"),
    ],
)
def test_the_partitioning_transform_is_orbits(args, dest):
    t = jss.partition_transform(*args)
    assert (t.src, t.dest) == (args[1], dest)


# orbit.go ElasticConsumerGroupConfig and PartitioningFilter json tags
GO_ELASTIC_FIELDS = {"max_members", "partitioning_filters", "max_buffered_msg", "max_buffered_bytes", "members", "member_mappings"}


def test_an_elastic_config_has_orbits_json():
    cfg = jss.ElasticGroupConfig.checked(4, [("foo.*", [1])], 100, 0, ["m2", "m1"], None)
    doc = json.loads(cfg.to_json())
    assert set(doc) <= GO_ELASTIC_FIELDS
    assert doc == {"max_members": 4, "partitioning_filters": [{"filter": "foo.*", "partitioning_wildcards": [1]}],
                   "max_buffered_msg": 100, "members": ["m2", "m1"]}  # fmt: skip
    assert jss.ElasticGroupConfig.from_json(cfg.to_json()) == cfg
    # what json.Marshal writes for an ElasticConsumerGroupConfig with nil filters (no omitempty there)
    assert jss.ElasticGroupConfig.from_json(b'{"max_members":2,"partitioning_filters":null}') == jss.ElasticGroupConfig(2)
    assert cfg.member_filters("m1") == ["0.foo.*", "1.foo.*"]
    assert [(t.src, t.dest) for t in cfg.transforms()] == [("foo.*", "{{Partition(4,1)}}.foo.{{Wildcard(1)}}")]
    assert [(t.src, t.dest) for t in jss.ElasticGroupConfig(3).transforms()] == [(">", "{{Partition(3)}}.>")]
