"""Key-value and object-store defects found by trying them as a user would
(each test failed before its fix), plus a few cases that held up and had no
test: timeouts that must hold under load and across threads, info writes
racing each other or losing their ack, watches that must end their initial
values, bad input refused before sending, and server restarts."""

from __future__ import annotations

import io
import json
import os
import threading

import pytest

import jetstream_sync as jss
from jetstream_sync.object_store import store as object_store_module
from jetstream_sync._tools.server import NatsServer

from ..helpers import Bounded, wait_blocked, wait_until


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


def test_a_put_whose_info_ack_is_lost_completes(js, monkeypatch):
    # The info was stored but its ack lost: the put used to purge the chunks
    # the stored info names, leaving an object that could never be read.
    store = js.create_object_store("LOSTACK")
    old = store.put("n", os.urandom(300_000))
    new = os.urandom(300_000)
    publish_info = object_store_module.ObjectStore._publish_info

    def stored_then_timeout(self, info, *args):
        publish_info(self, info, *args)
        raise jss.TimeoutError("ack lost (simulated)")

    monkeypatch.setattr(object_store_module.ObjectStore, "_publish_info", stored_then_timeout)
    info = store.put("n", new)
    monkeypatch.undo()
    assert store.get_info("n").nuid == info.nuid and info.mtime is not None
    assert store.get_bytes("n") == new
    # The replaced object's chunks are purged as after any put.
    assert store.status().stream_info.state.messages == info.chunks + 1
    assert old.nuid != info.nuid


def test_a_put_whose_info_times_out_never_leaves_an_unreadable_object(private_server, monkeypatch):
    # The server stalls while the info is in flight and stores it after the
    # client gave up: whatever the put said, the name must read back whole.
    with jss.connect(private_server.url) as nc:
        js = nc.jetstream(timeout=1.0)
        store = js.create_object_store("STALL")
        old, new = os.urandom(300_000), os.urandom(300_000)
        before = store.put("n", old)
        publish_info = object_store_module.ObjectStore._publish_info
        resumed = threading.Event()

        def stall_then_publish(self, info, *args):
            private_server.pause()

            def resume():
                private_server.resume()
                resumed.set()

            threading.Timer(2.5, resume).start()  # past the publish timeout and the check after it
            publish_info(self, info, *args)

        monkeypatch.setattr(object_store_module.ObjectStore, "_publish_info", stall_then_publish)
        put = Bounded(lambda: store.put("n", new), name="put").join(20)
        monkeypatch.undo()
        assert put.finished
        assert resumed.wait(10)
        assert isinstance(put.error, jss.TimeoutError) or put.error is None
        # The stalled info is stored once the server runs again: it must find its chunks.
        wait_until(lambda: store.get_info("n").nuid != before.nuid, timeout=10)
        assert store.get_bytes("n") == new


N_BUSY = 3000


def _marker_then_updates(js, subject_of, body, open_watch, list_all):
    """Write N_BUSY entries, open a watch, write N_BUSY more before reading
    it: the marker must follow the first N_BUSY, the rest come as updates,
    and a listing still sees all of them."""

    def write(first):
        for i in range(first, first + N_BUSY):
            js.publish_async(subject_of(i), body(i), headers={"Nats-Rollup": "sub"})
        assert js.publish_async_complete(timeout=30)

    write(0)
    with open_watch() as w:
        write(N_BUSY)  # while the initial values are still on their way
        seen = 0
        while w.next(timeout=5) is not None and seen <= 2 * N_BUSY:
            seen += 1
        assert seen == N_BUSY
        assert sum(1 for _ in iter(lambda: _next_or_none(w), None)) == N_BUSY
    assert len(list_all()) == 2 * N_BUSY


def _next_or_none(w):
    try:
        return w.next(timeout=1)
    except jss.TimeoutError:
        return None


def test_the_watch_marker_comes_after_the_initial_values_even_when_writes_keep_coming(js):
    # The marker waited for a delivery with nothing pending, which a bucket
    # written faster than the watch reads never gives: it came only after
    # every later write too (or never). nats.go ends the initial values once
    # the consumer's initial pending has been delivered.
    kv = js.create_key_value("BUSY")
    _marker_then_updates(js, lambda i: f"$KV.BUSY.k{i}", lambda i: b"v", kv.watch_all, kv.keys)


