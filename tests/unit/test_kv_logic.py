"""Key-value logic without a server: key and bucket rules, the bucket's stream
configuration, operations from headers, status, and the watcher's marker."""

from __future__ import annotations

import datetime

import pytest

import jetstream_sync as jss
from jetstream_sync.kv import manage as _kv_bucket
from jetstream_sync import errors, options
from jetstream_sync.kv.bucket import KeyValueOp, KeyWatcher, operation_of
from jetstream_sync._core.message import Msg
from jetstream_sync.models import StreamInfo

GOOD_KEYS = ["a", "a.b", "A-Z_0=9/x", "foo.bar.baz", "=", "-"]
BAD_KEYS = ["", ".", ".a", "a.", "a..b", "a b", "a*", "*", ">", "a.>", "ä", "a\tb", None, 5, b"a"]


@pytest.mark.parametrize("key", GOOD_KEYS)
def test_valid_keys(key):
    assert options.kv_key(key) == key


@pytest.mark.parametrize("key", BAD_KEYS)
def test_invalid_keys(key):
    with pytest.raises(errors.InvalidKeyError) as err:
        options.kv_key(key)
    assert isinstance(err.value, errors.InvalidOptionError) and isinstance(err.value, ValueError)


@pytest.mark.parametrize("pattern", ["a.*", "*", ">", "a.>", "*.b.>", "a"])
def test_valid_filters(pattern):
    assert options.kv_key(pattern, wildcards=True) == pattern


@pytest.mark.parametrize("pattern", ["", "a.>.b", ">.a", "a*", "*a.b", "foo.", "a..b", "x!"])
def test_invalid_filters(pattern):
    with pytest.raises(errors.InvalidKeyError):
        options.kv_key(pattern, wildcards=True)


@pytest.mark.parametrize("name", ["", "a.b", "a b", "x!", "*", ">", "ä", "B" * 253, 3, None])
def test_invalid_bucket_names(name):
    with pytest.raises(errors.InvalidBucketNameError):
        options.kv_bucket(name)


def test_valid_bucket_names():
    for name in ("a", "A_b-9", "B" * 252):
        assert options.kv_bucket(name) == name


@pytest.mark.parametrize("seconds, header", [(1, "1s"), (1.0, "1s"), (3600, "3600s"), (1.5, "1500ms")])
def test_msg_ttl_header(seconds, header):
    assert options.msg_ttl("ttl", seconds) == header


@pytest.mark.parametrize("seconds", [0, 0.5, -1, "1s", None, True, float("nan")])
def test_msg_ttl_below_a_second_or_not_a_number(seconds):
    with pytest.raises(errors.InvalidOptionError):
        options.msg_ttl("ttl", seconds)


def test_operations_from_headers():
    assert operation_of(None) is KeyValueOp.PUT
    assert operation_of({"KV-Operation": "DEL"}) is KeyValueOp.DEL
    assert operation_of({"KV-Operation": "PURGE", "Nats-Rollup": "sub"}) is KeyValueOp.PURGE
    assert operation_of({"Nats-Marker-Reason": "MaxAge"}) is KeyValueOp.PURGE
    assert operation_of({"Nats-Marker-Reason": "Purge"}) is KeyValueOp.PURGE
    assert operation_of({"Nats-Marker-Reason": "Remove"}) is KeyValueOp.DEL
    assert operation_of({"Other": "x"}) is KeyValueOp.PUT
    assert KeyValueOp.DEL == "DEL"  # compares with nats-py's strings


def test_stream_config_of_a_bucket():
    cfg = _kv_bucket.stream_config(_kv_bucket.kv_config("CONF", None, dict(history=5, ttl=30, compression=True,
                                                                          limit_marker_ttl=60, metadata={"a": "b"})))  # fmt: skip
    d = cfg.as_dict()
    assert d["name"] == "KV_CONF" and d["subjects"] == ["$KV.CONF.>"]
    assert (d["max_msgs_per_subject"], d["max_msgs"], d["max_bytes"], d["max_msg_size"]) == (5, -1, -1, -1)
    assert (d["max_age"], d["duplicate_window"]) == (30 * 10**9, 30 * 10**9)
    assert (d["discard"], d["allow_rollup_hdrs"], d["deny_delete"], d["allow_direct"]) == ("new", True, True, True)
    assert (d["compression"], d["allow_msg_ttl"], d["subject_delete_marker_ttl"]) == ("s2", True, 60 * 10**9)
    assert (d["storage"], d["num_replicas"], d["max_consumers"], d["metadata"]) == ("file", 1, -1, {"a": "b"})
    plain = _kv_bucket.stream_config(_kv_bucket.kv_config("P", None, {})).as_dict()
    assert plain["duplicate_window"] == 120 * 10**9 and "allow_msg_ttl" not in plain
    assert "subject_delete_marker_ttl" not in plain and plain["max_msgs_per_subject"] == 1


