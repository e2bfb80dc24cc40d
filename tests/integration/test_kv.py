"""Key-value buckets on a real server: the cases of nats.go's kv_test.go and
nats.py's KVTest / KVLimitMarkerTTLTest, in blocking form, plus a watch
under load across a server restart, watches that keep their timeout and end
their initial values while writes keep coming, purge_deletes and
compare-and-set racing other writers, and a bucket reached through another
account's imported API prefix."""

from __future__ import annotations

import datetime
import threading
import time
from collections import defaultdict

import pytest

import jetstream_sync as jss
from jetstream_sync.testing import NatsServer

from ..helpers import Bounded, loop_held, marker_then_updates, wait_blocked, wait_until

RECONNECT = dict(reconnect_time_wait=0.2, max_reconnect_attempts=-1)
PUT, DEL, PURGE = jss.KeyValueOp.PUT, jss.KeyValueOp.DEL, jss.KeyValueOp.PURGE


def expect(w, key, value, revision, op=PUT):
    e = w.next(timeout=5)
    assert e is not None, "got the initial-values marker, expected an entry"
    assert (e.key, e.value, e.revision, e.operation) == (key, value, revision, op)
    return e


def write_and_expect(kv, w, steps):
    """Each (key, value, revision): put (value None: delete) and see it in the watch."""
    for key, value, revision in steps:
        if value is None:
            kv.delete(key)
            expect(w, key, b"", revision, DEL)
        else:
            kv.put(key, value)
            expect(w, key, value, revision)


def expect_marker(w):
    assert w.next(timeout=5) is None


def expect_nothing(w, wait=0.3):
    with pytest.raises(jss.TimeoutError):
        w.next(timeout=wait)


# -- basics ------------------------------------------------------------------------


def test_basics(js):
    kv = js.create_key_value("TEST", history=5, ttl=3600, metadata={"foo": "bar"}, limit_marker_ttl=60)
    assert kv.bucket == "TEST" and kv.stream_name == "KV_TEST"
    assert kv.put("name", b"derek") == 1
    with pytest.raises(jss.InvalidKeyError):
        kv.put(".invalid", b"value")
    e = kv.get("name")
    assert (e.key, e.value, e.revision, e.operation, e.bucket) == ("name", b"derek", 1, PUT, "TEST")
    assert e.created.tzinfo is not None
    with pytest.raises(jss.InvalidKeyError):
        kv.get(".invalid")

    kv.delete("name")
    with pytest.raises(jss.KeyNotFoundError) as err:
        kv.get("name")
    assert isinstance(err.value, jss.KeyDeletedError)
    assert (err.value.entry.key, err.value.entry.revision, err.value.entry.value) == ("name", 2, b"")
    assert err.value.operation is DEL
    assert kv.create("name", b"derek") == 3
    with pytest.raises(jss.KeyWrongLastSequenceError):
        kv.delete("name", last=4)
    kv.delete("name", last=3)
    with pytest.raises(jss.InvalidKeyError):
        kv.delete(".invalid")

    r = kv.update("name", b"rip", last=4)
    with pytest.raises(jss.KeyWrongLastSequenceError):
        kv.update("name", b"ik", last=3)
    kv.update("name", b"ik", last=r)
    r = kv.create("age", b"22")
    kv.update("age", "33", last=r)  # a str value is UTF-8

    status = kv.status()
    assert (status.bucket, status.history, status.ttl, status.values) == ("TEST", 5, 3600.0, 7)
    assert status.backing_store == "JetStream"
    assert status.metadata["foo"] == "bar"
    assert status.limit_marker_ttl == status.marker_ttl == 60.0
    assert status.stream_info.config.name == "KV_TEST"
    assert kv.get("age").value == b"33"


def test_nats_py_simple(js):
    kv = js.create_key_value(bucket="TEST", history=5, ttl=3600)
    status = kv.status()
    assert (status.bucket, status.values, status.history, status.ttl) == ("TEST", 0, 5, 3600)
    assert kv.put("hello", b"world") == 1
    for i in range(100):
        kv.put(f"hello.{i}", b"Hello JS KV!")
    assert kv.status().values == 101
    kv.delete("hello.1")
    assert kv.status().values == 102
    with pytest.raises(jss.KeyNotFoundError) as err:
        kv.get("hello.1")
    assert (err.value.entry.key, err.value.entry.revision, err.value.entry.value, err.value.operation) == (
        "hello.1", 102, b"", "DEL")  # fmt: skip
    kv.purge("hello.5")
    with pytest.raises(jss.NotFoundError):  # nats-py's KeyNotFoundError is a NotFoundError too
        kv.get("hello.5")
    assert kv.status().values == 102  # the purge marker replaced the value
    with pytest.raises(jss.InvalidKeyError):
        kv.purge("hello.*")  # wildcards only in watch/keys filters

    kv = js.key_value("TEST")
    assert (kv.get("hello").value, kv.get("hello").revision) == (b"world", 1)
    for i in range(100, 200):
        kv.put(f"hello.{i}", b"Hello JS KV!")
    assert kv.status().values == 202
    e = kv.get("hello.102")
    assert (e.value, e.revision) == (b"Hello JS KV!", 106)


def test_not_a_bucket(js):
    with pytest.raises(jss.BucketNotFoundError) as err:
        js.key_value("TEST2")
    assert isinstance(err.value, jss.StreamNotFoundError)  # code written for streams still catches it
    js.create_stream(name="KV_TEST3", subjects=["foo"])
    with pytest.raises(jss.BadBucketError):
        js.key_value("TEST3")


