"""Options of message schedules (ADR-51) and fast-ingest batches (ADR-50):
each bad value is refused with InvalidOptionError, each good one becomes the
header or setting the server expects. Pure: no server."""

from __future__ import annotations

import datetime
import types

import pytest

import jetstream_sync as jss
from jetstream_sync import options
from jetstream_sync._core.features import require, server_version

UTC = datetime.timezone.utc


@pytest.mark.parametrize(
    "value, header",
    [
        ("@at 2030-01-02T03:04:05Z", "@at 2030-01-02T03:04:05Z"),
        ("@at 2030-01-02T03:04:05+02:00", "@at 2030-01-02T03:04:05+02:00"),
        (datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC), "@at 2030-01-02T03:04:05Z"),
        # rounded up to whole seconds: never earlier than asked
        (datetime.datetime(2030, 1, 2, 3, 4, 5, 1, tzinfo=UTC), "@at 2030-01-02T03:04:06Z"),
        (datetime.datetime(2030, 1, 2, 5, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=2))), "@at 2030-01-02T03:04:05Z"),
        ("@every 1s", "@every 1s"),
        ("@every 1m30s", "@every 1m30s"),
        ("@every 1.5h", "@every 1.5h"),
        ("@every 1000ms", "@every 1000ms"),
        ("@hourly", "@hourly"),
        ("@daily", "@daily"),
        ("@midnight", "@midnight"),
        ("@weekly", "@weekly"),
        ("@monthly", "@monthly"),
        ("@yearly", "@yearly"),
        ("@annually", "@annually"),
        ("0 30 9 * * mon-fri", "0 30 9 * * mon-fri"),
        ("*/5 * * * * *", "*/5 * * * * *"),
        ("0 0 0-23/2 1,15 jan-mar 0", "0 0 0-23/2 1,15 jan-mar 0"),
    ],
)
def test_good_schedules_become_the_header(value, header):
    assert options.schedule_pattern(value) == header


@pytest.mark.parametrize(
    "value, says",
    [
        (None, "str or an aware datetime"),
        ("", "str or an aware datetime"),
        (30, "str or an aware datetime"),
        (datetime.datetime(2030, 1, 2, 3, 4, 5), "aware datetime"),
        ("@at tomorrow", "RFC 3339"),
        ("@at 2030-01-02", "RFC 3339"),
        ("@at 2030-01-02T03:04:05", "RFC 3339"),  # no zone
        ("@every", "not '@at"),
        ("@every 10", "Go duration"),
        ("@every 1 s", "Go duration"),
        ("@every -5s", "Go duration"),
        ("@every 500ms", "shortest"),
        ("@every 0s", "shortest"),
        ("@fortnightly", "not '@at"),
        ("* * * * *", "6 fields"),  # 5-field crontab: the server's has seconds first
        ("0 0 0 * * * *", "6 fields"),
        ("0  0 0 * * *", "6 fields"),
        ("60 * * * * *", "seconds 60 is outside 0-59"),
        ("0 0 24 * * *", "hours 24"),
        ("0 0 0 0 * *", "day of month 0"),
        ("0 0 0 * 13 *", "month 13"),
        ("0 0 0 * * 7", "day of week 7"),
        ("0 0 0 * * funday", "bad day of week"),
        ("0 0 x * * *", "bad hours"),
    ],
)
def test_bad_schedules_are_refused(value, says):
    with pytest.raises(jss.InvalidOptionError, match=says):
        options.schedule_pattern(value)


def test_schedule_headers_carry_every_option():
    hdrs = options.schedule_headers(
        "sched.a", "0 0 9 * * *", "out.a", ttl=300, time_zone="Europe/Amsterdam", source="in.a", rollup=True
    )
    assert hdrs == {
        "Nats-Schedule": "0 0 9 * * *",
        "Nats-Schedule-Target": "out.a",
        "Nats-Schedule-TTL": "300s",
        "Nats-Schedule-Time-Zone": "Europe/Amsterdam",
        "Nats-Schedule-Source": "in.a",
        "Nats-Schedule-Rollup": "sub",
    }
    assert options.schedule_headers("sched.a", "@every 5s", "out.a") == {
        "Nats-Schedule": "@every 5s",
        "Nats-Schedule-Target": "out.a",
    }


