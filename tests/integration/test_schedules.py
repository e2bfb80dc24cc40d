"""Message schedules (ADR-51) on a real server: what nats.go's and
orbit's schedule tests check, in blocking form. The server's scheduler fires
at whole seconds, at most every 250 ms (nats-server scheduler.go), so
deliveries are awaited with a deadline, never a sleep."""

from __future__ import annotations

import datetime

import pytest

import jetstream_sync as jss

from ..helpers import wait_until

UTC = datetime.timezone.utc


@pytest.fixture
def sched(js):
    name = "SCHED"
    js.create_stream(name=name, subjects=["sched.>", "out.>", "in.>"], allow_msg_schedules=True, allow_msg_ttl=True)
    yield name
    js.delete_stream(name)


def count(js, stream, subject):
    return (js.stream_info(stream, subjects_filter=subject).state.subjects or {}).get(subject, 0)


def test_an_at_schedule_is_delivered_to_its_target_at_or_after_its_time(js, sched):
    at = datetime.datetime.now(UTC) + datetime.timedelta(seconds=2)
    js.publish_schedule("sched.once", b"hello", schedule=at, target="out.once", ttl=60, headers={"k": "v"})
    [held] = js.schedules(sched)
    assert (held.subject, held.target, held.data, held.ttl) == ("sched.once", "out.once", b"hello", "60s")
    assert held.schedule.startswith("@at ") and count(js, sched, "out.once") == 0

    wait_until(lambda: count(js, sched, "out.once"), timeout=10)
    msg = js.get_msg(sched, last_by_subject="out.once")
    assert msg.data == b"hello"
    assert msg.time >= at  # never early; the header's time is rounded up to the second
    assert msg.time - at < datetime.timedelta(seconds=2.5)  # whole seconds + the 250 ms timer + margin
    assert msg.headers["k"] == "v"
    assert (msg.headers["Nats-Scheduler"], msg.headers["Nats-Schedule-Next"]) == ("sched.once", "purge")
    assert msg.headers["Nats-TTL"] == "60s"
    # An @at schedule is removed once it has fired.
    wait_until(lambda: js.schedules(sched) == [], timeout=5)


def test_an_every_schedule_repeats_until_cancelled(js, sched):
    js.publish_schedule("sched.tick", b"tick", schedule="@every 1s", target="out.tick")
    wait_until(lambda: count(js, sched, "out.tick") >= 3, timeout=10)
    times = [js.get_msg(sched, seq=1, next_by_subject="out.tick")]
    times.append(js.get_msg(sched, seq=times[0].seq + 1, next_by_subject="out.tick"))
    assert times[1].time - times[0].time >= datetime.timedelta(seconds=0.75)
    assert times[1].headers["Nats-Scheduler"] == "sched.tick"
    assert "Nats-Schedule-Next" in times[1].headers and times[1].headers["Nats-Schedule-Next"] != "purge"

    assert js.cancel_schedule(sched, "sched.tick") is True
    assert js.schedules(sched) == []
    stopped_at = count(js, sched, "out.tick")
    # A marker scheduled 3 s out: once it has fired, the cancelled one would have fired twice more.
    marker = datetime.datetime.now(UTC) + datetime.timedelta(seconds=3)
    js.publish_schedule("sched.marker", b"", schedule=marker, target="out.marker")
    wait_until(lambda: count(js, sched, "out.marker"), timeout=10)
    assert count(js, sched, "out.tick") == stopped_at
    assert js.cancel_schedule(sched, "sched.tick") is False  # nothing left to cancel


def test_a_new_schedule_on_a_subject_replaces_the_old_one(js, sched):
    js.publish_schedule("sched.job", b"v1", schedule="@hourly", target="out.job")
    js.publish_schedule("sched.job", b"v2", schedule="0 30 9 * * mon-fri", target="out.job", time_zone="Europe/Amsterdam")
    [job] = js.schedules(sched)
    assert (job.data, job.schedule, job.time_zone) == (b"v2", "0 30 9 * * mon-fri", "Europe/Amsterdam")
    assert js.stream_info(sched).state.messages == 1  # the server rolls the subject up


def test_schedules_lists_only_schedules_matching_the_filter(js, sched):
    js.publish_schedule("sched.a.1", b"1", schedule="@daily", target="out.a")
    js.publish_schedule("sched.b.1", b"2", schedule="@every 1h", target="out.b", source="in.b")
    js.publish("sched.a.plain", b"not a schedule")
    js.publish("out.a", b"a target message")
    assert [s.subject for s in js.schedules(sched)] == ["sched.a.1", "sched.b.1"]
    [b] = js.schedules(sched, "sched.b.>")
    assert (b.schedule, b.target, b.source, b.stream) == ("@every 1h", "out.b", "in.b", sched)
    assert js.schedules(sched, "nothing.>") == []


def test_a_source_schedule_publishes_the_last_message_of_its_source(js, sched):
    js.publish("in.temp", b"21.5")
    js.publish_schedule("sched.sample", b"fallback", schedule="@every 1s", target="out.sampled", source="in.temp")
    wait_until(lambda: count(js, sched, "out.sampled"), timeout=10)
    assert js.get_msg(sched, last_by_subject="out.sampled").data == b"21.5"
    js.cancel_schedule(sched, "sched.sample")


BAD = [
    (dict(schedule="@every 500ms"), "shortest"),
    (dict(schedule="* * * * *"), "6 fields"),
    (dict(schedule="@at 2030-01-02"), "RFC 3339"),
    (dict(schedule=datetime.datetime(2030, 1, 1)), "aware"),
    (dict(schedule="@sometimes"), "not '@at"),
    (dict(target="out.*"), "wildcards"),
    (dict(target="sched.bad"), "differ"),
    (dict(ttl=0), "ttl"),
    (dict(time_zone="UTC"), "only with cron"),
    (dict(source="in.>"), "wildcards"),
    (dict(rollup=1), "rollup"),
    (dict(headers=["x"]), "headers"),
    (dict(msg_ttl=-1), "msg_ttl"),
    (dict(timeout=0), "timeout"),
]


@pytest.mark.parametrize("kwargs, says", BAD)
def test_bad_schedules_are_refused_before_anything_is_sent(js, sched, kwargs, says):
    args = dict(schedule="@every 5s", target="out.bad")
    args.update(kwargs)
    with pytest.raises(jss.InvalidOptionError, match=says):
        js.publish_schedule("sched.bad", b"x", **args)
    assert js.stream_info(sched).state.messages == 0


def test_a_stream_without_allow_msg_schedules_refuses_clearly(js):
    js.create_stream(name="NOSCHED", subjects=["nosched.>"])
    try:
        with pytest.raises(jss.APIError, match="allow_msg_schedules") as info:
            js.publish_schedule("nosched.a", b"x", schedule="@every 1s", target="nosched.out")
        assert info.value.err_code == jss.ErrorCode.MESSAGE_SCHEDULES_DISABLED
        assert js.stream_info("NOSCHED").state.messages == 0
    finally:
        js.delete_stream("NOSCHED")


def test_the_server_checks_what_only_it_can(js, sched):
    # Time zones are the server's tzdata; a target outside the stream is its to refuse.
    with pytest.raises(jss.APIError):
        js.publish_schedule("sched.tz", b"x", schedule="@daily", target="out.tz", time_zone="Mars/Olympus_Mons")
    with pytest.raises(jss.APIError):
        js.publish_schedule("sched.far", b"x", schedule="@daily", target="elsewhere.out")
    assert js.schedules(sched) == []