def test_the_object_watch_marker_comes_after_the_initial_infos_even_when_writes_keep_coming(js):
    # New names only: replacing infos not yet delivered stalls a
    # last-per-subject consumer on nats-server 2.15.1 (a server bug).
    store = js.create_object_store("BUSYOBJ")
    meta_subject = object_store_module.obj.meta_subject

    def info(i):
        return json.dumps(jss.ObjectInfo(name=f"o{i}", bucket="BUSYOBJ", nuid=f"N{i}").to_wire()).encode()

    _marker_then_updates(js, lambda i: meta_subject("BUSYOBJ", f"o{i}"), info, store.watch, store.list)


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


# -- info writes racing a put ------------------------------------------------------------------


def test_concurrent_puts_of_one_name_leave_only_the_winners_chunks(js):
    # Each put purged what it saw before uploading: every loser's chunks stayed for good.
    store = js.create_object_store("RACE")
    datas = [os.urandom(300_000) for _ in range(8)]
    start = threading.Barrier(len(datas))

    def put(data):
        start.wait(10)
        return store.put("same", data)

    puts = [Bounded(lambda d=d: put(d), name="put") for d in datas]
    assert all(p.join(30).finished and p.error is None for p in puts)
    info = store.get_info("same")
    assert store.get_bytes("same") in datas
    assert store.status().stream_info.state.messages == info.chunks + 1


def _put_gets_in_between(monkeypatch, store, when, data):
    """Run ``store.put("n", data)`` right before the first info write that ``when(info)`` picks."""
    publish_info = object_store_module.ObjectStore._publish_info
    armed = [True]

    def put_first(self, info, *args):
        if armed[0] and when(info):
            armed[0] = False
            store.put("n", data)
        return publish_info(self, info, *args)

    monkeypatch.setattr(object_store_module.ObjectStore, "_publish_info", put_first)


def test_update_meta_racing_a_put_keeps_the_new_object(js, monkeypatch):
    # update_meta wrote back the info it had read: the name then named the
    # chunks the put had just purged, and every read failed.
    store = js.create_object_store("RACE")
    store.put("n", os.urandom(300_000))
    new = os.urandom(300_000)
    _put_gets_in_between(monkeypatch, store, lambda info: info.description == "edited", new)
    store.update_meta("n", jss.ObjectMeta(name="n", description="edited"))
    monkeypatch.undo()
    assert store.get_bytes("n") == new
    assert store.get_info("n").description == "edited"


def test_delete_racing_a_put_purges_what_it_deleted(js, monkeypatch):
    # delete marked and purged the object it had read; the put's chunks stayed, unreachable.
    store = js.create_object_store("RACE")
    store.put("n", os.urandom(300_000))
    _put_gets_in_between(monkeypatch, store, lambda info: info.deleted, os.urandom(300_000))
    store.delete("n")
    monkeypatch.undo()
    with pytest.raises(jss.ObjectDeletedError):
        store.get_info("n")
    assert store.status().stream_info.state.messages == 1  # the delete marker alone


def test_add_link_racing_a_put_does_not_replace_the_object(js, monkeypatch):
    store = js.create_object_store("RACE")
    target = store.put("target", b"t")
    new = os.urandom(300_000)
    _put_gets_in_between(monkeypatch, store, lambda info: info.is_link, new)
    with pytest.raises(jss.ObjectAlreadyExistsError):
        store.add_link("n", target)
    monkeypatch.undo()
    assert store.get_bytes("n") == new


# -- purge_deletes racing a put ----------------------------------------------------------------


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


# -- bad input refused before sending -----------------------------------------------------------


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


def test_a_put_from_a_non_blocking_reader_fails_instead_of_storing_a_truncated_object(js):
    store = js.create_object_store("NB")
    reads = iter([b"abc", None, b"def", b""])

    class NonBlocking(io.RawIOBase):
        def readable(self):
            return True

        def read(self, n=-1):
            return next(reads)

    with pytest.raises(jss.InvalidOptionError, match="non-blocking"):
        store.put("nb", NonBlocking())
    with pytest.raises(jss.ObjectNotFoundError):
        store.get_info("nb")
    assert store.status().stream_info.state.messages == 0


# -- across a server restart (these held up; kept as regression tests) ----------------------------


