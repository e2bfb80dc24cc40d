"""Stream models against a real server: sourced/mirrored stream configs and
consumer limits parse and round-trip."""

from __future__ import annotations

import datetime

import jetstream_sync as jss
from jetstream_sync.models import ExternalStream, RePublish, StreamConsumerLimits, StreamSource, SubjectTransform

from ..helpers import wait_until

UTC = datetime.timezone.utc
START = datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)


def _raw_config(js: jss.JetStream, name: str) -> dict:
    return js._api.request(f"STREAM.INFO.{name}")["config"]


def _assert_update_changes_nothing(js: jss.JetStream, name: str) -> None:
    before = _raw_config(js, name)
    info = js.stream(name).info()
    assert info.config.as_dict() == before
    updated = js.update_stream(info.config)
    assert updated.cached_info.config.as_dict() == before
    assert _raw_config(js, name) == before
    # STREAM.LIST leaves out the server's dynamic metadata: compare with its own item.
    raw_listed = {s["config"]["name"]: s["config"] for s in js._api.paged("STREAM.LIST", "streams")}
    listed = {i.config.name: i for i in js.streams()}
    assert listed[name].config.as_dict() == raw_listed[name]


def _origin(js: jss.JetStream, stream_name: str) -> str:
    origin = f"{stream_name}_O"
    js.create_stream(name=origin, subjects=[f"{origin.lower()}.>"])
    for i in range(3):
        js.publish(f"{origin.lower()}.x", b"%d" % i)
    return origin


def test_server_stream_with_sources_and_transforms_round_trips(js, stream_name):
    origin = _origin(js, stream_name)
    created = js.create_stream(
        name=stream_name,
        subjects=[f"{stream_name.lower()}.own.>"],
        sources=[
            StreamSource(
                name=origin,
                opt_start_time=START,
                subject_transforms=[SubjectTransform(src=f"{origin.lower()}.>", dest=f"{stream_name.lower()}.in.>")],
            ),
            StreamSource(name="FAR", opt_start_seq=5, external=ExternalStream(api="$JS.far.API", deliver="dlv.far")),
        ],
        consumer_limits=StreamConsumerLimits(inactive_threshold=30.0, max_ack_pending=100),
        subject_transform=SubjectTransform(src=f"{stream_name.lower()}.own.>", dest=f"{stream_name.lower()}.mine.>"),
        republish=RePublish(src=">", dest=f"rp.{stream_name.lower()}.>", headers_only=True),
        metadata={"team": "x"},
        compression="s2",
        allow_msg_ttl=True,
        allow_rollup_hdrs=True,
        max_age=3600.000000007,
        duplicate_window=1.000000007,
    )
    cfg = created.info().config
    first, far = cfg.sources
    assert first.opt_start_time == START
    assert [(t.src, t.dest) for t in first.subject_transforms] == [
        (f"{origin.lower()}.>", f"{stream_name.lower()}.in.>")
    ]
    assert (far.opt_start_seq, far.external.api, far.external.deliver) == (5, "$JS.far.API", "dlv.far")
    assert (cfg.consumer_limits.inactive_threshold, cfg.consumer_limits.max_ack_pending) == (30.0, 100)
    assert (cfg.max_age, cfg.duplicate_window) == (3600.000000007, 1.000000007)
    raw = _raw_config(js, stream_name)
    assert (raw["max_age"], raw["duplicate_window"]) == (3_600_000_000_007, 1_000_000_007)
    assert raw["consumer_limits"] == {"inactive_threshold": 30_000_000_000, "max_ack_pending": 100}

    # The source really applies the transform.
    wait_until(lambda: js.stream_info(stream_name).state.messages == 3)
    assert created.get_msg(1).subject == f"{stream_name.lower()}.in.x"

    _assert_update_changes_nothing(js, stream_name)


def test_server_source_with_nanosecond_start_time_round_trips(js, stream_name):
    origin = _origin(js, stream_name)
    js._api.request(
        f"STREAM.CREATE.{stream_name}",
        {
            "name": stream_name,
            "sources": [{"name": origin, "opt_start_time": "2024-01-02T03:04:05.123456789Z"}],
            "max_age": 1_000_000_007,
        },
    )
    assert _raw_config(js, stream_name)["sources"][0]["opt_start_time"] == "2024-01-02T03:04:05.123456789Z"
    _assert_update_changes_nothing(js, stream_name)


def test_server_mirror_with_transforms_round_trips(js, stream_name):
    origin = _origin(js, stream_name)
    mirror = js.create_stream(
        name=stream_name,
        mirror=StreamSource(
            name=origin,
            opt_start_time=START,
            subject_transforms=[SubjectTransform(src=f"{origin.lower()}.>", dest="m.>")],
        ),
    )
    m = mirror.info().config.mirror
    assert (m.name, m.opt_start_time, m.subject_transforms[0].dest) == (origin, START, "m.>")
    wait_until(lambda: js.stream_info(stream_name).state.messages == 3)
    assert mirror.get_msg(1).subject == "m.x"
    _assert_update_changes_nothing(js, stream_name)


def test_server_consumer_limits_inactive_threshold_is_seconds(js, stream_name):
    stream = js.create_stream(
        name=stream_name,
        subjects=[f"{stream_name.lower()}.>"],
        consumer_limits=StreamConsumerLimits(inactive_threshold=30.0, max_ack_pending=100),
    )
    assert stream.info().config.consumer_limits.inactive_threshold == 30.0
    assert [i.config.consumer_limits.inactive_threshold for i in js.streams()] == [30.0]
    assert _raw_config(js, stream_name)["consumer_limits"]["inactive_threshold"] == 30_000_000_000
    _assert_update_changes_nothing(js, stream_name)
    assert stream.info().config.consumer_limits.inactive_threshold == 30.0