@pytest.mark.parametrize("direct", [True, False])
def test_revisions_conditional_writes(js, direct):
    """nats.py's test_kv_basic / test_kv_direct: direct get and STREAM.MSG.GET alike."""
    js.create_key_value("TEST", history=5, ttl=3600, description="Basic KV")
    if not direct:  # an old bucket: no direct get
        cfg = js.stream_info("KV_TEST").config
        cfg.allow_direct = False
        js.update_stream(cfg)
    kv = js.key_value("TEST")
    cfg = js.stream_info("KV_TEST").config
    assert (cfg.description, cfg.subjects, cfg.allow_direct) == ("Basic KV", ["$KV.TEST.>"], direct)
    assert (cfg.allow_rollup_hdrs, cfg.deny_delete, cfg.deny_purge, cfg.discard) == (True, True, False, "new")
    assert (cfg.duplicate_window, cfg.max_age, cfg.max_bytes, cfg.max_msg_size) == (120.0, 3600.0, -1, -1)
    assert (cfg.max_msgs, cfg.max_msgs_per_subject, cfg.max_consumers, cfg.num_replicas) == (-1, 5, -1, 1)
    assert (cfg.storage, cfg.retention, cfg.mirror, cfg.sources) == ("file", "limits", None, None)

    with pytest.raises(jss.KeyNotFoundError):
        kv.get("name")
    assert kv.put("name", b"alice") == 1
    kv.delete("name")
    assert kv.create("name", b"bob") == 3
    with pytest.raises(jss.KeyWrongLastSequenceError):
        kv.delete("name", last=4)
    kv.delete("name", last=3)
    assert kv.update("name", b"hoge", last=4) == 5
    with pytest.raises(jss.KeyWrongLastSequenceError):
        kv.update("name", b"hoge", last=3)
    assert kv.update("name", b"fuga", last=5) == 6
    assert kv.create("age", b"2038") == 7
    assert kv.update("age", b"2039", last=7) == 8
    assert (kv.get("age").value, kv.get("age").revision) == (b"2039", 8)
    e = kv.get("age", revision=7)
    assert (e.value, e.revision) == (b"2038", 7)
    with pytest.raises(jss.KeyNotFoundError, match=r"it is of 'name'"):  # the key, not the internal subject
        kv.get("age", revision=6)  # revision 6 is of another key
    for rev in (5, 4):
        with pytest.raises(jss.KeyNotFoundError):
            kv.get("age", revision=rev)
    assert kv.get("name", revision=3).value == b"bob"
    with pytest.raises(jss.KeyExistsError, match="wrong last sequence: 8") as err:
        kv.create("age", b"1")
    assert err.value.err_code == 10071
    kv.delete("age", last=8)
    assert kv.create("age", b"final") == 10
    with pytest.raises(jss.KeyExistsError, match="wrong last sequence: 10"):
        kv.create("age", b"1")
    assert kv.get("age").revision == 10


def test_get_revision_of_a_deleted_key(js):
    kv = js.create_key_value("TEST", history=5)
    kv.put("key", b"value1")
    kv.put("key", b"value2")
    assert kv.get("key", revision=1).value == b"value1"
    kv.delete("key")
    with pytest.raises(jss.KeyNotFoundError):
        kv.get("key", revision=3)
    with pytest.raises(jss.KeyNotFoundError):
        kv.get("key", revision=99)


def test_update_and_delete_revision_mismatch(js):
    kv = js.create_key_value("TEST")
    rev = kv.create("key", b"1")
    for write in (lambda: kv.update("key", b"2", last=rev + 1), lambda: kv.delete("key", last=rev + 1),
                  lambda: kv.purge("key", last=rev + 1)):  # fmt: skip
        with pytest.raises(jss.KeyWrongLastSequenceError) as err:
            write()
        assert not isinstance(err.value, jss.KeyExistsError)
        assert isinstance(err.value, jss.APIError) and err.value.err_code == jss.ErrorCode.STREAM_WRONG_LAST_SEQUENCE
    kv.delete("key", last=rev)


def test_create_conflict(js):
    kv = js.create_key_value("TEST", description="Test KV", max_value_size=128, history=10, ttl=3600,
                             max_bytes=1024, storage="file")  # fmt: skip
    cfg = js.stream_info("KV_TEST").config
    assert (cfg.max_bytes, cfg.max_msg_size, cfg.max_msgs_per_subject, cfg.max_age) == (1024, 128, 10, 3600.0)
    rev = kv.create("key", b"1")
    with pytest.raises(jss.KeyExistsError) as err:
        kv.create("key", b"1")
    assert isinstance(err.value, jss.KeyWrongLastSequenceError) and err.value.code == 400
    assert err.value.description == f"key 'key' exists: wrong last sequence: {rev}"


# -- management ----------------------------------------------------------------------


def test_create_update_and_delete_buckets(js):
    with pytest.raises(jss.InvalidBucketNameError):
        js.create_key_value("TEST.", description="Test KV")
    with pytest.raises(jss.BucketNotFoundError):
        js.update_key_value("TEST", description="Test KV")
    js.create_key_value("TEST", description="Test KV")
    js.create_key_value("TEST", description="Test KV")  # the same config: idempotent
    with pytest.raises(jss.BucketExistsError) as err:
        js.create_key_value("TEST", description="New KV")
    assert err.value.err_code == jss.ErrorCode.STREAM_NAME_IN_USE
    js.update_key_value("TEST", description="New KV")
    assert js.key_value("TEST").status().stream_info.config.description == "New KV"
    js.create_or_update_key_value(jss.KeyValueConfig(bucket="OTHER", description="x"))
    js.create_or_update_key_value("OTHER", description="y")
    assert js.stream_info("KV_OTHER").config.description == "y"
    with pytest.raises(jss.InvalidOptionError):
        js.create_key_value("NEW", history=200)

    js.delete_key_value("TEST")
    with pytest.raises(jss.BucketNotFoundError) as err:
        js.delete_key_value("TEST")
    assert isinstance(err.value, jss.StreamNotFoundError)
    with pytest.raises(jss.BucketNotFoundError):
        js.key_value("TEST")


def test_list_buckets(js):
    js.create_stream(name="KV_FOO", subjects=["FOO.*"])  # the prefix, not the subjects
    js.create_stream(name="FOO", subjects=["$KV.ABC.>"])  # the subjects, not the prefix
    for i in range(5):
        js.create_key_value(f"KVS_{i}", max_bytes=1024)
    assert sorted(js.key_value_names()) == [f"KVS_{i}" for i in range(5)]
    statuses = js.key_value_buckets()
    assert sorted(s.bucket for s in statuses) == [f"KVS_{i}" for i in range(5)]
    assert all(s.config.max_bytes == 1024 for s in statuses)


def test_duplicate_window_follows_ttl(js):
    # a bucket of its own each: a stream made again under the name just deleted can meet
    # "error creating store" (10049) while a loaded server still removes the old store
    for n, (ttl, window) in enumerate(((None, 120.0), (3600, 120.0), (5, 5.0))):
        js.create_key_value(f"TEST{n}", history=5, ttl=ttl)
        assert js.stream_info(f"KV_TEST{n}").config.duplicate_window == window


def test_repairs_a_bucket_of_an_older_client(js):
    js.create_key_value("A")
    cfg = js.stream_info("KV_A").config
    cfg.discard, cfg.allow_direct = "old", False
    js.update_stream(cfg)
    js.create_key_value("A")
    cfg = js.stream_info("KV_A").config
    assert (cfg.discard, cfg.allow_direct) == ("new", True)
    with pytest.raises(jss.BucketExistsError):
        js.create_key_value("A", description="New KV")


