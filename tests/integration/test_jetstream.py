"""JetStream management and publishing against a real server."""

from __future__ import annotations

import pytest

import jetstream_sync as jss

from ..helpers import assert_client_works, timed


def test_stream_crud_round_trip(js, stream_name):
    s = js.create_stream(name=stream_name, subjects=["crud.>"], max_msgs=100, max_age=60.0, description="d")
    assert s.name == stream_name
    assert s.cached_info.config.max_age == 60.0
    assert stream_name in js.stream_names()
    assert js.stream_names(subject="crud.x") == [stream_name]
    assert js.stream_names(subject="other.x") == []
    cfg = js.stream(stream_name).cached_info.config
    cfg.max_msgs = 200
    updated = js.update_stream(cfg)
    assert updated.cached_info.config.max_msgs == 200
    assert updated.cached_info.config.description == "d"
    assert [i.config.name for i in js.streams()] == [stream_name]
    js.delete_stream(stream_name)
    with pytest.raises(jss.StreamNotFoundError) as ei:
        js.stream(stream_name)
    assert (ei.value.code, ei.value.err_code) == (404, 10059)


def test_get_update_round_trip_changes_nothing(js, stream_name):
    js.create_stream(
        jss.StreamConfig(name=stream_name, subjects=["cfg.>"], allow_msg_ttl=True, metadata={"k": "v"}),
        duplicate_window=30.0,
        max_msgs_per_subject=5,
    )
    raw_before = js._api.request(f"STREAM.INFO.{stream_name}")["config"]
    js.update_stream(js.stream_info(stream_name).config)
    assert js._api.request(f"STREAM.INFO.{stream_name}")["config"] == raw_before

    js.create_consumer(
        stream_name, durable_name="d", max_batch=7, max_expires=3.0, priority_groups=["g"],
        priority_policy="overflow", backoff=[1.0, 2.0], max_deliver=5,
    )
    raw_before = js._api.request(f"CONSUMER.INFO.{stream_name}.d")["config"]
    js.update_consumer(stream_name, js.consumer_info(stream_name, "d").config)
    assert js._api.request(f"CONSUMER.INFO.{stream_name}.d")["config"] == raw_before


def test_missing_stream_errors(js):
    with pytest.raises(jss.StreamNotFoundError):
        js.stream_info("NOPE")
    with pytest.raises(jss.StreamNotFoundError):
        js.delete_stream("NOPE")
    with pytest.raises(jss.StreamNotFoundError):
        js.create_consumer("NOPE", durable_name="d")


def test_invalid_names_rejected_before_sending(js):
    with pytest.raises(jss.InvalidOptionError):
        js.create_stream(name="a.b", subjects=["x"])
    with pytest.raises(jss.InvalidOptionError):
        js.consumer("S", "bad name")


def test_consumer_crud_round_trip(js, stream):
    c = stream.create_consumer(
        durable_name="billing",
        ack_policy="explicit",
        ack_wait=10.0,
        max_batch=50,
        max_expires=10.0,
        max_bytes=4096,
        metadata={"team": "a"},
        filter_subject=f"{stream.name.lower()}.orders",
    )
    assert (c.name, c.stream_name) == ("billing", stream.name)
    cfg = c.cached_info.config
    assert (cfg.max_batch, cfg.max_expires, cfg.max_bytes, cfg.ack_wait) == (50, 10.0, 4096, 10.0)
    assert cfg.metadata["team"] == "a"
    assert stream.consumer_names() == ["billing"]
    assert [i.name for i in stream.consumers()] == ["billing"]
    cfg.max_batch = 75
    assert stream.update_consumer(cfg).cached_info.config.max_batch == 75
    assert js.consumer(stream.name, "billing").info().config.max_batch == 75
    c.delete()
    with pytest.raises(jss.ConsumerNotFoundError) as ei:
        c.info()
    assert ei.value.err_code == 10014


def test_create_is_idempotent_but_conflicts_fail(stream):
    stream.create_consumer(durable_name="d", ack_wait=10.0)
    stream.create_consumer(durable_name="d", ack_wait=10.0)  # same config: fine
    with pytest.raises(jss.APIError) as ei:
        stream.create_consumer(durable_name="d", ack_wait=20.0)
    assert ei.value.err_code == 10148  # consumer already exists
    with pytest.raises(jss.APIError) as ei:
        stream.update_consumer(durable_name="missing")
    assert ei.value.err_code == 10149  # consumer does not exist
    assert stream.create_or_update_consumer(durable_name="d", ack_wait=20.0).cached_info.config.ack_wait == 20.0


def test_ephemeral_consumer_gets_a_name(stream):
    c = stream.create_consumer(inactive_threshold=30.0)
    assert c.name and c.cached_info.config.durable_name is None