def test_an_object_watch_goes_on_across_a_server_restart(private_server, fnc):
    js = fnc.jetstream(timeout=2.0)
    store = js.create_object_store("RESTART")
    seen = []
    with store.watch(updates_only=True) as w:
        reader = Bounded(lambda: [seen.append(info.name) for info in w], name="watch")
        for i in range(20):
            if i == 10:
                fnc.flush()
                private_server.restart()
            wait_until(lambda i=i: _put_tolerating_the_restart(store, f"o{i}"), timeout=20)
        wait_until(lambda: len(set(seen)) == 20, timeout=20)
    assert reader.join(10).finished
    # In order; a put retried after a lost ack may show twice, nothing is lost.
    assert sorted(set(seen), key=lambda n: int(n[1:])) == [f"o{i}" for i in range(20)]
    assert [n for i, n in enumerate(seen) if i == 0 or n != seen[i - 1]] == [f"o{i}" for i in range(20)]


def _put_tolerating_the_restart(store, name):
    try:
        store.put(name, b"x")
        return True
    except (jss.TimeoutError, jss.NoRespondersError, jss.ConnectionClosedError):
        return False


def test_a_big_put_cut_by_a_server_restart_fails_cleanly_or_completes(private_server, fnc):
    js = fnc.jetstream(timeout=2.0)
    store = js.create_object_store("CUT")
    old = os.urandom(500_000)
    store.put("big", old)
    data = os.urandom(20 * 1024 * 1024)

    class RestartMidway(io.RawIOBase):
        def __init__(self):
            self.src, self.done = io.BytesIO(data), False

        def readable(self):
            return True

        def read(self, n=-1):
            if not self.done and self.src.tell() >= len(data) // 2:
                self.done = True
                fnc.flush()
                private_server.restart()
            return self.src.read(n)

    put = Bounded(lambda: store.put("big", RestartMidway()), name="put").join(60)
    assert put.finished
    wait_until(lambda: _readable(store), timeout=20)
    got = store.get_bytes("big")
    assert got == (data if put.error is None else old)


def _readable(store):
    try:
        store.get_info("big")
        return True
    except (jss.TimeoutError, jss.NoRespondersError):
        return False


def test_an_object_watch_read_by_two_threads_keeps_each_ones_timeout(js):
    # The reader blocked in next() held the watcher's lock: another thread's
    # next(timeout=0.5) waited for it, past its timeout, until the watch stopped.
    store = js.create_object_store("TWO")
    with store.watch(updates_only=True) as w:
        got = []
        first = Bounded(lambda: [got.append(info.name) for info in w], name="iterating")
        wait_blocked(first.thread)
        second = Bounded(lambda: w.next(timeout=0.5), name="bounded").join(10)
        assert second.finished and isinstance(second.error, jss.TimeoutError) and second.elapsed < 3
        store.put("a", b"x")
        wait_until(lambda: got == ["a"], timeout=10)
    assert first.join(10).finished and first.error is None


def test_eight_threads_updating_from_one_revision_exactly_one_wins(js):
    # Held up when tried; kept: a compare-and-set must never let two writers through.
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


def test_a_handle_made_before_per_key_ttls_were_turned_on_can_use_them(js):
    # The handle refused create(ttl=)/purge(ttl=) from its copy of the config,
    # telling the user to call update_key_value, which they had done.
    kv = js.create_key_value("LATETTL", history=2)
    js.update_key_value("LATETTL", history=2, limit_marker_ttl=2)
    assert kv.create("k", b"v", ttl=5) == 1
    kv.purge("k", ttl=5)
    assert kv.history("k")[-1].operation is jss.KeyValueOp.PURGE


def test_a_read_and_a_watch_of_a_deleted_object_store_say_so(js):
    # Both ended with a bare StreamNotFoundError about OBJ_<bucket> (KV says BucketNotFoundError).
    store = js.create_object_store("GONE")
    store.put("big", os.urandom(8 * 1024 * 1024))
    with store.get("big") as r, store.watch() as w:
        r.read(1)
        assert w.next(timeout=5).name == "big"
        js.delete_object_store("GONE")
        with pytest.raises(jss.ObjectStoreNotFoundError, match="GONE"):
            r.read()
        with pytest.raises(jss.ObjectStoreNotFoundError, match="GONE"):
            while True:
                w.next(timeout=5)
