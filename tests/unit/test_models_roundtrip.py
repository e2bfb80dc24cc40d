"""Stream/consumer models parse server JSON once and round-trip exactly."""

from __future__ import annotations

import copy
import dataclasses
import datetime

import pytest

import jetstream_sync as jss
from jetstream_sync import models
from jetstream_sync.options import build_config

UTC = datetime.timezone.utc

# A config as nats-server 2.15 reports it (durations in ns, RFC 3339 times).
SOURCED_CONFIG = {
    "name": "SRC",
    "subjects": ["src.>"],
    "retention": "limits",
    "max_consumers": -1,
    "max_msgs": -1,
    "max_bytes": -1,
    "max_age": 1_234_567_891,
    "max_msgs_per_subject": -1,
    "max_msg_size": -1,
    "discard": "old",
    "storage": "file",
    "num_replicas": 1,
    "duplicate_window": 1_000_000_007,  # int(1.000000007 * 1e9) == 1000000006
    "placement": {"cluster": "east", "tags": ["ssd"]},
    "sources": [
        {
            "name": "ORIGIN",
            "opt_start_time": "2024-01-02T03:04:05.123456789Z",
            "filter_subject": "",
            "subject_transforms": [{"src": "orig.>", "dest": "moved.>"}],
        },
        {"name": "OTHER", "opt_start_seq": 5, "external": {"api": "$JS.hub.API", "deliver": "dlv.x"}},
    ],
    "compression": "s2",
    "first_seq": 10,
    "subject_transform": {"src": "src.>", "dest": "src2.>"},
    "republish": {"src": "src.>", "dest": "rp.>", "headers_only": True},
    "allow_direct": True,
    "mirror_direct": False,
    "sealed": False,
    "deny_delete": False,
    "deny_purge": False,
    "allow_rollup_hdrs": True,
    "consumer_limits": {"inactive_threshold": 30_000_000_001, "max_ack_pending": 100},
    "allow_msg_ttl": True,
    "subject_delete_marker_ttl": 60_000_000_000,
    "metadata": {"_nats.level": "1", "_nats.req.level": "1", "_nats.ver": "2.15.1", "team": "x"},
}

MIRROR_CONFIG = {
    "name": "MIR",
    "retention": "limits",
    "max_consumers": -1,
    "max_msgs": -1,
    "max_bytes": -1,
    "max_age": 0,
    "max_msgs_per_subject": -1,
    "max_msg_size": -1,
    "discard": "old",
    "storage": "file",
    "num_replicas": 1,
    "mirror": {
        "name": "ORIGIN",
        "opt_start_time": "2024-01-02T03:04:05Z",
        "subject_transforms": [{"src": "orig.>", "dest": "m.>"}],
    },
    "compression": "none",
    "allow_direct": False,
    "mirror_direct": False,
    "sealed": False,
    "deny_delete": False,
    "deny_purge": False,
    "allow_rollup_hdrs": False,
    "consumer_limits": {},
    "allow_msg_ttl": False,
    "metadata": {"_nats.level": "0", "_nats.req.level": "0", "_nats.ver": "2.15.1"},
}


def _info(config):
    return {
        "type": "io.nats.jetstream.api.v1.stream_info_response",
        "config": copy.deepcopy(config),
        "created": "2025-11-22T20:32:34.023694968Z",
        "state": {
            "messages": 0,
            "bytes": 0,
            "first_seq": 10,
            "first_ts": "0001-01-01T00:00:00Z",
            "last_seq": 9,
            "last_ts": "0001-01-01T00:00:00Z",
            "consumer_count": 0,
        },
        "sources": [
            {"name": "ORIGIN", "lag": 0, "active": -1, "subject_transforms": [{"src": "orig.>", "dest": "moved.>"}]},
            {"name": "OTHER", "external": {"api": "$JS.hub.API", "deliver": "dlv.x"}, "lag": 0, "active": -1},
        ],
        "cluster": {"leader": "n1", "leader_since": "2025-11-22T20:32:34.1Z"},
        "ts": "2025-11-22T20:32:34.024935605Z",
    }


