"""Priority groups (ADR-42), stop_after, max_messages with max_bytes, pause
times: option validation, pull bodies and refill arithmetic, without a server."""

import datetime
import json

import pytest

import jetstream_sync as jss
from jetstream_sync._core.message import WireMsg, pin_id
from jetstream_sync.models import ConsumerConfig, ConsumerPauseResponse, ConsumerResetResponse
from jetstream_sync.options import (
    PriorityOptions,
    consume_options,
    fetch_options,
    pause_until,
    priority_config,
    priority_options,
    rfc3339,
)
from jetstream_sync._engines.protocol import pull_request, refill

PINNED = ConsumerConfig(priority_groups=["A", "B"], priority_policy="pinned_client", priority_timeout=1.0)
OVERFLOW = ConsumerConfig(priority_groups=["A"], priority_policy="overflow")
PRIORITIZED = ConsumerConfig(priority_groups=["A"], priority_policy="prioritized")
PLAIN = ConsumerConfig()


def test_no_group_on_a_plain_consumer_is_nothing():
    assert priority_options(PLAIN) is None
    assert priority_options(None) is None


def test_valid_priority_options():
    assert priority_options(PINNED, "B") == PriorityOptions("B", pinned=True)
    assert priority_options(OVERFLOW, "A", min_pending=10, min_ack_pending=3) == PriorityOptions("A", 10, 3)
    assert priority_options(PRIORITIZED, "A", priority=9) == PriorityOptions("A", priority=9)
    assert priority_options(PRIORITIZED, "A", priority=0) == PriorityOptions("A")


@pytest.mark.parametrize(
    "config, kwargs, text",
    [
        (PLAIN, {"group": "A"}, "has no priority groups"),
        (PINNED, {}, "400 Priority Group missing"),
        (PINNED, {"group": "C"}, "not one of the consumer's priority groups"),
        (PINNED, {"group": ""}, "priority group must be"),
        (PINNED, {"group": 5}, "priority group must be"),
        (PINNED, {"group": "x" * 17}, "priority group must be"),
        (PINNED, {"group": "a.b"}, "priority group must be"),
        (OVERFLOW, {"min_pending": 5}, "needs group="),
        (OVERFLOW, {"min_ack_pending": 5}, "needs group="),
        (PRIORITIZED, {"priority": 1}, "needs group="),
        (OVERFLOW, {"group": "A", "min_pending": 0}, "min_pending must be an integer >= 1"),
        (OVERFLOW, {"group": "A", "min_pending": -1}, "min_pending"),
        (OVERFLOW, {"group": "A", "min_pending": 1.5}, "min_pending"),
        (OVERFLOW, {"group": "A", "min_ack_pending": True}, "min_ack_pending"),
        (PINNED, {"group": "A", "min_pending": 5}, "need priority_policy 'overflow'"),
        (PRIORITIZED, {"group": "A", "min_ack_pending": 5}, "need priority_policy 'overflow'"),
        (OVERFLOW, {"group": "A", "priority": 1}, "priority needs priority_policy 'prioritized'"),
        (PRIORITIZED, {"group": "A", "priority": 10}, "from 0 to 9"),
        (PRIORITIZED, {"group": "A", "priority": -1}, "from 0 to 9"),
        (PRIORITIZED, {"group": "A", "priority": "1"}, "from 0 to 9"),
        (PRIORITIZED, {"group": "A", "priority": True}, "from 0 to 9"),
    ],
)
def test_invalid_priority_options(config, kwargs, text):
    with pytest.raises(jss.InvalidOptionError, match=text):
        priority_options(config, **kwargs)


def test_pull_body_carries_the_priority_fields_and_the_pin():
    body = json.loads(pull_request(5, 1.0, priority=PriorityOptions("A", 10, 3, 2), pin_id="PIN"))
    assert body == {
        "batch": 5,
        "expires": 1_000_000_000,
        "group": "A",
        "min_pending": 10,
        "min_ack_pending": 3,
        "priority": 2,
        "id": "PIN",
    }
    assert json.loads(pull_request(1, pin_id="PIN")) == {"batch": 1}  # no group, no id
    assert json.loads(pull_request(1, priority=PriorityOptions("A"))) == {"batch": 1, "group": "A"}


def test_options_carry_the_priority():
    prio = PriorityOptions("A")
    assert consume_options(priority=prio).priority is prio
    assert fetch_options(1, priority=prio).priority is prio
    assert fetch_options(1, no_wait=True, priority=prio).priority is prio


@pytest.mark.parametrize(
    "policy, groups, timeout, deliver, ok",
    [
        (None, None, None, None, True),
        ("none", None, None, None, True),
        ("overflow", ["A"], None, None, True),
        ("pinned_client", ["A", "b/c=_-9"], 2.0, None, True),
        ("prioritized", ["A"], None, None, True),
        ("sticky", ["A"], None, None, False),
        ("overflow", None, None, None, False),
        ("overflow", [], None, None, False),
        ("overflow", "A", None, None, False),
        ("overflow", ["A", ""], None, None, False),
        ("overflow", ["x" * 17], None, None, False),
        (None, ["A"], None, None, False),
        ("none", ["A"], None, None, False),
        (None, None, 5.0, None, False),
        ("overflow", ["A"], None, "deliver.here", False),
    ],
)
def test_priority_config(policy, groups, timeout, deliver, ok):
    if ok:
        assert priority_config(policy, groups, timeout, deliver) == policy
    else:
        with pytest.raises(jss.InvalidOptionError):
            priority_config(policy, groups, timeout, deliver)