def test_compression_and_config_round_trip(js):
    assert js.create_key_value("A", compression=True).status().is_compressed
    assert js.stream_info("KV_A").config.compression == "s2"
    original = jss.KeyValueConfig(bucket="CONFIG_TEST", description="config", max_value_size=1024, history=10,
                                  ttl=7200, max_bytes=1024 * 1024, storage="file", replicas=1,
                                  metadata={"key": "value"})  # fmt: skip
    kv = js.create_key_value(original)
    status = kv.status()
    assert status.bytes == 0 and not status.is_compressed
    got = status.config
    for name in ("bucket", "description", "max_value_size", "history", "ttl", "max_bytes", "replicas", "limit_marker_ttl"):
        assert getattr(got, name) == getattr(original, name), name
    assert got.storage == "file" and got.metadata["key"] == "value"
    kv.put("key", b"value")
    assert kv.status().bytes > 0
    js.update_key_value(got)  # what status() reports is a valid config


def test_republish(js, nc):
    js.create_key_value("TEST_UPDATE")
    with pytest.raises(jss.BucketExistsError):  # republish cannot be added by create
        js.create_key_value("TEST_UPDATE", republish=jss.models.RePublish(src=">", dest="bar.>"))
    kv = js.create_key_value("TEST", republish={"src": ">", "dest": "bar.>"})
    assert js.stream_info("KV_TEST").config.republish.dest == "bar.>"
    sub = nc.subscribe("bar.>")
    nc.flush()
    kv.put("foo", b"value")
    msg = sub.next_msg(timeout=5)
    assert msg.data == b"value" and msg.headers["Nats-Subject"] == "$KV.TEST.foo"
    assert "Nats-Msg-Size" not in msg.headers

    kv = js.create_key_value("HDRS", republish=jss.models.RePublish(src=">", dest="quux.>", headers_only=True))
    sub = nc.subscribe("quux.>")
    nc.flush()
    kv.put("hello.world", b"Hello World!")
    msg = sub.next_msg(timeout=5)
    assert msg.data == b""
    assert (msg.headers["Nats-Sequence"], msg.headers["Nats-Msg-Size"], msg.headers["Nats-Stream"]) == (
        "1", "12", "KV_HDRS")  # fmt: skip


# -- watch -----------------------------------------------------------------------------


def test_watch_default(js):
    kv = js.create_key_value("WATCH")
    with kv.watch_all() as w:
        expect_marker(w)  # no values: the marker comes at once
        kv.create("name", b"derek")
        assert expect(w, "name", b"derek", 1).delta == 0
        write_and_expect(kv, w, [("name", b"rip", 2), ("name", b"ik", 3), ("age", b"22", 4), ("age", b"33", 5),
                                 ("age", None, 6)])  # fmt: skip
        expect_nothing(w)

    for key, value in (("t.name", b"rip"), ("t.name", b"ik"), ("t.age", b"22"), ("t.age", b"44")):
        kv.put(key, value)
    with kv.watch("t.*") as w:  # only the latest value of each matching key
        assert expect(w, "t.name", b"ik", 8).delta == 1
        assert expect(w, "t.age", b"44", 10).delta == 0
        expect_marker(w)
        expect_nothing(w)
        kv.put("t.hello", b"hello world")
        expect(w, "t.hello", b"hello world", 11)

    with kv.watch(["t.name", "name"]) as w:  # several filters
        expect(w, "name", b"ik", 3)
        expect(w, "t.name", b"ik", 8)
        expect_marker(w)
        kv.purge("name")
        expect(w, "name", b"", 12, PURGE)


def test_initial_entries_purged_before_they_came_still_end_with_the_marker(js):
    """A watch counts its initial entries when it starts; entries removed
    after the first pull and before the next (another client's purge or
    purge_deletes) never come. The marker must come anyway, and keys(),
    history() and purge_deletes(), which wait for it, must not time out."""
    kv = js.create_key_value("PURGED")
    for i in range(1500):
        kv.put(f"k{i:04d}", b"v")
    stream = kv.stream_name
    w = kv.watch_all()
    try:
        entries = [w.next(timeout=10)]  # the first pull: what it got is buffered, the rest is still on the server
        (watch_consumer,) = js.consumers(stream)
        info = wait_until(lambda: _settled(js, stream, watch_consumer.name), timeout=10)
        delivered = info.delivered.stream_seq
        assert 0 < delivered < 1500, "the watch pulled everything at once: nothing left to purge under it"
        for i in range(delivered, 1500):  # key k<i> is revision i + 1
            js.purge_stream(stream, subject=f"$KV.PURGED.k{i:04d}")
        start = time.monotonic()
        while (entry := w.next(timeout=10)) is not None:
            entries.append(entry)
        assert [e.revision for e in entries] == list(range(1, delivered + 1))
        assert time.monotonic() - start < 5
    finally:
        w.stop()


def test_a_watch_gets_its_initial_value_when_later_writes_removed_it_before_the_first_read(js):
    """The watch asks for its initial values as it starts: by the first read,
    writes past the history limit may have removed them, and a
    last-per-subject consumer whose first message is gone delivers nothing
    (nats-server 2.15)."""
    kv = js.create_key_value("SUPERSEDED", history=5)
    kv.put("k", b"first")
    kv.put("other", b"x")
    with kv.watch("k") as w:
        for i in range(5):  # the initial value's message leaves the history
            kv.put("k", b"%d" % i)
            kv.put("other", b"x")
        assert w.next(timeout=5).value == b"first"
        assert w.next(timeout=5) is None
        assert [w.next(timeout=5).value for _ in range(5)] == [b"0", b"1", b"2", b"3", b"4"]


def _settled(js, stream, name):
    """The consumer's info once its deliveries stopped: the pull is filled (no
    request waits on the server: a pause in a loaded server's deliveries does
    not count) and nothing more came in 0.2 s (no new pull meanwhile)."""
    first = js.consumer_info(stream, name)
    time.sleep(0.2)  # two looks 0.2 s apart: no new pull came in between
    second = js.consumer_info(stream, name)
    same = second.delivered.stream_seq == first.delivered.stream_seq
    return second if same and second.delivered.stream_seq and second.num_waiting == 0 else None


def test_watch_nats_py_wildcard_deltas(js):
    kv = js.create_key_value("WATCH")
    kv.create("new", b"hello world")
    for key, value in (("t.name", b"a"), ("t.name", b"b"), ("t.age", b"c"), ("t.age", b"d"), ("t.a", b"a"), ("t.b", b"b")):
        kv.put(key, value)
    with kv.watch("t.*") as w:
        got = [w.next(timeout=5) for _ in range(4)]
        assert [(e.key, e.revision, e.delta) for e in got] == [("t.name", 3, 3), ("t.age", 5, 2), ("t.a", 6, 1), ("t.b", 7, 0)]
        expect_marker(w)