def test_stream_info_with_sources_and_transforms_round_trips():
    resp = _info(SOURCED_CONFIG)
    info = jss.StreamInfo.from_response(resp)
    cfg = info.config
    assert isinstance(cfg, jss.StreamConfig)
    first, other = cfg.sources
    assert isinstance(first, models.StreamSource)
    assert first.opt_start_time == datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    assert [(t.src, t.dest) for t in first.subject_transforms] == [("orig.>", "moved.>")]
    assert (other.opt_start_seq, other.external.api, other.external.deliver) == (5, "$JS.hub.API", "dlv.x")
    assert (cfg.placement.cluster, cfg.placement.tags) == ("east", ["ssd"])
    assert (cfg.republish.dest, cfg.republish.headers_only) == ("rp.>", True)
    assert (cfg.subject_transform.src, cfg.subject_transform.dest) == ("src.>", "src2.>")
    assert (cfg.max_age, cfg.duplicate_window, cfg.subject_delete_marker_ttl) == (1.234567891, 1.000000007, 60.0)
    assert (cfg.first_seq, cfg.compression, cfg.allow_msg_ttl, cfg.allow_rollup_hdrs) == (10, "s2", True, True)
    assert cfg.metadata["team"] == "x"
    assert info.state.first_seq == 10 and info.extra == {"type": resp["type"], "ts": resp["ts"]}
    assert info.cluster.leader_since == datetime.datetime(2025, 11, 22, 20, 32, 34, 100000, tzinfo=UTC)

    assert cfg.as_dict() == SOURCED_CONFIG
    # What update_stream() sends for info.config.
    assert build_config(jss.StreamConfig, cfg, {}).as_dict() == SOURCED_CONFIG


def test_stream_info_with_mirror_round_trips():
    info = jss.StreamInfo.from_response(_info(MIRROR_CONFIG))
    mirror = info.config.mirror
    assert isinstance(mirror, models.StreamSource)
    assert mirror.opt_start_time == datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert [(t.src, t.dest) for t in mirror.subject_transforms] == [("orig.>", "m.>")]
    # The server left out duplicate_window etc.: as_dict adds no defaults.
    assert info.config.as_dict() == MIRROR_CONFIG
    assert build_config(jss.StreamConfig, info.config, {}).as_dict() == MIRROR_CONFIG


def test_consumer_limits_inactive_threshold_is_seconds():
    config = {"name": "L", "consumer_limits": {"inactive_threshold": 30_000_000_001, "max_ack_pending": 100}}
    info = jss.StreamInfo.from_response({**_info(SOURCED_CONFIG), "sources": None, "config": config})
    limits = info.config.consumer_limits
    assert isinstance(limits, models.StreamConsumerLimits)
    assert (limits.inactive_threshold, limits.max_ack_pending) == (30.000000001, 100)
    cfg = jss.StreamConfig.from_response({"name": "S", "consumer_limits": {"inactive_threshold": 5_000_000_000}})
    assert cfg.consumer_limits.inactive_threshold == 5.0
    assert cfg.as_dict()["consumer_limits"] == {"inactive_threshold": 5_000_000_000}


def test_stream_info_parsed_twice_gives_the_same_and_leaves_response_alone():
    resp = _info(SOURCED_CONFIG)
    pristine = copy.deepcopy(resp)
    first = jss.StreamInfo.from_response(resp)
    assert resp == pristine
    second = jss.StreamInfo.from_response(resp)
    assert first == second
    assert second.config.as_dict() == SOURCED_CONFIG
    cfg = jss.StreamConfig.from_response(resp["config"])
    assert resp == pristine and cfg == first.config


def test_stream_list_items_with_sources_parse():
    # js.streams() parses each STREAM.LIST item with StreamInfo.from_response.
    items = [_info(SOURCED_CONFIG), _info(MIRROR_CONFIG)]
    infos = [jss.StreamInfo.from_response(i) for i in items]
    assert [i.config.as_dict() for i in infos] == [SOURCED_CONFIG, MIRROR_CONFIG]


def test_stream_config_keeps_unknown_nested_fields():
    raw = copy.deepcopy(SOURCED_CONFIG)
    raw["placement"]["preferred"] = "n2"
    raw["sources"][1]["external"]["future"] = 1
    raw["sources"][0]["subject_transforms"][0]["flag"] = True
    raw["consumer_limits"]["future_limit"] = 7
    raw["republish"]["extra_knob"] = "y"
    raw["future_top"] = {"a": [1]}
    cfg = jss.StreamConfig.from_response(copy.deepcopy(raw))
    assert cfg.placement.extra == {"preferred": "n2"}
    assert cfg.sources[1].external.extra == {"future": 1}
    assert cfg.extra == {"future_top": {"a": [1]}}
    assert cfg.as_dict() == raw


