"""ADR-37 option defaults and validation, refill, statuses, heartbeat timing."""

import json

import pytest
from freezegun import freeze_time

import jetstream_sync as jss
from jetstream_sync.options import consume_options, fetch_options
from jetstream_sync._engines.protocol import StatusKind, Watchdog, classify_status, pending_from_headers, pull_request, refill


def test_consume_defaults():
    o = consume_options()
    assert (o.max_messages, o.max_bytes, o.expires, o.idle_heartbeat) == (500, 0, 30.0, 15.0)
    assert (o.threshold_messages, o.threshold_bytes) == (250, 0)


def test_consume_bytes_mode_defaults():
    o = consume_options(max_bytes=1001)
    assert (o.max_messages, o.max_bytes, o.threshold_messages, o.threshold_bytes) == (1_000_000, 1001, 500_000, 501)


def test_heartbeat_defaults_follow_expires():
    assert consume_options(expires=10).idle_heartbeat == 5.0
    assert consume_options(expires=120).idle_heartbeat == 30.0  # capped
    assert consume_options(expires=1).idle_heartbeat == 0.5


def test_threshold_rounds_up_and_works_with_one():
    assert consume_options(max_messages=5).threshold_messages == 3
    assert consume_options(max_messages=1).threshold_messages == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_messages": -1},
        {"max_messages": 0},
        {"max_messages": 1.5},
        {"max_messages": True},
        {"max_bytes": 0},
        {"max_messages": 10, "max_bytes": 100, "threshold_bytes": 50},  # both: max_bytes only caps each pull
        {"expires": 0.5},
        {"expires": -1},
        {"expires": "30"},
        {"idle_heartbeat": 0.4},
        {"idle_heartbeat": 31},
        {"idle_heartbeat": 20},  # > expires/2 with the default 30 s
        {"expires": 3, "idle_heartbeat": 2},
        {"max_messages": 10, "threshold_messages": 11},
        {"threshold_messages": 0},
        {"threshold_bytes": 10},  # without max_bytes
        {"max_bytes": 100, "threshold_bytes": 101},
    ],
)
def test_invalid_consume_options(kwargs):
    with pytest.raises(jss.InvalidOptionError):
        consume_options(**kwargs)


def test_fetch_defaults():
    o = fetch_options(5)
    assert (o.max_messages, o.max_bytes, o.expires, o.idle_heartbeat, o.no_wait) == (5, 0, 30.0, 5.0, False)
    assert o.client_timeout == 31.0
    assert fetch_options(5, expires=9.9).idle_heartbeat == 0.0
    assert fetch_options(5, expires=10).idle_heartbeat == 5.0
    assert fetch_options(max_bytes=300).max_messages == 1_000_000
    nw = fetch_options(5, no_wait=True)
    assert (nw.expires, nw.idle_heartbeat, nw.no_wait, nw.client_timeout) == (0.0, 0.0, True, 1.0)


def test_fetch_with_both_limits_and_no_wait_with_expires():
    # nats.java's fetch shapes: both limits (whichever is reached first), and no-wait with an expiry.
    both = fetch_options(10, max_bytes=1500)
    assert (both.max_messages, both.max_bytes) == (10, 1500)
    nwe = fetch_options(10, expires=1, no_wait=True)
    assert (nwe.no_wait, nwe.expires, nwe.idle_heartbeat, nwe.client_timeout) == (True, 1.0, 0.0, 2.0)
    assert json.loads(pull_request(10, nwe.expires, 1500, 0, True)) == {
        "batch": 10, "expires": 1_000_000_000, "max_bytes": 1500, "no_wait": True
    }


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((), {}),
        ((5,), {"max_bytes": 0}),
        ((5,), {"expires": -0.05}),
        ((5,), {"expires": 0}),
        ((5,), {"idle_heartbeat": 20}),
        ((5,), {"expires": 3, "idle_heartbeat": 2}),
        ((5,), {"idle_heartbeat": -1}),
        ((0,), {}),
        ((), {"max_bytes": -1}),
    ],
)
def test_invalid_fetch_options(args, kwargs):
    with pytest.raises(jss.InvalidOptionError):
        fetch_options(*args, **kwargs)