def test_watch_with_history(js):
    kv = js.create_key_value("WATCH", history=64)
    kv.create("name", b"derek")
    kv.put("name", b"rip")
    kv.put("name", b"ik")
    kv.put("age", b"22")
    kv.put("age", b"33")
    kv.delete("age")
    with pytest.raises(jss.InvalidOptionError):
        kv.watch_all(include_history=True, updates_only=True)
    with kv.watch_all(include_history=True) as w:
        for key, value, rev in (("name", b"derek", 1), ("name", b"rip", 2), ("name", b"ik", 3), ("age", b"22", 4), ("age", b"33", 5)):
            expect(w, key, value, rev)
        expect(w, "age", b"", 6, DEL)
        expect_marker(w)
        kv.put("name", b"pp")
        expect(w, "name", b"pp", 7)


def test_watch_updates_only(js):
    kv = js.create_key_value("WATCH", history=64)
    kv.create("name", b"derek")
    kv.put("name", b"rip")
    kv.put("age", b"22")
    with kv.watch_all(updates_only=True) as w:
        expect_nothing(w)  # no current values and no marker
        write_and_expect(kv, w, [("name", b"pp", 4), ("age", b"44", 5), ("age", None, 6)])


def test_watch_resume_from_revision(js):
    kv = js.create_key_value("WATCH")
    kv.create("name", b"derek")
    kv.put("name", b"rip")
    kv.put("age", b"22")
    with kv.watch_all(resume_from_revision=2) as w:
        expect(w, "name", b"rip", 2)
        expect(w, "age", b"22", 3)
        expect_marker(w)


def test_watch_options(js):
    kv = js.create_key_value("WATCH", history=5)
    kv.put("a", b"1")
    kv.put("b", b"2")
    kv.delete("a")
    with kv.watch_all(ignore_deletes=True, meta_only=True) as w:
        e = w.next(timeout=5)
        assert (e.key, e.value, e.revision) == ("b", b"", 2)  # meta only: no value
        expect_marker(w)  # the delete of "a" was last: skipped, the marker follows
    for bad in ("", "a.>.b", "foo.", "foo..bar", "a..b.c", [], ["ok", "bad."]):
        with pytest.raises(jss.InvalidKeyError):
            kv.watch(bad)


def test_watch_stop_ends_every_blocked_reader(js):
    kv = js.create_key_value("WATCH")
    w = kv.watch_all()
    expect_marker(w)
    readers = [Bounded(lambda: list(w), name=f"reader-{i}") for i in range(3)]
    for r in readers:
        wait_blocked(r.thread)
    Bounded(w.stop).join(10)
    for r in readers:
        assert r.join(10).finished and r.error is None and r.result == []
    assert w.closed
    with pytest.raises(jss.ConsumerStoppedError):
        w.next(timeout=1)
    w.stop()  # idempotent


def test_watch_shared_by_threads_hands_each_entry_once(js):
    # history 64 keeps every revision (300 puts over 7 keys): with history 1 a
    # watch that lags under load rightly skips revisions already superseded.
    kv = js.create_key_value("WATCH", history=64)
    n = 300
    seen = []
    lock = threading.Lock()
    with kv.watch_all(updates_only=True) as w:

        def read():
            for e in w:
                with lock:
                    seen.append(e.revision)

        readers = [threading.Thread(target=read, daemon=True) for _ in range(3)]
        for t in readers:
            t.start()
        for i in range(n):
            kv.put(f"k{i % 7}", b"v")
        try:
            wait_until(lambda: len(seen) >= n, timeout=20)
        except AssertionError:
            missing = sorted(set(range(1, n + 1)) - set(seen))
            raise AssertionError(f"{len(seen)} of {n} seen; missing {missing[:20]}") from None
    for t in readers:
        t.join(10)
    assert sorted(seen) == list(range(1, n + 1))


def test_watch_ignoring_deletes_keeps_its_timeout_under_a_stream_of_deletes(js):
    # Each skipped delete used to restart the wait: next(timeout=0.5) never returned.
    kv = js.create_key_value("SKIP")
    stop = threading.Event()
    deleted = []

    def delete_forever():
        while not stop.is_set():
            kv.delete(f"k{len(deleted) % 10}")
            deleted.append(1)

    writer = Bounded(delete_forever, name="deleter")
    try:
        with kv.watch_all(ignore_deletes=True, updates_only=True) as w:
            wait_until(lambda: len(deleted) > 10, timeout=10)
            call = Bounded(lambda: w.next(timeout=0.5), name="next").join(10)
            assert call.finished, "next(timeout=0.5) did not return while deletes kept coming"
            assert isinstance(call.error, jss.TimeoutError)
            assert call.elapsed < 3.0
    finally:
        stop.set()
        assert writer.join(10).finished


def test_the_watch_marker_comes_after_the_initial_values_even_when_writes_keep_coming(js):
    # The marker waited for a delivery with nothing pending, which a bucket
    # written faster than the watch reads never gives: it came only after
    # every later write too (or never). nats.go ends the initial values once
    # the consumer's initial pending has been delivered.
    kv = js.create_key_value("BUSY")
    marker_then_updates(js, lambda i: f"$KV.BUSY.k{i}", lambda i: b"v", kv.watch_all, kv.keys)


# -- history, keys, delete/purge -----------------------------------------------------


def test_history(js):
    kv = js.create_key_value("LIST", history=10)
    for i in range(50):
        kv.put("age", str(i + 22))
    entries = kv.history("age")
    assert [e.revision for e in entries] == list(range(41, 51))
    assert [int(e.value) for e in entries] == list(range(62, 72))
    assert {e.key for e in entries} == {"age"}
    with pytest.raises(jss.KeyNotFoundError):
        kv.history("nothing")


def test_keys(js):
    kv = js.create_key_value("KVS", history=2)
    assert kv.keys() == []
    for key, value in (("name", "derek"), ("age", "22"), ("country", "US"), ("name", "ivan"), ("age", "33"),
                       ("country", "US"), ("name", "rip"), ("age", "44"), ("country", "MT")):  # fmt: skip
        kv.put(key, value)
    assert kv.keys() == ["age", "country", "name"]
    kv.delete("name")
    kv.purge("country")
    assert kv.keys() == ["age"]
    kv.purge("age")
    assert kv.keys() == []
    kv.create("c", b"3")
    assert kv.keys() == ["c"]