def test_publish_ack_duplicate_and_expectations(js, stream):
    subj = f"{stream.name.lower()}.a"
    first = js.publish(subj, b"1", msg_id="m-1")
    assert (first.stream, first.seq, first.duplicate) == (stream.name, 1, False)
    again = js.publish(subj, b"1", msg_id="m-1")
    assert (again.seq, again.duplicate) == (1, True)
    assert js.publish(subj, b"2", expected_last_seq=1, expected_stream=stream.name).seq == 2
    with pytest.raises(jss.APIError) as ei:
        js.publish(subj, b"3", expected_last_seq=1)
    assert ei.value.err_code == 10071  # wrong last sequence
    with pytest.raises(jss.APIError):
        js.publish(subj, b"3", expected_last_msg_id="nope")
    with pytest.raises(jss.APIError):
        js.publish(subj, b"3", expected_last_subject_seq=1)
    with pytest.raises(jss.APIError):
        js.publish(subj, b"3", expected_stream="OTHER")
    assert js.publish(subj, b"3", expected_last_subject_seq=2, headers={"X-A": "b"}).seq == 3
    stored = stream.get_msg(seq=3)
    assert stored.data == b"3" and stored.headers["X-A"] == "b"
    assert stream.get_msg(last_by_subject=subj).seq == 3


def test_publish_without_stream_fails_after_retries(js):
    with pytest.raises(jss.NoRespondersError):
        js.publish("no.stream.here", b"x", timeout=1)


def test_purge_and_delete_msg(js, stream):
    subj = stream.name.lower()
    for i in range(10):
        js.publish(f"{subj}.{i % 2}", str(i).encode())
    stream.delete_msg(1)
    with pytest.raises(jss.MsgNotFoundError):
        stream.get_msg(seq=1)
    assert stream.purge(subject=f"{subj}.0") == 4
    assert stream.purge(keep=2) == 3
    assert stream.info().state.messages == 2


def test_account_info(js, stream):
    info = js.account_info()
    assert info.streams >= 1


def test_domain_and_prefix(nc):
    with pytest.raises(jss.InvalidOptionError):
        nc.jetstream(domain="a", api_prefix="b")
    assert nc.jetstream(domain="hub").api_prefix == "$JS.hub.API"
    with pytest.raises(jss.JetStreamNotEnabledError):
        nc.jetstream(domain="nowhere", timeout=1).account_info()


@pytest.mark.timeout(60)
def test_invalid_subjects_and_names_are_refused_before_sending(nc, js, stream, subj):
    for bad in (".foo", "foo."):
        with pytest.raises(jss.InvalidOptionError):
            stream.create_consumer(durable_name="x", filter_subject=bad)
    with pytest.raises(jss.InvalidOptionError):
        nc.jetstream(api_prefix="")
    with pytest.raises(jss.InvalidOptionError):
        js.stream_names(subject="FOO.>.123")

    exc, took = timed(lambda: js.publish("a..b", b""))
    assert isinstance(exc, jss.InvalidOptionError), f"js.publish('a..b'): got {exc!r}"
    assert took < 0.5, f"js.publish('a..b') took {took:.2f}s"

    with pytest.raises(jss.MsgNotFoundError):
        stream.delete_msg(999999)

    with pytest.raises(jss.StreamNotFoundError) as ei:
        js.stream("NOPE")
    assert "NOPE" in str(ei.value), str(ei.value)

    with pytest.raises(jss.ConsumerNotFoundError) as ei:
        stream.consumer("nope")
    assert "nope" in str(ei.value), str(ei.value)

    stream.create_push_consumer(durable_name="push", deliver_subject="deliver.x")
    with pytest.raises(jss.ConsumerPushBasedError, match="push_consumer"):
        stream.consumer("push")  # a pull handle on it is refused: it names the call that fits
    push = stream.push_consumer("push")  # a push consumer gets its own handle; pulls on it are refused
    assert isinstance(push, jss.PushConsumer)
    with pytest.raises(jss.ConsumerPushBasedError) as ei:
        push.next(timeout=1)
    assert "push" in str(ei.value), str(ei.value)

    assert_client_works(nc, js, subj)


@pytest.mark.timeout(30)
def test_expected_headers_need_the_right_types(js, stream, subj):
    """A sequence given as a string or float used to be sent as a header and
    answered "wrong last sequence" by the server."""
    js.publish(subj, b"1")
    for bad in ("1", 1.5, -1, True):
        with pytest.raises(jss.InvalidOptionError):
            js.publish(subj, b"x", expected_last_seq=bad)
        with pytest.raises(jss.InvalidOptionError):
            js.publish_async(subj, b"x", expected_last_subject_seq=bad)
    for bad in ("", 5):
        with pytest.raises(jss.InvalidOptionError):
            js.publish(subj, b"x", msg_id=bad)
    assert js.publish(subj, b"x", expected_last_seq=1).seq == 2


@pytest.mark.timeout(30)
def test_stream_subjects_must_be_a_list(js):
    for bad in ("t.>", "tt"):
        with pytest.raises(jss.InvalidOptionError, match="list"):
            js.create_stream(name="T", subjects=bad)


def test_the_default_timeout_is_jss_default_and_none_is_refused_before_sending(nc, js, subj):
    # None would mean "no limit", which a JetStream publish never does.
    sent = nc.stats["out_msgs"]
    for call in (lambda: js.publish(subj, b"x", timeout=None), lambda: js.publish_async(subj, b"x", timeout=None),
                 lambda: js.publish_batch([(subj, b"x")], timeout=None), lambda: js.counter_add(subj, 1, timeout=None)):  # fmt: skip
        with pytest.raises(jss.InvalidOptionError, match="timeout=None"):
            call()
    assert nc.stats["out_msgs"] == sent
    assert js.publish(subj, b"x", timeout=jss.DEFAULT).seq == 1
    assert js.publish(subj, b"y").seq == 2
