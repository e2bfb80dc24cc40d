"""Direct get (ADR-31), per-message TTL (ADR-43), atomic batches (ADR-50),
counters (ADR-49) and stream info details, on a real server."""

from __future__ import annotations

import datetime

import pytest

import jetstream_sync as jss

from ..helpers import wait_until


@pytest.fixture
def direct(js):
    js.create_stream(name="D", subjects=["d.>"], allow_direct=True)
    for i in range(6):
        js.publish(f"d.{i % 3}", f"m{i}".encode(), headers={"k": str(i)} if i == 4 else None)
    return js.stream("D")


# -- direct get ------------------------------------------------------------------------


def test_direct_get_reads_what_the_api_reads(direct):
    for kwargs in (dict(seq=2), dict(last_by_subject="d.1"), dict(seq=2, next_by_subject="d.1"), dict(last_by_subject="d.*")):
        api = direct.get_msg(**kwargs)
        fast = direct.get_msg(**kwargs, direct=True)
        assert (fast.stream, fast.subject, fast.seq, fast.data, fast.headers) == (
            api.stream,
            api.subject,
            api.seq,
            api.data,
            api.headers,
        )
        assert abs((fast.time - api.time).total_seconds()) < 0.001
    assert direct.get_msg(last_by_subject="d.1", direct=True).headers == {"k": "4"}


def test_direct_get_misses_raise_not_found(direct):
    for kwargs in (dict(seq=99), dict(last_by_subject="d.9"), dict(seq=6, next_by_subject="d.0")):
        with pytest.raises(jss.MsgNotFoundError):
            direct.get_msg(**kwargs, direct=True)
        with pytest.raises(jss.MsgNotFoundError):
            direct.get_msg(**kwargs)


def test_direct_get_on_a_stream_without_allow_direct(js, stream, subj):
    js.publish(subj, b"x")
    with pytest.raises(jss.NoRespondersError, match="allow_direct"):
        stream.get_msg(1, direct=True)


def test_batch_and_multi_last_get(direct):
    assert [m.seq for m in direct.get_msgs(seq=2, batch=3)] == [2, 3, 4]
    assert [m.data for m in direct.get_msgs(next_by_subject="d.1", batch=10)] == [b"m1", b"m4"]
    assert direct.get_msgs(seq=50) == []
    small = direct.get_msgs(batch=10, max_bytes=40)
    assert 1 <= len(small) < 6
    last = direct.get_last_msgs(["d.0", "d.1", "d.2"])
    assert sorted((m.subject, m.seq) for m in last) == [("d.0", 4), ("d.1", 5), ("d.2", 6)]
    upto = direct.get_last_msgs(["d.>"], up_to_seq=3)
    assert sorted(m.seq for m in upto) == [1, 2, 3]
    first = direct.get_msg(1)
    since = direct.get_msgs(start_time=first.time, batch=100)
    assert [m.seq for m in since] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.get_msg(seq=0, direct=True),
        lambda s: s.get_msg(1, direct="yes"),
        lambda s: s.get_msg(1, "d.1"),
        lambda s: s.get_msg(last_by_subject="d.1", next_by_subject="d.1"),
        lambda s: s.get_msg(next_by_subject="d..1"),
        lambda s: s.get_msgs(batch=0),
        lambda s: s.get_msgs(seq=1, start_time=datetime.datetime.now(datetime.timezone.utc)),
        lambda s: s.get_msgs(start_time=datetime.datetime.now()),
        lambda s: s.get_msgs(max_bytes=-1),
        lambda s: s.get_last_msgs("d.1"),
        lambda s: s.get_last_msgs([]),
        lambda s: s.get_last_msgs(["d.1"], up_to_seq=1, up_to_time=datetime.datetime.now(datetime.timezone.utc)),
    ],
)
def test_direct_get_bad_input(direct, call):
    with pytest.raises(jss.InvalidOptionError):
        call(direct)


# -- publish: TTL, expectations, batches, counters ------------------------------------------


def test_per_message_ttl(js):
    js.create_stream(name="TTL", subjects=["ttl.>"], allow_msg_ttl=True)
    ack = js.publish("ttl.a", b"gone soon", msg_ttl=1)
    keep = js.publish("ttl.b", b"stays")
    assert js.get_msg("TTL", ack.seq).headers == {"Nats-TTL": "1s"}
    fut = js.publish_async("ttl.c", b"x", msg_ttl=1.5)
    assert js.get_msg("TTL", fut.result(5).seq).headers == {"Nats-TTL": "1500ms"}

    def expired():
        try:
            js.get_msg("TTL", ack.seq)
        except jss.MsgNotFoundError:
            return True
        return False

    wait_until(expired, timeout=10)
    assert js.get_msg("TTL", keep.seq).data == b"stays"
    for bad in (0.5, 0, -1, float("nan"), "1s", True):
        with pytest.raises(jss.InvalidOptionError):
            js.publish("ttl.a", b"x", msg_ttl=bad)


def test_ttl_on_a_stream_without_it_is_refused(js, stream, subj):
    with pytest.raises(jss.APIError):
        js.publish(subj, b"x", msg_ttl=5)