@pytest.mark.parametrize(
    "kwargs, says",
    [
        (dict(target=None), "schedule target"),
        (dict(target="out.*"), "wildcards"),
        (dict(target="sched.a"), "differ from the schedule's own subject"),
        (dict(ttl=0.5), "schedule ttl"),
        (dict(ttl="5m"), "schedule ttl"),
        (dict(schedule="0 0 9 * * *", time_zone=""), "time_zone"),
        (dict(schedule="0 0 9 * * *", time_zone=" UTC"), "time_zone"),
        (dict(schedule="0 0 9 * * *", time_zone=2), "time_zone"),
        (dict(time_zone="UTC"), "only with cron"),  # @every
        (dict(schedule="@at 2030-01-02T03:04:05Z", time_zone="UTC"), "only with cron"),
        (dict(source="in.>"), "wildcards"),
        (dict(source="sched.a"), "source must differ"),
        (dict(rollup="yes"), "rollup"),
    ],
)
def test_bad_schedule_options_are_refused(kwargs, says):
    args = dict(schedule="@every 5s", target="out.a")
    args.update(kwargs)
    with pytest.raises(jss.InvalidOptionError, match=says):
        options.schedule_headers("sched.a", **args)


@pytest.mark.parametrize(
    "text, ns",
    [("1s", 10**9), ("1m30s", 90 * 10**9), ("1.5h", 5400 * 10**9), ("250ms", 250 * 10**6), ("x", None), ("", None), ("5", None)],
)
def test_go_durations(text, ns):
    assert options.go_duration_ns(text) == ns


GOOD_FAST = dict(flow=100, max_outstanding_acks=2, ack_timeout=5.0, continue_on_gap=False, error_handler=None)


@pytest.mark.parametrize(
    "name, value",
    [
        ("flow", 0), ("flow", 65536), ("flow", 1.5), ("flow", True), ("flow", "10"),
        ("max_outstanding_acks", 0), ("max_outstanding_acks", 4), ("max_outstanding_acks", None),
        ("ack_timeout", 0), ("ack_timeout", -1), ("ack_timeout", "5"), ("ack_timeout", float("nan")),
        ("continue_on_gap", "yes"), ("continue_on_gap", 1),
        ("error_handler", 5), ("error_handler", "print"),
    ],
)  # fmt: skip
def test_bad_fast_batch_options_are_refused(name, value):
    with pytest.raises(jss.InvalidOptionError, match=name):
        options.fast_batch_options(**{**GOOD_FAST, name: value})


def test_fast_batch_options_keep_good_values():
    handler = print
    opts = options.fast_batch_options(1, 3, 0.5, True, handler)
    assert (opts.flow, opts.max_outstanding_acks, opts.ack_timeout, opts.continue_on_gap, opts.error_handler) == (
        1, 3, 0.5, True, handler,
    )  # fmt: skip
    assert options.fast_batch_options(65535, 1, 5, False, None).flow == 65535


@pytest.mark.parametrize("messages", [[], (), iter([]), "abc", b"abc", 5, None])
def test_fast_batch_needs_messages(messages):
    with pytest.raises(jss.InvalidOptionError, match="one or more"):
        options.fast_batch_items(messages)


def _conn(version):
    return types.SimpleNamespace(nc=types.SimpleNamespace(_server_info={"version": version} if version else {}))


@pytest.mark.parametrize(
    "version, since, refused",
    [("2.11.4", (2, 12), True), ("2.12.0", (2, 12), False), ("2.12.9", (2, 14), True), ("2.14.0", (2, 14), False),
     ("2.15.1", (2, 14), False), ("3.0.0-beta", (2, 14), False), (None, (2, 14), False)],
)  # fmt: skip
def test_features_need_a_server_version(version, since, refused):
    conn = _conn(version)
    if refused:
        with pytest.raises(jss.FeatureNotSupportedError) as info:
            require(conn, "fast-ingest batch publish", since)
        assert info.value.server_version == version
        assert info.value.needed == f"{since[0]}.{since[1]}"
        assert f"needs nats-server {since[0]}.{since[1]} or later; the server is {version}" in str(info.value)
    else:
        require(conn, "fast-ingest batch publish", since)
    assert server_version(_conn("2.15.1")) == ((2, 15, 1), "2.15.1")