def test_keys_with_filters(js):
    kv = js.create_key_value("KVS", history=2)
    for key in ("apple", "banana", "carrot", "greeting", "hello", "fruit.kiwi", "fruit.fig"):
        kv.put(key, b"x")
    assert kv.keys(filters=["apple"]) == ["apple"]
    assert kv.keys(["hello", "greeting"]) == ["greeting", "hello"]
    assert kv.keys("fruit.*") == ["fruit.fig", "fruit.kiwi"]
    kv.delete("apple")
    assert kv.keys(["apple"]) == []
    with pytest.raises(jss.InvalidKeyError):
        kv.keys(["gr*"])


def test_keys_are_unique_under_concurrent_updates(js):
    kv = js.create_key_value("TEST_KV", history=5)
    for i in range(10):
        kv.put(f"key_{i}", b"initial")
    stop = threading.Event()

    def update():
        while not stop.is_set():
            for i in range(5):
                kv.put(f"key_{i}", b"updated")

    t = threading.Thread(target=update, daemon=True)
    t.start()
    try:
        for _ in range(10):
            keys = kv.keys()
            # A key rewritten during the listing may be skipped: the server passes
            # over superseded values, and the new one may come after the marker.
            assert len(keys) == len(set(keys))
            assert set(keys) >= {f"key_{i}" for i in range(5, 10)}
            assert set(keys) <= {f"key_{i}" for i in range(10)}
    finally:
        stop.set()
        t.join(10)


def test_delete_versus_purge(js):
    kv = js.create_key_value("KVS", history=10)
    for key, value in (("name", "derek"), ("age", "22"), ("name", "ivan"), ("age", "33"), ("name", "rip"), ("age", "44")):
        kv.put(key, value)
    kv.delete("age")
    assert len(kv.history("age")) == 4  # three values and the marker
    with pytest.raises(jss.KeyWrongLastSequenceError):
        kv.purge("name", last=4)
    kv.purge("name", last=5)
    with pytest.raises(jss.KeyNotFoundError):
        kv.get("name")
    entries = kv.history("name")
    assert [e.operation for e in entries] == [PURGE]


def test_purge_deletes_removes_tombstones(js):
    kv = js.create_key_value("KVS", history=10)
    for i in range(1, 101):
        kv.put(f"key-{i}", "ABC" * 33)
    for i in range(1, 101):
        kv.delete(f"key-{i}")
    kv.put("key-last", b"101")
    assert kv.purge_deletes(older_than=-1) == 100
    assert js.stream_info("KV_KVS").state.messages == 1
    assert kv.purge_deletes() == 0


def test_purge_deletes_keeps_young_markers(js):
    kv = js.create_key_value("KVS2", history=10)
    kv.put("foo", b"a")
    kv.put("bar", b"a")
    kv.put("bar", b"b")
    kv.put("foo", b"b")
    kv.delete("foo")
    old = kv.history("foo")[-1].created
    # The marker of foo must be older than the threshold before bar's is placed.
    wait_until(lambda: datetime.datetime.now(datetime.timezone.utc) - old > datetime.timedelta(seconds=0.3), timeout=5)
    kv.delete("bar")
    assert js.stream_info("KV_KVS2").state.messages == 6
    kv.purge_deletes(older_than=0.3)
    assert js.stream_info("KV_KVS2").state.messages == 1
    with pytest.raises(jss.KeyNotFoundError):
        kv.history("foo")
    [entry] = kv.history("bar")
    assert (entry.key, entry.revision, entry.operation) == ("bar", 6, DEL)


@pytest.mark.parametrize("older_than", [0, 3600])
def test_purge_deletes_never_removes_a_value_put_after_the_marker(js, monkeypatch, older_than):
    # purge_deletes purged each marked key whole (or kept its last message):
    # a value put after the listing and before the purge was removed with
    # it, or was kept while the marker was purged, silently.
    kv = js.create_key_value("SWEEP", history=5)
    kv.put("k", b"old")
    kv.delete("k")
    purge_stream = js._api.purge_stream  # what the bucket calls
    armed = [True]

    def put_first(*args, **kwargs):
        if armed[0]:
            armed[0] = False
            kv.put("k", b"new")
        return purge_stream(*args, **kwargs)

    monkeypatch.setattr(js._api, "purge_stream", put_first)
    assert kv.purge_deletes(older_than=older_than) == 1
    monkeypatch.undo()
    assert kv.get("k").value == b"new"
    ops = [e.operation for e in kv.history("k")]
    assert ops == ([jss.KeyValueOp.PUT] if older_than == 0 else [jss.KeyValueOp.DEL, jss.KeyValueOp.PUT])


# -- TTLs and limit markers (ADR-48) ---------------------------------------------------


def test_limit_marker_ttl_in_config_and_status(js):
    kv = js.create_key_value("TEST_MARKER", limit_marker_ttl=60.0)
    cfg = js.stream_info("KV_TEST_MARKER").config
    assert (cfg.subject_delete_marker_ttl, cfg.allow_msg_ttl) == (60.0, True)
    assert kv.status().limit_marker_ttl == 60.0
    assert js.create_key_value("TEST_NO_MARKER").status().limit_marker_ttl is None


def test_bucket_ttl_marker_reaches_an_updates_watch(js):
    kv = js.create_key_value("TEST", history=5, ttl=0.1, limit_marker_ttl=1)
    kv.put("name", b"pp")
    with kv.watch_all(updates_only=True) as w:
        e = w.next(timeout=10)  # the server's MaxAge marker
        assert (e.key, e.operation) == ("name", PURGE)
    with pytest.raises(jss.KeyNotFoundError):
        kv.get("name")


def test_create_with_ttl(js):
    kv = js.create_key_value("KVS", limit_marker_ttl=1)
    with kv.watch_all(updates_only=True) as w:
        assert kv.create("age", b"22", ttl=1) == 1
        assert kv.get("age").value == b"22"
        expect(w, "age", b"22", 1)
        e = w.next(timeout=10)  # the value expired: the server's marker
        assert (e.key, e.operation) == ("age", PURGE)
    with pytest.raises(jss.KeyNotFoundError):
        kv.get("age")
    marker = js.get_msg("KV_KVS", last_by_subject="$KV.KVS.age")
    assert (marker.headers["Nats-Marker-Reason"], marker.headers["Nats-TTL"]) == ("MaxAge", "1s")
    # The marker expires in turn.
    wait_until(lambda: _gone(js, "KV_KVS", "$KV.KVS.age"), timeout=10, interval=0.1)