def test_config_from_a_config_object_and_overrides():
    base = jss.KeyValueConfig(bucket="A", history=3)
    assert _kv_bucket.kv_config(base, None, {"ttl": 5}).ttl == 5
    assert _kv_bucket.kv_config(None, base, {}).history == 3
    assert _kv_bucket.kv_config("B", base, {}).bucket == "B"
    assert base.ttl is None  # the caller's object is not changed
    assert _kv_bucket.kv_config("R", None, {"republish": {"src": ">", "dest": "x.>"}}).republish.dest == "x.>"
    for bucket, config, fields in ((base, base, {}), (None, "A", {}), ("A", None, {"histroy": 2}), (None, None, {})):
        with pytest.raises(errors.InvalidOptionError):
            _kv_bucket.kv_config(bucket, config, fields)


def test_status_from_stream_info():
    info = StreamInfo.from_response({
        "config": {"name": "KV_S", "subjects": ["$KV.S.>"], "max_msgs_per_subject": 4, "max_age": 90 * 10**9,
                   "max_bytes": -1, "max_msg_size": 512, "storage": "memory", "num_replicas": 1,
                   "compression": "s2", "subject_delete_marker_ttl": 10**9, "metadata": {"k": "v"}},
        "state": {"messages": 7, "bytes": 700, "first_seq": 1, "last_seq": 7, "consumer_count": 0},
    })  # fmt: skip
    s = jss.KeyValueStatus("S", info)
    assert (s.values, s.bytes, s.history, s.ttl, s.limit_marker_ttl, s.marker_ttl) == (7, 700, 4, 90.0, 1.0, 1.0)
    assert s.is_compressed and s.metadata == {"k": "v"} and s.backing_store == "JetStream"
    c = s.config
    assert (c.bucket, c.history, c.ttl, c.max_value_size, c.max_bytes, c.storage, c.compression) == (
        "S", 4, 90.0, 512, None, "memory", True)  # fmt: skip
    state = {"messages": 0, "bytes": 0, "first_seq": 0, "last_seq": 0, "consumer_count": 0}
    bare = jss.KeyValueStatus("T", StreamInfo.from_response({"config": {"name": "KV_T", "max_age": 0}, "state": state}))
    assert (bare.ttl, bare.limit_marker_ttl, bare.is_compressed) == (None, None, False)


def test_error_tree():
    assert issubclass(jss.BucketNotFoundError, jss.StreamNotFoundError)
    assert issubclass(jss.KeyDeletedError, jss.KeyNotFoundError)
    assert issubclass(jss.KeyNotFoundError, jss.NotFoundError)
    assert issubclass(jss.KeyExistsError, jss.KeyWrongLastSequenceError)
    assert issubclass(jss.KeyWrongLastSequenceError, jss.APIError)
    for cls in (jss.InvalidKeyError, jss.InvalidBucketNameError):
        assert issubclass(cls, jss.InvalidOptionError) and issubclass(cls, jss.KeyValueError)
    err = jss.KeyDeletedError("gone", entry="e", operation=KeyValueOp.DEL)
    assert (str(err), err.entry, err.operation, err.code) == ("gone", "e", KeyValueOp.DEL, 404)
    for name in errors.__all__:
        assert getattr(jss, name) is getattr(errors, name) or name == "ErrorCode"


# -- the watcher's initial-values marker -----------------------------------------------------


class FakeMessages:
    """What KeyWatcher reads: next(timeout) / stop() / closed of a MessagesContext."""

    def __init__(self, msgs):
        self.msgs = list(msgs)
        self.closed = False

    def next(self, timeout=None):
        if self.closed:
            raise errors.ConsumerStoppedError("stopped")
        if not self.msgs:
            raise errors.TimeoutError("nothing")
        return self.msgs.pop(0)

    def stop(self):
        self.closed = True