def test_stop_after_options():
    assert consume_options().stop_after == 0
    assert consume_options(stop_after=7).stop_after == 7
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(jss.InvalidOptionError, match="stop_after"):
            consume_options(stop_after=bad)


def test_stop_after_caps_every_pull():
    o = consume_options(max_messages=10, threshold_messages=5, stop_after=8)
    assert refill(o, 0, 0) == (8, 0)  # the first pull asks for no more than stop_after
    assert refill(o, 4, 0, delivered=2) == (2, 0)  # nats.go's table: 8 - 2 - 4
    assert refill(o, 4, 0, delivered=4) is None  # pending == what is left
    assert refill(o, 0, 0, delivered=8) is None
    big = consume_options(max_messages=10, stop_after=100)
    assert refill(big, 0, 0, delivered=50) == (10, 0)  # far from the end: the usual top-up
    assert refill(big, 2, 0, delivered=95) == (3, 0)


def test_stop_after_in_bytes_mode():
    o = consume_options(max_bytes=1000, stop_after=5)
    assert refill(o, 0, 0) == (5, 1000)
    assert refill(o, 5, 0, delivered=0) is None  # bytes below threshold, but all 5 asked for


def test_stop_after_with_a_paced_cap():
    o = consume_options(max_messages=100, stop_after=30)
    assert refill(o, 0, 0, delivered=25, cap=10) == (5, 0)
    assert refill(o, 0, 0, delivered=0, cap=10) == (10, 0)


def test_max_messages_with_max_bytes_caps_each_pull():
    o = consume_options(max_messages=10, max_bytes=4096)
    assert (o.max_messages, o.max_bytes, o.limit_bytes, o.bytes_mode) == (10, 4096, True, False)
    assert (o.threshold_messages, o.threshold_bytes) == (5, 0)
    assert refill(o, 0, 0) == (10, 4096)  # batch = max_messages; max_bytes rides along
    assert refill(o, 4, 123) == (6, 4096)  # refills count messages; bytes are not tracked
    assert refill(o, 5, 0) is None
    assert refill(o, 0, 0, cap=4) == (4, 4096)
    assert not consume_options(max_bytes=10).limit_bytes
    with pytest.raises(jss.InvalidOptionError, match="threshold_bytes"):
        consume_options(max_messages=10, max_bytes=100, threshold_bytes=50)
    with pytest.raises(jss.InvalidOptionError, match="max_messages"):
        consume_options(max_messages=0, max_bytes=100)
    both = fetch_options(10, max_bytes=100)  # fetch takes both too, as nats.java does
    assert (both.max_messages, both.max_bytes) == (10, 100)
    with pytest.raises(jss.InvalidOptionError, match="max_messages"):
        fetch_options(0, max_bytes=100)


def test_pause_until():
    now = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.timezone.utc)
    assert pause_until(1.5, now) == now + datetime.timedelta(seconds=1.5)
    cet = datetime.timezone(datetime.timedelta(hours=1))
    assert pause_until(datetime.datetime(2026, 1, 1, 13, 0, tzinfo=cet)) == now
    assert rfc3339(now) == "2026-01-01T12:00:00Z"
    for bad in (0, -1, float("nan"), "5", datetime.datetime(2026, 1, 1)):
        with pytest.raises(jss.InvalidOptionError):
            pause_until(bad, now)


def test_pause_response():
    r = ConsumerPauseResponse.from_response(
        {"paused": True, "pause_until": "2026-01-01T12:00:00.5Z", "pause_remaining": 2_500_000_000}
    )
    assert r.paused and r.pause_remaining == 2.5 and r.pause_until.microsecond == 500_000
    resumed = ConsumerPauseResponse.from_response({"paused": False, "pause_until": "0001-01-01T00:00:00Z"})
    assert (resumed.paused, resumed.pause_until, resumed.pause_remaining) == (False, None, 0.0)


def test_reset_response():
    r = ConsumerResetResponse.from_response(
        {"type": "io.nats.jetstream.api.v1.consumer_reset_response", "stream_name": "S", "name": "c",
         "created": "2026-01-01T00:00:00Z", "num_pending": 4, "reset_seq": 7}
    )
    assert (r.reset_seq, r.info.name, r.info.num_pending) == (7, "c", 4)


@pytest.mark.parametrize(
    "hdr, pin",
    [
        (None, ""),
        (b"NATS/1.0\r\n\r\n", ""),
        (b"NATS/1.0\r\nNats-Pin-Id: abc123\r\n\r\n", "abc123"),
        (b"NATS/1.0\r\nX: 1\r\nNats-Pin-Id: new\r\n\r\n", "new"),
        (b"NATS/1.0\r\nX-Nats-Pin-Id: no\r\n\r\n", ""),
    ],
)
def test_pin_id_from_the_raw_header_block(hdr, pin):
    assert pin_id(WireMsg(b"s", b"$JS.ACK.a.b.1.1.1.1.0", b"", None, hdr)) == pin


def test_consumer_config_validation_before_anything_is_sent():
    from jetstream_sync.options import build_config

    with pytest.raises(jss.InvalidOptionError, match="priority_policy must be one of"):
        build_config(ConsumerConfig, None, {"priority_policy": "pinned", "priority_groups": ["A"]})
    cfg = build_config(ConsumerConfig, None, {"priority_policy": "pinned_client", "priority_groups": ["A"],
                                              "priority_timeout": 2})
    assert cfg.as_dict()["priority_timeout"] == 2_000_000_000