def test_purge_with_ttl(js):
    kv = js.create_key_value("KVS", history=10, limit_marker_ttl=1)
    kv.put("name", b"alice")
    with kv.watch_all(updates_only=True) as w:
        kv.purge("name", ttl=1.5)
        expect(w, "name", b"", 2, PURGE)
    with pytest.raises(jss.KeyNotFoundError):
        kv.get("name")
    marker = js.get_msg("KV_KVS", last_by_subject="$KV.KVS.name")
    assert marker.headers["Nats-TTL"] == "1500ms" and marker.headers["KV-Operation"] == "PURGE"
    wait_until(lambda: _gone(js, "KV_KVS", "$KV.KVS.name"), timeout=10, interval=0.1)
    assert kv.status().values == 0


def _gone(js, stream, subject):
    try:
        js.get_msg(stream, last_by_subject=subject)
    except jss.MsgNotFoundError:
        return True
    return False


def test_a_handle_made_before_per_key_ttls_were_turned_on_can_use_them(js):
    # The handle refused create(ttl=)/purge(ttl=) from its copy of the config,
    # telling the user to call update_key_value, which they had done.
    kv = js.create_key_value("LATETTL", history=2)
    js.update_key_value("LATETTL", history=2, limit_marker_ttl=2)
    assert kv.create("k", b"v", ttl=5) == 1
    kv.purge("k", ttl=5)
    assert kv.history("k")[-1].operation is jss.KeyValueOp.PURGE


# -- validation: nothing is sent for bad input ---------------------------------------------


BAD_BUCKET_OPTIONS = [
    ({"bucket": ""}, jss.InvalidBucketNameError),
    ({"bucket": "a.b"}, jss.InvalidBucketNameError),
    ({"bucket": "x!"}, jss.InvalidBucketNameError),
    ({"bucket": " x y"}, jss.InvalidBucketNameError),
    ({"bucket": "*"}, jss.InvalidBucketNameError),
    ({"bucket": ">"}, jss.InvalidBucketNameError),
    ({"bucket": 5}, jss.InvalidBucketNameError),
    ({"bucket": "B" * 253}, jss.InvalidBucketNameError),
    ({"history": 0}, jss.InvalidOptionError),
    ({"history": 65}, jss.InvalidOptionError),
    ({"history": "5"}, jss.InvalidOptionError),
    ({"history": True}, jss.InvalidOptionError),
    ({"ttl": -1}, jss.InvalidOptionError),
    ({"ttl": 0}, jss.InvalidOptionError),
    ({"ttl": "1h"}, jss.InvalidOptionError),
    ({"ttl": float("inf")}, jss.InvalidOptionError),
    ({"max_value_size": 0}, jss.InvalidOptionError),
    ({"max_value_size": 1.5}, jss.InvalidOptionError),
    ({"max_bytes": -2}, jss.InvalidOptionError),
    ({"replicas": 0}, jss.InvalidOptionError),
    ({"replicas": 6}, jss.InvalidOptionError),
    ({"storage": "disk"}, jss.InvalidOptionError),
    ({"description": 5}, jss.InvalidOptionError),
    ({"republish": "bar.>"}, jss.InvalidOptionError),
    ({"placement": 3}, jss.InvalidOptionError),
    ({"compression": "s2"}, jss.InvalidOptionError),
    ({"limit_marker_ttl": 0.5}, jss.InvalidOptionError),
    ({"limit_marker_ttl": -1}, jss.InvalidOptionError),
    ({"metadata": {"a": 1}}, jss.InvalidOptionError),
    ({"metadata": "a=b"}, jss.InvalidOptionError),
    ({"no_such_option": 1}, jss.InvalidOptionError),
]


@pytest.mark.parametrize("fields, error", BAD_BUCKET_OPTIONS, ids=[repr(f) for f, _ in BAD_BUCKET_OPTIONS])
def test_bad_bucket_options_are_refused_before_sending(js, nc, fields, error):
    fields = {"bucket": "OK", **fields}
    spy = nc.subscribe("$JS.API.>")
    nc.flush()
    for make in (js.create_key_value, js.update_key_value, js.create_or_update_key_value):
        with pytest.raises(error):
            make(**fields)
    if "bucket" in fields and fields["bucket"] != "OK":
        for call in (js.key_value, js.delete_key_value):
            with pytest.raises(jss.InvalidBucketNameError):
                call(fields["bucket"])
    with pytest.raises(jss.TimeoutError):
        spy.next_msg(timeout=0.2)  # no API request went out
    assert js.key_value_names() == []


BAD_KEYS = [" x y", "x ", "x!", "xx$", "*", ">", "x.>", "x.*", ".", ".x", ".x.", "x.", "a..b", "", None, 5]


def test_bad_keys_and_arguments_are_refused_before_sending(js, nc):
    kv = js.create_key_value("TEST", history=5)
    spy = nc.subscribe("$KV.TEST.>")
    api = nc.subscribe("$JS.API.>")
    nc.flush()
    for key in BAD_KEYS:
        for call in (lambda: kv.put(key, b""), lambda: kv.get(key), lambda: kv.create(key, b""),
                     lambda: kv.update(key, b"", last=1), lambda: kv.delete(key), lambda: kv.purge(key),
                     lambda: kv.history(key)):  # fmt: skip
            with pytest.raises(jss.InvalidKeyError):
                call()
    bad_calls = [
        lambda: kv.update("k", b"", last=-1),
        lambda: kv.update("k", b"", last="1"),
        lambda: kv.update("k", b"", last=None),
        lambda: kv.delete("k", last=-1),
        lambda: kv.purge("k", last=1.5),
        lambda: kv.purge("k", ttl=0.5),
        lambda: kv.purge("k", ttl="1h"),
        lambda: kv.create("k", b"", ttl=0),
        lambda: kv.get("k", revision=0),
        lambda: kv.get("k", revision="1"),
        lambda: kv.purge_deletes(older_than="1h"),
        lambda: kv.watch("k", include_history=True, updates_only=True),
        lambda: kv.watch("k", updates_only=True, resume_from_revision=3),
        lambda: kv.watch("k", resume_from_revision=0),
        lambda: kv.watch("k", meta_only="yes"),
        lambda: kv.watch(5),
        lambda: kv.keys(["ok", "x."]),
    ]
    for call in bad_calls:
        with pytest.raises(jss.InvalidOptionError):
            call()
    for sub in (spy, api):
        with pytest.raises(jss.TimeoutError):
            sub.next_msg(timeout=0.2)
    assert kv.status().values == 0