def kv_msg(key, seq, pending, headers=None, data=b"v", consumer="c", cseq=None):
    ts = 1_700_000_000_000_000_000 + seq
    cseq = seq if cseq is None else cseq
    return Msg(f"$KV.B.{key}", f"$JS.ACK.KV_B.{consumer}.1.{seq}.{cseq}.{ts}.{pending}", data, headers)


def drain(w):
    out = []
    while True:
        try:
            e = w.next(timeout=0)
        except errors.TimeoutError:
            return out
        out.append(None if e is None else (e.key, e.revision, e.delta, e.operation.value))


def test_marker_first_when_nothing_is_pending():
    w = KeyWatcher("B", "$KV.B.", FakeMessages([kv_msg("a", 5, 0)]), 0, False)
    assert drain(w) == [None, ("a", 5, 0, "PUT")]


def test_marker_after_the_first_entry_with_nothing_pending():
    msgs = [kv_msg("a", 1, 2), kv_msg("b", 2, 1), kv_msg("a", 3, 0), kv_msg("c", 4, 0)]
    w = KeyWatcher("B", "$KV.B.", FakeMessages(msgs), 2, False)
    assert drain(w) == [("a", 1, 2, "PUT"), ("b", 2, 1, "PUT"), ("a", 3, 0, "PUT"), None, ("c", 4, 0, "PUT")]


def test_marker_when_the_last_initial_entry_is_an_ignored_delete():
    msgs = [kv_msg("a", 1, 1), kv_msg("b", 2, 0, {"KV-Operation": "DEL"}, b""), kv_msg("b", 3, 0)]
    w = KeyWatcher("B", "$KV.B.", FakeMessages(msgs), 2, True)
    assert drain(w) == [("a", 1, 1, "PUT"), None, ("b", 3, 0, "PUT")]


def test_marker_once_the_first_consumer_delivered_the_initial_pending():
    # Writes keep coming (pending never 0): the count of the first consumer ends the initial values.
    msgs = [kv_msg("a", 1, 3), kv_msg("b", 2, 3), kv_msg("a", 3, 3)]
    w = KeyWatcher("B", "$KV.B.", FakeMessages(msgs), 2, False, "c")
    assert drain(w) == [("a", 1, 3, "PUT"), ("b", 2, 3, "PUT"), None, ("a", 3, 3, "PUT")]


def test_a_reset_consumer_count_does_not_end_the_initial_values():
    # After a reset deliveries restart by sequence and include superseded revisions.
    msgs = [kv_msg("a", 1, 3), kv_msg("b", 5, 3, consumer="c2", cseq=1), kv_msg("b", 6, 3, consumer="c2", cseq=2),
            kv_msg("c", 7, 0, consumer="c2", cseq=3)]  # fmt: skip
    w = KeyWatcher("B", "$KV.B.", FakeMessages(msgs), 2, False, "c")
    assert [e and e[1] for e in drain(w)] == [1, 5, 6, 7, None]


def test_no_marker_for_updates_only_and_entry_fields():
    w = KeyWatcher("B", "$KV.B.", FakeMessages([kv_msg("x.y", 9, 0, {"Nats-Marker-Reason": "MaxAge"}, b"")]), None, False)
    e = w.next(timeout=0)
    assert (e.bucket, e.key, e.value, e.revision, e.operation) == ("B", "x.y", b"", 9, KeyValueOp.PURGE)
    assert e.created == datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.timezone.utc)
    assert drain(w) == []


def test_stop_ends_iteration():
    ctx = FakeMessages([])
    with KeyWatcher("B", "$KV.B.", ctx, None, False) as w:
        w.stop()
        assert list(w) == [] and w.closed


@pytest.mark.parametrize(
    "api, put_pre",
    [("$JS.API", "$KV.B."), ("$JS.hub.API", "$KV.B."), ("fromA", "fromA.$KV.B."), ("x.y", "x.y.$KV.B.")],
)
def test_writes_go_through_an_imported_api_prefix_but_not_a_domain(api, put_pre):
    from types import SimpleNamespace

    from jetstream_sync.kv.bucket import KeyValue

    info = SimpleNamespace(config=SimpleNamespace(name="KV_B", allow_direct=True, mirror=None))
    kv = KeyValue(SimpleNamespace(api_prefix=api), info)
    assert (kv._pre, kv._put_pre) == ("$KV.B.", put_pre)