def test_pull_request_body_in_nanoseconds():
    body = json.loads(pull_request(10, 30.0, 1024, 15.0))
    assert body == {"batch": 10, "expires": 30_000_000_000, "max_bytes": 1024, "idle_heartbeat": 15_000_000_000}
    assert json.loads(pull_request(3, no_wait=True)) == {"batch": 3, "no_wait": True}


def test_refill_table():
    msgs = consume_options(max_messages=10, threshold_messages=5)
    assert refill(msgs, 4, 0) == (6, 0)  # below threshold: top up
    assert refill(msgs, 5, 0) is None  # at threshold: not yet
    assert refill(msgs, 0, 0) == (10, 0)
    byts = consume_options(max_bytes=1000, threshold_bytes=500)
    assert refill(byts, 1_000_000, 400) == (1_000_000, 600)
    assert refill(byts, 1_000_000, 500) is None
    one = consume_options(max_messages=1)
    assert refill(one, 1, 0) is None and refill(one, 0, 0) == (1, 0)


@pytest.mark.parametrize(
    "code, desc, kind",
    [
        ("100", "Idle Heartbeat", StatusKind.HEARTBEAT),
        ("404", "No Messages", StatusKind.END),
        ("408", "Request Timeout", StatusKind.END),
        ("408", "Interest Expired", StatusKind.END),
        ("409", "Message Size Exceeds MaxBytes", StatusKind.END),
        ("409", "Batch Completed", StatusKind.END),
        ("423", "Nats-Wrong-Pin-Id", StatusKind.END),
        ("409", "Exceeded MaxWaiting", StatusKind.LIMIT),
        ("409", "Exceeded MaxRequestBatch of 10", StatusKind.LIMIT),
        ("409", "Exceeded MaxRequestExpires of 1s", StatusKind.LIMIT),
        ("409", "Exceeded MaxRequestMaxBytes of 100", StatusKind.LIMIT),
        ("409", "Leadership Change", StatusKind.LEADERSHIP),
        ("409", "Server Shutdown", StatusKind.SHUTDOWN),
        ("409", "Consumer Deleted", StatusKind.CONSUMER_DELETED),
        ("409", "Consumer is push based", StatusKind.PUSH_BASED),
        ("400", "Bad Request - heartbeat value too large", StatusKind.BAD_REQUEST),
        ("503", "", StatusKind.NO_RESPONDERS),
        ("409", "Something New", StatusKind.OTHER),
    ],
)
def test_status_classification(code, desc, kind):
    assert classify_status(code, desc) is kind


def test_terminal_statuses():
    assert {k for k in StatusKind if k.terminal} == {
        StatusKind.CONSUMER_DELETED,
        StatusKind.PUSH_BASED,
        StatusKind.BAD_REQUEST,
    }


def test_pending_headers():
    assert pending_from_headers({"Nats-Pending-Messages": "3", "Nats-Pending-Bytes": "100"}) == (3, 100)
    assert pending_from_headers({"Nats-Pending-Messages": "x"}) == (0, 0)
    assert pending_from_headers(None) == (0, 0)


def test_watchdog_alarm_after_twice_the_heartbeat():
    with freeze_time("2026-01-01", tick=False) as clock:
        w = Watchdog(alarm_after=1.0)
        clock.tick(0.9)
        assert not w.missed()
        clock.tick(0.2)
        assert w.missed()
        assert not w.missed()  # re-armed
        clock.tick(0.5)
        w.traffic()
        clock.tick(0.9)
        assert not w.missed()


def test_watchdog_counts_from_when_the_caller_started_waiting():
    with freeze_time("2026-01-01", tick=False) as clock:
        import time

        w = Watchdog(alarm_after=1.0)
        clock.tick(60)  # the user processed a message for a minute: no alarm meanwhile
        since = time.monotonic()
        assert not w.missed(since)
        clock.tick(1.0)
        assert w.missed(since)


