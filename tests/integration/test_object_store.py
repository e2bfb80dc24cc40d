"""Object store (ADR-20) against a real server: nats.py's ObjectStoreTest and
nats.go's object_test.go cases in blocking form, round trips at the chunk
boundaries, corruption, failure clean-up (an info whose ack is lost or that
the server stores late, a put cut by a server restart, a non-blocking
reader), info writes racing a put of the same name, and validation before
sending."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import os
import shutil
import threading
from pathlib import Path

import pytest

import jetstream_sync as jss
from jetstream_sync.object_store import store as object_store_module

from ..helpers import Bounded, config_server, wait_until


CHUNK = 128 * 1024
PKG = Path(jss.__file__).parent


def sha(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def msgs(js, bucket: str) -> int:
    return js.stream_info(f"OBJ_{bucket}").state.messages


@pytest.fixture
def obs(js):
    return js.create_object_store("OBJS", description="testing")


# -- basics ------------------------------------------------------------------------------


def test_basics(js):
    with pytest.raises(jss.InvalidObjectStoreNameError):
        js.create_object_store("notok!")
    store = js.create_object_store("OBJS", description="testing")
    assert (store.bucket, store.stream_name) == ("OBJS", "OBJ_OBJS")
    cfg = store.status().stream_info.config
    assert cfg.subjects == ["$O.OBJS.C.>", "$O.OBJS.M.>"]
    assert (cfg.description, cfg.discard, cfg.max_bytes, cfg.max_age) == ("testing", "new", -1, 0)
    assert (cfg.storage, cfg.num_replicas, cfg.allow_rollup_hdrs, cfg.allow_direct) == ("file", 1, True, True)
    assert js.object_store("OBJS").bucket == "OBJS"

    info = store.put("foo", b"bar")
    assert (info.name, info.size, info.bucket, info.chunks) == ("foo", 3, "OBJS", 1)
    assert store.put("plaintext", "lorem ipsum").size == 11

    meta = jss.ObjectMeta(description="filedescription", headers={"headername": "headerval"})
    info = store.put("filename.txt", b"filevalue", meta, chunk_size=5)
    for got in (info, store.get_info("filename.txt"), store.get("filename.txt").info):
        assert (got.name, got.bucket, got.size, got.chunks, got.deleted) == ("filename.txt", "OBJS", 9, 2, False)
        assert got.nuid and got.digest == sha(b"filevalue") and got.mtime is not None
        assert got.description == "filedescription" and got.headers == {"headername": ["headerval"]}
        assert got.options.max_chunk_size == 5
    assert store.get_bytes("filename.txt") == b"filevalue"

    with pytest.raises(jss.ObjectNotFoundError):
        store.get("FOO")
    with pytest.raises(jss.InvalidObjectNameError):
        store.get("")
    with pytest.raises(jss.InvalidObjectNameError):
        store.put("", b"x")
    status = store.seal()
    assert status.sealed and store.status().sealed and js.stream_info("OBJ_OBJS").config.sealed
    assert status.size > 0 and status.storage == "file" and status.description == "testing"
    assert status.backing_store == "JetStream" and status.stream_info.config.name == "OBJ_OBJS"
    with pytest.raises(jss.APIError):
        store.put("after-seal", b"x")
    assert store.get_bytes("foo") == b"bar"  # reads still work

    js.delete_object_store("OBJS")
    with pytest.raises(jss.ObjectStoreNotFoundError):
        js.object_store("OBJS")
    with pytest.raises(jss.ObjectStoreNotFoundError):
        store.get("foo")
    with pytest.raises(jss.ObjectStoreNotFoundError):
        js.delete_object_store("OBJS")


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7])
def test_round_trip_at_chunk_boundaries(obs, size):
    data = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    info = obs.put("o", data)
    assert (info.size, info.chunks, info.digest) == (size, math.ceil(size / CHUNK), sha(data))
    assert obs.get_bytes("o") == data
    with obs.get("o") as r:
        assert b"".join(r) == data  # iteration yields chunks
    with obs.get("o") as r:
        buf = bytearray(1000)
        out = bytearray()
        while n := r.readinto(buf):
            out += buf[:n]
        assert out == data and r.read() == b"" and r.read(10) == b""
    with obs.get("o") as r:
        assert r.read(7) == data[:7] and r.read() == data[7:]


def test_create_update_and_create_or_update(js):
    with pytest.raises(jss.ObjectStoreNotFoundError):
        js.update_object_store("TEST", description="Test store")
    with pytest.raises(jss.InvalidObjectStoreNameError):
        js.create_or_update_object_store("TEST.", description="Test store")
    js.create_object_store("TEST", description="Test store")
    js.create_object_store("TEST", description="Test store")  # the same config: a no-op
    with pytest.raises(jss.ObjectStoreExistsError) as ei:
        js.create_object_store("TEST", description="New store")
    assert ei.value.err_code == 10058 and isinstance(ei.value, jss.APIError)
    assert js.update_object_store("TEST", description="New store").status().description == "New store"
    cfg = jss.ObjectStoreConfig("TEST", description="third", metadata={"k": "v"})
    assert js.create_or_update_object_store(cfg).status().metadata["k"] == "v"
    assert js.create_or_update_object_store("OTHER").status().description is None


def test_options_reach_the_stream(js):
    store = js.create_object_store("A", compression=True, max_bytes=1024 * 1024, ttl=3600, storage="memory")
    status = store.status()
    assert status.compressed and status.stream_info.config.compression == "s2"
    assert status.ttl == 3600 and status.storage == "memory"
    assert status.stream_info.config.max_bytes == 1024 * 1024
    meta = js.create_object_store("META-TEST", metadata={"foo": "bar", "baz": "boo"})
    assert {"foo": "bar", "baz": "boo"}.items() <= meta.status().metadata.items()


def test_object_store_names_and_statuses(js):
    js.create_stream(name="OBJ_FOO", subjects=["FOO.*"])  # OBJ_ prefix, no chunk subjects
    js.create_stream(name="FOO", subjects=["$O.ABC.C.>"])  # chunk subjects, no OBJ_ prefix
    for i in range(5):
        js.create_object_store(f"OBJS_{i}", max_bytes=1024)
    assert sorted(js.object_store_names()) == [f"OBJS_{i}" for i in range(5)]
    assert sorted(s.bucket for s in js.object_stores()) == [f"OBJS_{i}" for i in range(5)]


# -- data integrity -----------------------------------------------------------------------


def test_an_added_chunk_is_a_digest_mismatch(js, obs):
    obs.put("A", "abc")
    assert obs.get_bytes("A") == b"abc"
    info = obs.get_info("A")
    js.publish(f"$O.OBJS.C.{info.nuid}", b"123")
    result = obs.get("A")
    with pytest.raises(jss.DigestMismatchError):
        result.read()
    with pytest.raises(jss.DigestMismatchError):  # and on every later read
        result.read(1)
    result.close()


def test_a_lost_chunk_and_a_wrong_digest_are_detected(js, obs):
    data = bytes(range(256)) * 2048  # 4 chunks of 128 KiB
    info = obs.put("A", data)
    stream = js.stream("OBJ_OBJS")
    stream.delete_msg(2)  # the second chunk
    with obs.get("A") as r, pytest.raises(jss.DigestMismatchError) as ei:
        r.read()
    assert (ei.value.expected, ei.value.actual) == (len(data), len(data) - CHUNK)

    info = obs.put("B", data)
    wire = dict(json.loads(js.get_msg("OBJ_OBJS", last_by_subject="$O.OBJS.M.Qg==").data))
    wire["digest"] = sha(b"something else")
    js.publish("$O.OBJS.M.Qg==", json.dumps(wire).encode(), headers={"Nats-Rollup": "sub"})
    chunks = []
    with obs.get("B") as r, pytest.raises(jss.DigestMismatchError) as ei:
        for chunk in r:
            chunks.append(chunk)
    assert len(chunks) == info.chunks - 1  # the last chunk is held back
    assert ei.value.expected == sha(b"something else") and ei.value.actual == sha(data)

    obs.put("C", data)
    js.purge_stream("OBJ_OBJS", subject=f"$O.OBJS.C.{obs.get_info('C').nuid}")
    with obs.get("C") as r, pytest.raises(jss.DigestMismatchError):
        r.read(1)


def test_a_failed_put_leaves_no_chunks(js):
    store = js.create_object_store("SMALL", max_bytes=1024 * 1024)
    store.put("keep", b"k" * 1000)
    before = msgs(js, "SMALL")
    with pytest.raises(jss.APIError):  # the bucket is full: publishes refused
        store.put("big", b"x" * (3 * 1024 * 1024))
    assert msgs(js, "SMALL") == before

    class Broken(io.RawIOBase):
        calls = 0

        def read(self, n=-1):
            self.calls += 1
            if self.calls > 3:
                raise OSError("disk on fire")
            return b"y" * n

    with pytest.raises(OSError, match="disk on fire"):
        store.put("broken", Broken(), chunk_size=1000)
    assert msgs(js, "SMALL") == before
    with pytest.raises(jss.ObjectNotFoundError):
        store.get_info("broken")


_DENY_CHUNKS_CONF = """
listen: 127.0.0.1:{port}
jetstream { store_dir: "{store}" }
authorization { users = [ {user: u, password: p, permissions: {publish: {deny: ["$O.>"]}}} ] }
"""


@pytest.mark.timeout(60)
def test_a_put_denied_by_permissions_fails_fast_and_leaves_nothing(tmp_path):
    srv = config_server(tmp_path, "objperm", _DENY_CHUNKS_CONF)
    try:
        with jss.connect(f"nats://127.0.0.1:{srv.port}", user="u", password="p") as nc:
            js = nc.jetstream(timeout=2.0)
            store = js.create_object_store("TEST")
            with pytest.raises(jss.PermissionDeniedError):
                store.put("test-object", b"x" * (3 * CHUNK))
            assert msgs(js, "TEST") == 0 and nc.is_connected
            assert store.list() == []
    finally:
        srv.cleanup()


def test_replacing_an_object_purges_its_old_chunks(js, obs):
    assert obs.put("A", b"A" * 10).size == 10
    assert obs.put("A", b"a" * 20).size == 20
    assert msgs(js, "OBJS") == 2  # one chunk, one info
    assert obs.get_bytes("A") == b"a" * 20


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


# -- files and names ------------------------------------------------------------------------


def test_files_in_binary_and_text_mode(obs, tmp_path):
    blob = b"A" * (1024 * 1024 + 33)
    src = tmp_path / "blob"
    src.write_bytes(blob)
    digest = "SHA-256=mhT1pLyi9JlIaqwVmvt0wQp2x09kor_80Lirl4SDblA="  # nats.py's value for this blob
    assert obs.put("big", io.BytesIO(blob)).digest == digest
    with open(src, "rb") as f:
        info = obs.put("tmp", f)
    with open(src) as f:  # text mode: read() gives str, stored as UTF-8
        info2 = obs.put("tmp2", f)
    assert (info.size, info.chunks, info.digest) == (info2.size, info2.chunks, info2.digest) == (len(blob), 9, digest)
    dst = tmp_path / "out"
    with obs.get("tmp") as r, open(dst, "wb") as f:
        shutil.copyfileobj(r, f)
    assert dst.read_bytes() == blob


def test_many_files_then_seal(obs):
    files = sorted(PKG.glob("*.py"))
    for path in files:
        with open(path, "rb") as f:
            obs.put(path.name, f)
    obs.seal()
    assert obs.get_bytes("client.py") == (PKG / "client.py").read_bytes()
    assert sorted(i.name for i in obs.list()) == sorted(p.name for p in files)


@pytest.mark.parametrize("name", ["BLOB.txt", "foo bar", '.*<>:"/\\|?&', "объект ✓", "a" * 2000])
def test_object_names(obs, name):
    assert obs.put(name, "A").name == name
    assert obs.get_bytes(name) == b"A"


# -- delete markers and history ---------------------------------------------------------------


def test_delete_markers(js, obs):
    obs.put("A", b"A" * 100)
    obs.delete("A")
    assert msgs(js, "OBJS") == 1  # the delete marker
    with pytest.raises(jss.ObjectNotFoundError):
        obs.get_info("A")
    with pytest.raises(jss.ObjectDeletedError):
        obs.get("A")
    info = obs.get_info("A", show_deleted=True)
    assert info.deleted and info.size == 0 and info.digest is None
    with obs.get("A", show_deleted=True) as r:
        assert r.info.deleted and r.read() == b""
    obs.delete("A")  # again: nothing to do
    with pytest.raises(jss.ObjectNotFoundError):
        obs.delete("never")


def test_delete_of_one_of_two(js):
    store = js.create_object_store("2OD")
    pa, pb = b"A" * 2_000_000, b"B" * 3_000_000
    store.put("A", pa)
    after_a = msgs(js, "2OD")
    store.put("B", pb)
    assert store.get_bytes("B") == pb
    store.delete("B")
    assert msgs(js, "2OD") == after_a + 1


# -- meta ----------------------------------------------------------------------------------


def test_update_meta_and_rename(obs):
    obs.put("A", "AAA")
    info = obs.put("C", b"CCC", metadata={"name": "C", "description": "descC"})
    assert info.metadata == {"name": "C", "description": "descC"}
    meta = jss.ObjectMeta("A", description="descA", headers={"color": "blue"}, metadata={"version": "0.1"})
    obs.update_meta("A", meta)
    info = obs.get_info("A")
    assert (info.description, info.headers, info.metadata) == ("descA", {"color": ["blue"]}, {"version": "0.1"})

    obs.update_meta("A", jss.ObjectMeta("B", description="descB", headers={"color": "red"}))
    with pytest.raises(jss.ObjectNotFoundError):
        obs.get_info("A")
    info = obs.get_info("B")
    assert (info.name, info.description, info.headers, info.metadata) == ("B", "descB", {"color": ["red"]}, None)
    assert obs.get_bytes("B") == b"AAA"  # the chunks stay

    with pytest.raises(jss.ObjectAlreadyExistsError):
        obs.update_meta("B", jss.ObjectMeta("C"))
    obs.delete("C")
    obs.update_meta("B", jss.ObjectMeta("C"))  # onto a deleted name
    assert obs.get_bytes("C") == b"AAA"
    obs.delete("C")
    with pytest.raises(jss.ObjectDeletedError):
        obs.update_meta("C", jss.ObjectMeta("C"))
    with pytest.raises(jss.ObjectNotFoundError):
        obs.update_meta("X", jss.ObjectMeta("X"))
    link_meta = jss.ObjectMeta(options=jss.ObjectMetaOptions(link=jss.ObjectLink("DoesntMatter")))
    with pytest.raises(jss.ObjectLinkError):
        obs.put("L", b"", link_meta)


# -- links ---------------------------------------------------------------------------------


def test_links(js):
    root = js.create_object_store("ROOT")
    root.put("A", "AAA")
    root.put("B", "BBB")
    info_a = root.get_info("A")
    link_a = root.add_link("LA", info_a)
    assert (link_a.link.bucket, link_a.link.name) == ("ROOT", "A") and link_a.nuid and link_a.mtime
    with pytest.raises(jss.ObjectLinkError):
        root.add_link("LALA", link_a)  # to a link

    other = js.create_object_store("DIR")
    other.put("DIR/A", "DIR-AAA")
    other.put("DIR/B", "DIR-BBB")
    link_b = root.add_link("DBL", other.get_info("DIR/B"))
    assert (link_b.link.bucket, link_b.link.name) == ("DIR", "DIR/B")
    dir_link = root.add_bucket_link("dir", other)
    assert (dir_link.link.bucket, dir_link.link.name) == ("DIR", None)
    with pytest.raises(jss.ObjectLinkError):
        root.get("dir")

    assert root.get_bytes("LA") == b"AAA"  # same bucket
    assert root.get_bytes("DBL") == b"DIR-BBB"  # across buckets
    assert root.add_link("LA", root.get_info("B")).link.name == "B"  # replace a link
    assert root.get_bytes("LA") == b"BBB"
    assert root.add_bucket_link("dir", root).link.bucket == "ROOT"

    with pytest.raises(jss.InvalidObjectNameError):
        root.add_link("", info_a)
    with pytest.raises(jss.ObjectAlreadyExistsError):
        root.add_link("A", root.get_info("B"))  # A is an object
    with pytest.raises(jss.ObjectLinkError):
        root.add_link("Nil Object", None)
    with pytest.raises(jss.ObjectLinkError):
        root.add_link("Link To Link", link_b)
    with pytest.raises(jss.ObjectLinkError):
        root.add_bucket_link("Nil Bucket", None)

    root.delete("A")
    root.add_link("ToDeletedStale", info_a)  # a stale info: the server is not asked
    with pytest.raises(jss.ObjectNotFoundError):
        root.get("ToDeletedStale")
    with pytest.raises(jss.ObjectLinkError):
        root.add_link("ToDeletedFresh", root.get_info("A", show_deleted=True))
    assert root.add_link("A", root.get_info("B")).is_link  # a deleted name may become a link


# -- info writes racing a put of the same name ---------------------------------------------


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


# -- validation before anything is sent -------------------------------------------------------------


def _cases(js, store):
    info = store.get_info("A")
    E = jss.InvalidOptionError
    return [
        (lambda: js.create_object_store("bad.name"), jss.InvalidObjectStoreNameError),
        (lambda: js.create_object_store(""), jss.InvalidObjectStoreNameError),
        (lambda: js.create_object_store("x" * 252), jss.InvalidObjectStoreNameError),
        (lambda: js.create_object_store(123), jss.InvalidObjectStoreNameError),
        (lambda: js.create_object_store("B", ttl=-1), E),
        (lambda: js.create_object_store("B", ttl="1h"), E),
        (lambda: js.create_object_store("B", max_bytes=-2), E),
        (lambda: js.create_object_store("B", max_bytes=1.5), E),
        (lambda: js.create_object_store("B", replicas=0), E),
        (lambda: js.create_object_store("B", replicas=6), E),
        (lambda: js.create_object_store("B", storage="tape"), E),
        (lambda: js.create_object_store("B", compression="s2"), E),
        (lambda: js.create_object_store("B", metadata={"k": 1}), E),
        (lambda: js.create_object_store("B", description=5), E),
        (lambda: js.create_object_store("B", placement="here"), E),
        (lambda: js.create_object_store("B", colour="red"), E),
        (lambda: js.create_object_store("B", config={"bucket": "B"}), E),
        (lambda: js.update_object_store("bad name"), jss.InvalidObjectStoreNameError),
        (lambda: js.object_store("a.b"), jss.InvalidObjectStoreNameError),
        (lambda: js.delete_object_store("a*"), jss.InvalidObjectStoreNameError),
        (lambda: store.put("", b"x"), jss.InvalidObjectNameError),
        (lambda: store.put(None, b"x"), jss.InvalidObjectNameError),
        (lambda: store.put("\udc80", b"x"), jss.InvalidObjectNameError),
        (lambda: store.put("n" * 4000, b"x"), jss.InvalidObjectNameError),
        (lambda: store.put("n", 42), E),
        (lambda: store.put("n", b"x", chunk_size=0), E),
        (lambda: store.put("n", b"x", chunk_size=True), E),
        (lambda: store.put("n", b"x", chunk_size=2 * 1024 * 1024), E),
        (lambda: store.put("n", b"x", headers={"bad name": "v"}), E),
        (lambda: store.put("n", b"x", headers={"k": "a\r\nb"}), E),
        (lambda: store.put("n", b"x", metadata=["k"]), E),
        (lambda: store.put("n", b"x", description=b"d"), E),
        (lambda: store.put("n", b"x", meta={"name": "n"}), E),
        (lambda: store.put("n", b"x", jss.ObjectMeta("other")), E),
        (lambda: store.get("n", timeout=0), E),
        (lambda: store.get_info(""), jss.InvalidObjectNameError),
        (lambda: store.delete(""), jss.InvalidObjectNameError),
        (lambda: store.update_meta("A", {"name": "B"}), E),
        (lambda: store.update_meta("A", jss.ObjectMeta("B", headers={"k": 1})), E),
        (lambda: store.add_link("", info), jss.InvalidObjectNameError),
        (lambda: store.add_link("l", "A"), jss.ObjectLinkError),
        (lambda: store.add_bucket_link("l", "OBJS"), jss.ObjectLinkError),
        (lambda: store.watch(include_history=True, updates_only=True), E),
        (lambda: store.watch(ignore_deletes="yes"), E),
    ]


def test_every_option_is_checked_before_anything_is_sent(js, nc, server):
    store = js.create_object_store("OBJS")
    store.put("A", b"a")
    cases = _cases(js, store)
    with jss.connect(server.url) as spy_nc:
        spy = spy_nc.subscribe(">")
        spy_nc.flush()
        for call, error in cases:
            with pytest.raises(error):
                call()
        nc.flush()
        spy_nc.flush()
        assert spy.pending() == 0, [spy.next_msg(1).subject for _ in range(spy.pending())]
        store.get_info("A")  # the spy does see what is sent
        nc.flush()
        spy_nc.flush()
        assert spy.pending() > 0