def test_values_over_max_value_size_and_overlong_keys_are_refused_before_sending(js, nc):
    # A value over max_value_size went out and came back as a server error
    # (10054); a key too long to write went to the server from get/history.
    kv = js.create_key_value("SIZED", max_value_size=100, history=5)
    spy = nc.subscribe("$KV.SIZED.>")
    api = nc.subscribe("$JS.API.>")
    nc.flush()
    for call in (lambda: kv.put("k", b"x" * 101), lambda: kv.put("k", "é" * 51),
                 lambda: kv.create("k", bytearray(101)), lambda: kv.update("k", memoryview(b"x" * 101), 0)):  # fmt: skip
        with pytest.raises(jss.InvalidOptionError, match="max_value_size"):
            call()
    long_key = "k" * 5000
    for call in (lambda: kv.put(long_key, b""), lambda: kv.get(long_key), lambda: kv.history(long_key),
                 lambda: kv.delete(long_key)):  # fmt: skip
        with pytest.raises(jss.InvalidKeyError, match="too long"):
            call()
    for call in (lambda: kv.put("k", "a\ud800"), lambda: js.publish("$KV.SIZED.k", "a\ud800")):  # a lone surrogate
        with pytest.raises(jss.InvalidOptionError, match="not valid UTF-8 text"):
            call()
    with pytest.raises(jss.TimeoutError):
        spy.next_msg(timeout=0.2)  # nothing was published
    # The refusal asked the server for the limit (it may have grown) but sent no value.
    assert all(m.subject.startswith("$JS.API.STREAM.INFO.") for m in _drain(api))
    assert kv.put("k", b"x" * 100) == 1  # the limit itself is fine
    # A handle made before the limit grew does not refuse what the bucket now takes.
    js.update_key_value("SIZED", max_value_size=1000, history=5)
    assert kv.put("k", b"x" * 500) == 2


def _drain(sub):
    out = []
    while True:
        try:
            out.append(sub.next_msg(timeout=0.2))
        except jss.TimeoutError:
            return out


# -- a watch under load, across a server restart ------------------------------------------


def test_watch_sees_every_revision_through_a_restart(private_server):
    """10,000 puts from 4 threads over 50 keys, the server restarted midway:
    the watch started before them sees every stored revision once, in order."""
    total, keys, writers = 10_000, 50, 4
    nc = jss.connect(private_server.url, **RECONNECT)
    try:
        js = nc.jetstream(timeout=2.0)
        kv = js.create_key_value("LOAD", history=64, storage="file")
        w = kv.watch_all()
        expect_marker(w)
        left = iter(range(total))
        take_lock = threading.Lock()
        failures = []

        def put_loop():
            while True:
                with take_lock:
                    i = next(left, None)
                if i is None:
                    return
                deadline = time.monotonic() + 60
                while True:  # retried through the restart (a retry may store the value twice)
                    try:
                        kv.put(f"k{i % keys}", str(i))
                        break
                    except (jss.TimeoutError, jss.NoRespondersError, jss.ConnectionClosedError) as exc:
                        if time.monotonic() > deadline:
                            failures.append(exc)
                            return

        threads = [threading.Thread(target=put_loop, daemon=True) for _ in range(writers)]
        for t in threads:
            t.start()
        seen = defaultdict(list)
        revisions = []

        def record(e):
            assert e is not None, "a second initial-values marker"
            seen[e.key].append(e.revision)
            revisions.append(e.revision)

        restarted = False
        while any(t.is_alive() for t in threads):
            try:
                record(w.next(timeout=1))
            except jss.TimeoutError:
                continue
            if not restarted and len(revisions) >= total // 2:
                private_server.restart()
                restarted = True
        last = _last_seq(js)
        while len(revisions) < last:
            record(w.next(timeout=30))
        w.stop()
        assert not failures
        assert restarted
        assert last >= total
        assert revisions == list(range(1, last + 1))  # every revision once, in order
        for key, revs in seen.items():
            assert revs == sorted(set(revs)), key
        assert kv.status().values == keys * 64
    finally:
        nc.close()


def _last_seq(js):
    for _ in range(30):  # asked while the server may be restarting
        try:
            return js.stream_info("KV_LOAD").state.last_seq
        except (jss.TimeoutError, jss.NoRespondersError):
            continue
    raise AssertionError("stream info unavailable")