def test_watchdog_client_deadline():
    with freeze_time("2026-01-01", tick=False) as clock:
        w = Watchdog(0.0, deadline_after=31.0)
        clock.tick(30)
        w.traffic()  # re-armed on every message
        clock.tick(30)
        assert not w.expired()
        clock.tick(1)
        assert w.expired()
        assert not w.missed()  # no heartbeat configured


INF = float("inf")
NAN = float("nan")


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"expires": INF}, "expires"),
        ({"expires": -INF}, "expires"),
        ({"expires": NAN}, "expires"),
        ({"idle_heartbeat": INF}, "idle_heartbeat"),
        ({"idle_heartbeat": NAN}, "idle_heartbeat"),
        ({"expires": INF, "idle_heartbeat": 5}, "expires"),
    ],
)
def test_consume_options_reject_infinite_expires(kwargs, argument):
    with pytest.raises(jss.InvalidOptionError, match=f"^{argument} must be a finite number"):
        consume_options(**kwargs)


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"expires": INF}, "expires"),
        ({"expires": -INF}, "expires"),
        ({"expires": NAN}, "expires"),
        ({"idle_heartbeat": INF}, "idle_heartbeat"),
        ({"idle_heartbeat": NAN}, "idle_heartbeat"),
    ],
)
def test_fetch_options_reject_nan_and_infinite_durations(kwargs, argument):
    with pytest.raises(jss.InvalidOptionError, match=f"^{argument} must be a finite number"):
        fetch_options(5, **kwargs)


@pytest.mark.parametrize(
    "call, argument, text",
    [
        (lambda: consume_options(expires=0.5), "expires", "at least 1s, got 0.5"),
        (lambda: consume_options(expires=-1), "expires", "> 0 seconds, got -1"),
        (lambda: consume_options(expires="30"), "expires", "number of seconds, got '30'"),
        (lambda: consume_options(expires=True), "expires", "number of seconds, got True"),
        (lambda: consume_options(idle_heartbeat=0.4), "idle_heartbeat", "at least 0.5s, got 0.4"),
        (lambda: consume_options(expires=120, idle_heartbeat=31), "idle_heartbeat", "at most 30s, got 31"),
        (lambda: consume_options(expires=11 * 365 * 86400), "expires", "at most"),
        (lambda: fetch_options(5, expires=0), "expires", "> 0 seconds, got 0"),
        (lambda: fetch_options(5, expires=11 * 365 * 86400), "expires", "at most"),
        (lambda: fetch_options(5, idle_heartbeat=0), "idle_heartbeat", "> 0 seconds, got 0"),
        (lambda: fetch_options(5, idle_heartbeat="1"), "idle_heartbeat", "number of seconds"),
    ],
)
def test_duration_options_name_the_argument_and_the_bad_value(call, argument, text):
    with pytest.raises(jss.InvalidOptionError) as info:
        call()
    assert str(info.value).startswith(argument) and text in str(info.value)


def test_duration_options_keep_their_semantics_and_fit_int64_nanoseconds():
    assert consume_options(expires=1).expires == 1.0
    assert consume_options(expires=60, idle_heartbeat=30).idle_heartbeat == 30.0
    assert consume_options(expires=3600).idle_heartbeat == 30.0
    assert fetch_options(5, expires=0.01).expires == 0.01
    assert fetch_options(5, expires=2, idle_heartbeat=1).idle_heartbeat == 1.0
    assert fetch_options(5, expires=None).expires == 30.0
    assert fetch_options(5, expires=1, no_wait=True).expires == 1.0  # nats.java's noWaitExpiresIn
    with pytest.raises(jss.InvalidOptionError, match="finite"):
        fetch_options(5, expires=INF, no_wait=True)
    long = consume_options(expires=365 * 86400)
    body = json.loads(pull_request(long.max_messages, long.expires, 0, long.idle_heartbeat))
    assert body["expires"] == 365 * 86400 * 10**9 < 2**63 - 1