def test_changed_values_are_converted_not_replayed():
    cfg = jss.StreamConfig.from_response(copy.deepcopy(SOURCED_CONFIG))
    cfg.max_age = 2.5
    cfg.sources[0].opt_start_time = datetime.datetime(2025, 1, 1, tzinfo=UTC)
    cfg.consumer_limits.inactive_threshold = 1.1
    cfg.discard_new_per_subject = True
    out = build_config(jss.StreamConfig, cfg, {"duplicate_window": 120.0}).as_dict()
    assert out["max_age"] == 2_500_000_000
    assert out["duplicate_window"] == 120_000_000_000
    assert out["sources"][0]["opt_start_time"] == "2025-01-01T00:00:00Z"
    assert out["consumer_limits"] == {"inactive_threshold": 1_100_000_000, "max_ack_pending": 100}
    assert out["discard_new_per_subject"] is True
    assert out["subject_delete_marker_ttl"] == 60_000_000_000


def test_user_built_config_with_nested_models():
    cfg = jss.StreamConfig(
        name="S",
        sources=[
            models.StreamSource(
                name="O",
                opt_start_time=datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
                subject_transforms=[models.SubjectTransform(src="a.>", dest="b.>")],
                external=models.ExternalStream(api="$JS.x.API"),
            )
        ],
        consumer_limits=models.StreamConsumerLimits(inactive_threshold=1.000000007, max_ack_pending=3),
        duplicate_window=1.000000007,
    )
    out = cfg.as_dict()
    assert out["sources"] == [
        {
            "name": "O",
            "opt_start_time": "2024-01-02T03:04:05Z",
            "subject_transforms": [{"src": "a.>", "dest": "b.>"}],
            "external": {"api": "$JS.x.API"},
        }
    ]
    assert out["consumer_limits"] == {"inactive_threshold": 1_000_000_007, "max_ack_pending": 3}
    assert out["duplicate_window"] == 1_000_000_007


def test_consumer_info_config_round_trips():
    raw = {
        "durable_name": "d",
        "name": "d",
        "deliver_policy": "by_start_time",
        "opt_start_time": "2024-01-02T03:04:05.987654321Z",
        "ack_policy": "explicit",
        "ack_wait": 1_000_000_007,
        "max_deliver": 5,
        "backoff": [1_000_000_007, 2_000_000_000],
        "replay_policy": "instant",
        "max_waiting": 512,
        "max_ack_pending": 1000,
        "inactive_threshold": 3_000_000_011,
        "num_replicas": 0,
        "max_expires": 5_000_000_000,
        "metadata": {"_nats.ver": "2.15.1"},
    }
    resp = {
        "stream_name": "S",
        "name": "d",
        "created": "2025-01-01T00:00:00.5Z",
        "config": copy.deepcopy(raw),
        "delivered": {"consumer_seq": 0, "stream_seq": 0},
        "ack_floor": {"consumer_seq": 0, "stream_seq": 0, "last_active": "2025-01-01T00:00:01Z"},
        "num_pending": 0,
        "ts": "2025-01-01T00:00:02Z",
    }
    pristine = copy.deepcopy(resp)
    info = jss.ConsumerInfo.from_response(resp)
    assert resp == pristine
    cfg = info.config
    assert (cfg.ack_wait, cfg.backoff, cfg.max_expires) == (1.000000007, [1.000000007, 2.0], 5.0)
    assert cfg.opt_start_time == datetime.datetime(2024, 1, 2, 3, 4, 5, 987654, tzinfo=UTC)
    assert cfg.as_dict() == raw
    assert build_config(jss.ConsumerConfig, cfg, {}).as_dict() == raw
    cfg.backoff.append(3.0)
    assert cfg.as_dict()["backoff"] == [1_000_000_007, 2_000_000_000, 3_000_000_000]


@pytest.mark.parametrize("cls", [jss.StreamConfig, models.StreamSource, models.StreamConsumerLimits])
def test_replace_keeps_extra(cls):
    base = {"name": "S"} if cls is not models.StreamConsumerLimits else {}
    obj = cls.from_response({**base, "zz_future": 1})
    assert dataclasses.replace(obj).as_dict()["zz_future"] == 1