def test_expected_last_sequence_of_another_subject(js):
    js.create_stream(name="E", subjects=["e.>"])
    js.publish("e.1", b"")
    two = js.publish("e.2", b"")
    js.publish("e.3", b"", expected_last_subject_seq=two.seq, expected_last_subject_seq_subject="e.*")
    with pytest.raises(jss.APIError):
        js.publish("e.3", b"", expected_last_subject_seq=two.seq, expected_last_subject_seq_subject="e.*")
    with pytest.raises(jss.InvalidOptionError):
        js.publish("e.3", b"", expected_last_subject_seq_subject="e.*")
    with pytest.raises(jss.InvalidOptionError):
        js.publish("e.3", b"", expected_last_subject_seq=1, expected_last_subject_seq_subject="e..x")


def test_atomic_batch_is_all_or_nothing(js):
    stream = js.create_stream(name="AB", subjects=["ab.>"], allow_atomic=True)
    ack = js.publish_batch([("ab.1", b"one"), ("ab.2", "two", {"h": "v"}), ("ab.3", b"three")])
    assert (ack.stream, ack.seq, ack.batch_size) == ("AB", 3, 3) and ack.batch_id
    assert stream.get_msg(2).headers["h"] == "v"
    bad = [("ab.1", b"x"), ("ab.2", b"y", {"Nats-Expected-Last-Sequence": "1"}), ("ab.3", b"z")]
    with pytest.raises(jss.APIError):
        js.publish_batch(bad)
    assert stream.info().state.messages == 3  # none of the failed batch was stored
    one = js.publish_batch([("ab.9", b"solo")])
    assert one.batch_size == 1


def test_batch_on_a_stream_without_atomic_is_refused(js, stream, subj):
    with pytest.raises(jss.APIError):
        js.publish_batch([(subj, b"a"), (subj, b"b")])
    assert stream.info().state.messages == 0


@pytest.mark.parametrize(
    "items",
    [
        [],
        [("ab.1", b"x")] * 1001,
        [("ab.1",)],
        ["ab.1"],
        [("ab.1", b"x"), ("ab..2", b"y")],
        [("ab.1", b"x"), ("ab.2", b"y", "not headers")],
        [("ab.1", b"x"), ("ab.2", 42)],
        "ab.1",
    ],
)
def test_bad_batches_send_nothing(js, items):
    stream = js.create_stream(name="AB", subjects=["ab.>"], allow_atomic=True)
    with pytest.raises((jss.InvalidOptionError, TypeError)):
        js.publish_batch(items)
    assert stream.info().state.messages == 0


def test_counters(js):
    js.create_stream(name="CNT", subjects=["cnt.>"], allow_msg_counter=True)
    assert js.counter_add("cnt.a") == 1
    assert js.counter_add("cnt.a", 41) == 42
    assert js.counter_add("cnt.a", -50) == -8
    assert js.counter_add("cnt.b", 10**30) == 10**30
    assert js.counter_get("CNT", "cnt.a") == -8
    with pytest.raises(jss.MsgNotFoundError):
        js.counter_get("CNT", "cnt.none")
    for bad in (1.5, "1", True, None):
        with pytest.raises(jss.InvalidOptionError):
            js.counter_add("cnt.a", bad)


# -- stream info and create-or-update ---------------------------------------------------------


def test_stream_info_subjects_and_deleted_details(js):
    stream = js.create_stream(name="SI", subjects=["si.>"])
    for i in range(30):
        js.publish(f"si.{i}", b"")
    js.publish("si.0", b"")
    js.delete_msg("SI", 3)
    js.delete_msg("SI", 5)
    info = stream.info(subjects_filter="si.*", deleted_details=True)
    assert len(info.state.subjects) == 28  # si.2 (seq 3) and si.4 (seq 5) were deleted
    assert info.state.subjects["si.0"] == 2
    assert sorted(info.state.deleted) == [3, 5]
    assert js.stream_info("SI").state.subjects is None
    assert js.stream_info("SI", subjects_filter="si.1").state.subjects == {"si.1": 1}
    with pytest.raises(jss.InvalidOptionError):
        js.stream_info("SI", subjects_filter="si..x")
    with pytest.raises(jss.InvalidOptionError):
        js.stream_info("SI", deleted_details="yes")


def test_create_or_update_stream(js):
    s = js.create_or_update_stream(name="CU", subjects=["cu.a"])
    assert s.cached_info.config.subjects == ["cu.a"]
    s = js.create_or_update_stream(name="CU", subjects=["cu.a", "cu.b"])
    assert s.info().config.subjects == ["cu.a", "cu.b"]


def test_batch_gets_on_a_stream_without_direct_say_so(js, stream, subj):
    js.publish(subj, b"x")
    for call in (lambda: stream.get_msgs(seq=1), lambda: stream.get_last_msgs([subj])):
        with pytest.raises(jss.NoRespondersError, match="allow_direct"):
            call()
    with pytest.raises(jss.InvalidOptionError):
        js.counter_get(stream.name, f"{stream.name.lower()}.*")
    assert js.stream_info(stream.name, subjects_filter="nomatch.>").state.subjects == {}