def test_create_losers_always_get_key_exists_on_a_released_lock(js):
    """A released lock (a delete marker) is re-created by one thread; every
    other one gets KeyExistsError, never the bare wrong-last-sequence error."""
    kv = js.create_key_value("LOCKS")
    errs, wins = [], []
    for _ in range(5):
        kv.delete("job")  # released
        barrier = threading.Barrier(6)

        def grab():
            barrier.wait(5)
            try:
                wins.append(kv.create("job", b"me"))
            except jss.KeyWrongLastSequenceError as exc:
                errs.append(exc)

        threads = [threading.Thread(target=grab) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert len(wins) == 5
    assert errs and all(isinstance(e, jss.KeyExistsError) for e in errs), {type(e).__name__ for e in errs}


def test_a_deleted_bucket_says_so_everywhere(js):
    """Also a watch whose first pull the server dropped without a status (the
    stream deleted as the pull arrived): its stall check finds the stream
    gone, long before a missed-heartbeat alarm (30 s) would. Several rounds:
    the deletion has to meet the pull."""
    for _ in range(5):
        kv = js.create_key_value("GONE")
        kv.put("a", b"1")
        watcher = kv.watch_all()
        js.delete_key_value("GONE")
        for call in (lambda: kv.get("a"), lambda: kv.put("a", b"2"), kv.keys, kv.status, lambda: kv.watch("a")):
            with pytest.raises(jss.BucketNotFoundError):
                call()
        deadline = time.monotonic() + 10
        with pytest.raises(jss.BucketNotFoundError):
            while True:
                watcher.next(timeout=max(deadline - time.monotonic(), 0.0))


def test_a_watch_of_a_bucket_made_again_says_the_bucket_was_deleted(server, js):
    """Not the old revisions' end with nothing after: the new bucket's first
    revisions would be skipped, since its sequences start over."""
    kv = js.create_key_value("AGAIN")
    for i in range(5):
        kv.put("a", str(i).encode())
    watcher_client = jss.connect(server.url)
    try:
        with watcher_client.jetstream().key_value("AGAIN").watch_all() as watcher:
            assert [e and e.value for e in (watcher.next(timeout=10), watcher.next(timeout=10))] == [b"4", None]
            with loop_held(watcher_client):  # the delete is seen once the new bucket exists
                js.delete_key_value("AGAIN")
                js.create_key_value("AGAIN").put("a", b"new")
            with pytest.raises(jss.BucketNotFoundError, match="deleted"):
                watcher.next(timeout=20)
    finally:
        watcher_client.close()


def test_key_filters_that_overlap(js):
    kv = js.create_key_value("FILT")
    for k in ("a.b", "a.c", "x"):
        kv.put(k, b"v")
    assert kv.keys(["x", "x"]) == ["x"]
    assert kv.keys(["a.>", "a.b"]) == ["a.b", "a.c"]
    assert kv.keys([]) == []
    with pytest.raises(jss.InvalidKeyError, match="overlap"):
        kv.keys(["*.b", "a.*"])


def test_ttl_on_a_bucket_without_marker_ttl_is_refused_first(js):
    kv = js.create_key_value("NOTTL")
    spy = js.client.subscribe("$KV.NOTTL.>")
    for call in (lambda: kv.create("k", b"v", ttl=5), lambda: kv.purge("k", ttl=5)):
        with pytest.raises(jss.InvalidOptionError, match="limit_marker_ttl"):
            call()
    with pytest.raises(jss.TimeoutError):
        spy.next_msg(timeout=0.2)
    spy.unsubscribe()


def test_eight_threads_updating_from_one_revision_exactly_one_wins(js):
    # A compare-and-set must never let two writers through.
    kv = js.create_key_value("CAS", history=10)
    for round_ in range(10):
        rev = kv.put("k", b"base")
        start = threading.Barrier(8)

        def update(i, rev=rev):
            start.wait(10)
            try:
                return kv.update("k", str(i), rev)
            except jss.KeyWrongLastSequenceError:
                return None

        runs = [Bounded(lambda i=i: update(i), name="update") for i in range(8)]
        results = [r.join(20).result for r in runs]
        winners = [r for r in results if r is not None]
        assert len(winners) == 1, (round_, results)
        assert kv.get("k").revision == winners[0] == rev + 1


# -- a bucket through an imported API prefix (another account) -----------------------------


# As nats.go's TestKeyValueCrossAccounts, except that the API export streams
# its responses: a watch here pulls, and a pull answers with many messages.
CROSS_ACCOUNT_CONF = """
accounts: {
   A: {
       users: [ {user: a, password: a} ]
       jetstream: enabled
       exports: [ {service: '$JS.API.>', response: stream}, {service: '$KV.>'}, {stream: 'accI.>'} ]
   },
   I: {
       users: [ {user: i, password: i} ]
       imports: [
           {service: {account: A, subject: '$JS.API.>'}, to: 'fromA.>'}
           {service: {account: A, subject: '$KV.>'}, to: 'fromA.$KV.>'}
           {stream: {subject: 'accI.>', account: A}}
       ]
   }
}
"""


def test_a_bucket_through_an_imported_api_prefix(tmp_path):
    # nats.go's TestKeyValueCrossAccounts: writes went to $KV.<bucket>.<key>
    # in the importing account, where no stream listens (BucketNotFoundError).
    conf = tmp_path / "accounts.conf"
    conf.write_text(CROSS_ACCOUNT_CONF)
    with NatsServer(config=str(conf)) as server:
        host = server.url.split("//", 1)[1]
        with jss.connect(f"nats://a:a@{host}") as owner, jss.connect(f"nats://i:i@{host}", inbox_prefix="accI") as guest:
            kv1 = owner.jetstream().create_key_value("Map", history=10)
            kv2 = guest.jetstream(api_prefix="fromA").key_value("Map")
            with kv1.watch("map") as w1, kv2.watch("map") as w2:
                assert w1.next(timeout=5) is None and w2.next(timeout=5) is None

                def both_see(value, op):
                    for w in (w1, w2):
                        e = w.next(timeout=5)
                        assert (e.key, e.value, e.operation) == ("map", value, op)

                rev = kv2.put("map", b"value")
                both_see(b"value", jss.KeyValueOp.PUT)
                assert kv1.get("map").value == kv2.get("map").value == b"value"
                rev = kv2.update("map", b"updated", rev)
                both_see(b"updated", jss.KeyValueOp.PUT)
                assert kv1.get("map").revision == rev
                kv2.purge("map")
                both_see(b"", jss.KeyValueOp.PURGE)
                kv2.delete("map")
                both_see(b"", jss.KeyValueOp.DEL)
                with pytest.raises(jss.KeyNotFoundError):
                    kv1.get("map")
                assert kv2.create("map", b"again") > rev


@pytest.mark.timeout(180)
def test_puts_and_gets_across_server_restarts_never_say_the_bucket_is_gone(private_server):
    """While its server restarts, nothing answers a bucket's subjects for a
    moment: no proof that the bucket is gone. 5 restarts with the store kept,
    a thread putting and getting all along: errors are NoRespondersError,
    TimeoutError or connection errors, never BucketNotFoundError, and every
    acknowledged put is there afterwards."""
    nc = jss.connect(private_server.url, **RECONNECT)
    try:
        js = nc.jetstream(timeout=2)
        kv = js.create_key_value("RESTARTS", history=64)
        acked, seen, stop = [], [], threading.Event()

        def put_and_get():
            i = 0
            while not stop.is_set():
                i += 1
                key, value = f"k{i % 8}", b"%d" % i
                try:
                    acked.append((key, kv.put(key, value), value))
                    kv.get(key)
                except jss.JetStreamError as exc:
                    seen.append(exc)

        worker = Bounded(put_and_get, "put-and-get")
        for _ in range(5):
            before = len(acked)
            wait_until(lambda: len(acked) >= before + 20, timeout=30)  # working again since the last restart
            private_server.restart()
        after = len(acked)
        wait_until(lambda: len(acked) >= after + 20, timeout=30)
        stop.set()
        worker.join(30)
        assert worker.finished and worker.error is None
        assert [e for e in seen if isinstance(e, jss.BucketNotFoundError)] == []
        allowed = (jss.NoRespondersError, jss.TimeoutError, jss.ConnectionClosedError)
        assert [e for e in seen if not isinstance(e, allowed)] == []
        for key, revision, value in acked:
            assert kv.get(key, revision=revision).value == value
    finally:
        nc.close()


@pytest.mark.parametrize("how", ["get", "get_revision", "put"])
def test_a_bucket_deleted_by_another_client_says_so_to_the_next_call(server, js, how):
    kv = js.create_key_value(f"DEL_{how.upper()}")
    kv.put("a", b"1")
    with jss.connect(server.url) as other:
        other.jetstream().delete_key_value(kv.bucket)
    call = {"get": lambda: kv.get("a"), "get_revision": lambda: kv.get("a", revision=1), "put": lambda: kv.put("a", b"2")}
    with pytest.raises(jss.BucketNotFoundError, match="not found"):
        call[how]()
