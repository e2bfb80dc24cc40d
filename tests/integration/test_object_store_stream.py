"""Object store reading over time against a real server: list and watch
(nats.py's and nats.go's cases in blocking form, and a watch's initial infos
ended while writes keep coming), mirrors, concurrent use, faults under a
running read or watch (a server restart, a deleted store), and 200 MiB
through bounded memory."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import threading
import time

import pytest

import jetstream_sync as jss
from jetstream_sync.object_store import store as object_store_module

from ..helpers import Bounded, marker_then_updates, wait_blocked, wait_until
from .test_memory import MIB, rss_bytes
from .test_object_store import CHUNK, sha


@pytest.fixture
def obs(js):
    return js.create_object_store("OBJS", description="testing")


# -- list and watch ------------------------------------------------------------------------------


def test_list(obs):
    assert obs.list() == []
    for name, value in (("A", "AAA"), ("B", "BBB"), ("C", "CCC"), ("B", "bbb")):
        obs.put(name, value)
    obs.add_link("b", obs.get_info("B"))
    obs.put("D", "DDD")
    obs.delete("D")
    assert sorted(i.name for i in obs.list()) == ["A", "B", "C", "b"]
    assert [i.name for i in obs.list(show_deleted=True)] == ["A", "C", "B", "b", "D"]


def expect_nothing(watcher):
    with pytest.raises(jss.TimeoutError):
        watcher.next(timeout=0.3)


def test_watch(obs):
    with obs.watch() as w:
        assert w.next(timeout=5) is None  # nothing yet: the marker at once
        obs.put("A", b"A")
        obs.put("B", b"B")
        a, b = w.next(timeout=5), w.next(timeout=5)
        assert (a.name, a.size, a.chunks, a.digest, a.bucket) == ("A", 1, 1, sha(b"A"), "OBJS")
        assert b.name == "B" and b.digest == "SHA-256=335w5QIVRPSDS77mSp43if68S-gUcN9inK1t2wMyClw="
        expect_nothing(w)
        obs.delete("B")
        e = w.next(timeout=5)
        assert (e.name, e.deleted) == ("B", True)
        obs.put("C", b"CCC")
        assert w.next(timeout=5).name == "C"
        meta = obs.get_info("C").meta
        meta.description = "changed"
        obs.update_meta("C", meta)
        e = w.next(timeout=5)
        assert (e.name, e.description) == ("C", "changed")
        with pytest.raises(jss.ObjectDeletedError):
            obs.update_meta("B", jss.ObjectMeta("B", description="ng"))
        expect_nothing(w)


def test_watch_initial_values_history_and_deletes(obs):
    obs.put("A", b"A")
    obs.put("B", b"B")
    obs.delete("B")
    with obs.watch() as w:
        assert [w.next(5).name, w.next(5).name, w.next(5)] == ["A", "B", None]
    with obs.watch(ignore_deletes=True) as w:
        assert [w.next(5).name, w.next(5)] == ["A", None]  # the marker despite the skipped delete
    with obs.watch(include_history=True) as w:
        assert [w.next(5).name, w.next(5).name, w.next(5)] == ["A", "B", None]


def test_watch_updates_only(obs):
    obs.put("A", b"A")
    obs.put("B", b"B")
    with obs.watch(updates_only=True) as w:
        expect_nothing(w)  # neither old values nor a marker
        obs.delete("A")
        assert w.next(timeout=5).name == "A"
        obs.put("C", b"CCC")
        assert w.next(timeout=5).name == "C"


def test_watch_stops_from_another_thread(obs):
    seen = []
    w = obs.watch()
    reader = threading.Thread(target=lambda: seen.extend(w), daemon=True)
    reader.start()
    obs.put("A", b"A")
    wait_until(lambda: len(seen) == 2)
    w.stop()
    reader.join(10)
    assert not reader.is_alive() and seen[0] is None and seen[1].name == "A"
    w.stop()  # idempotent


def test_mirror_bucket(js, obs):
    js.create_stream(
        jss.StreamConfig(
            name="OBJ_mirror",
            mirror=jss.models.StreamSource(
                name="OBJ_OBJS",
                subject_transforms=[jss.models.SubjectTransform(src="$O.OBJS.>", dest="$O.mirror.>")],
            ),
            allow_rollup_hdrs=True,
        )
    )
    obs.put("A", "abc")
    mirror = js.object_store("mirror")
    wait_until(lambda: "A" in [i.name for i in mirror.list()], timeout=10)
    assert mirror.get_bytes("A") == b"abc"
    with mirror.watch() as w:
        assert [w.next(5).name, w.next(5)] == ["A", None]


def test_the_object_watch_marker_comes_after_the_initial_infos_even_when_writes_keep_coming(js):
    # New names only: replacing infos not yet delivered stalls a
    # last-per-subject consumer on nats-server 2.15.1 (a server bug).
    store = js.create_object_store("BUSYOBJ")
    meta_subject = object_store_module.obj.meta_subject

    def info(i):
        return json.dumps(jss.ObjectInfo(name=f"o{i}", bucket="BUSYOBJ", nuid=f"N{i}").to_wire()).encode()

    marker_then_updates(js, lambda i: meta_subject("BUSYOBJ", f"o{i}"), info, store.watch, store.list)


# -- concurrency and resources ------------------------------------------------------------------


def test_concurrent_puts_and_gets(obs):
    blobs = {f"o{i}": bytes([i]) * (CHUNK * 3 + i) for i in range(4)}
    errors = []

    def work(name):
        try:
            obs.put(name, blobs[name])
            assert obs.get_bytes(name) == blobs[name]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in blobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and sorted(i.name for i in obs.list()) == sorted(blobs)


def test_closing_a_reader_early_deletes_its_consumer(js, obs):
    obs.put("A", b"x" * (CHUNK * 40))
    r = obs.get("A")
    assert len(r.read(10)) == 10
    assert js.consumer_names("OBJ_OBJS")
    r.close()
    wait_until(lambda: not js.consumer_names("OBJ_OBJS"))
    with pytest.raises(ValueError):
        r.read(1)
    with obs.get("A") as r:
        for _ in r:
            pass
    wait_until(lambda: not js.consumer_names("OBJ_OBJS"))


def test_a_read_goes_on_across_a_server_restart_and_a_deleted_consumer(private_server, fnc):
    js = fnc.jetstream()
    store = js.create_object_store("FAULTS")
    data = random.Random(3).randbytes(CHUNK * 100 + 5)
    store.put("A", data)
    got = []
    with store.get("A") as r:
        for i, chunk in enumerate(r):
            got.append(chunk)
            if i == 30:
                js.delete_consumer("OBJ_FAULTS", js.consumer_names("OBJ_FAULTS")[0])
            elif i == 60:
                fnc.flush()
                private_server.restart()
    assert b"".join(got) == data  # in order, exactly once, digest checked by the reader


class RandomReader:
    """``size`` pseudo-random bytes made as they are read (never all in
    memory); hashes them and samples RSS every 64 reads."""

    def __init__(self, size: int) -> None:
        self.left, self.rng, self.sha, self.reads, self.peak = size, random.Random(20), hashlib.sha256(), 0, 0

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.rng.randbytes(n)
        self.left -= n
        self.sha.update(data)
        self.reads += 1
        if self.reads % 64 == 0:
            self.peak = max(self.peak, rss_bytes())
        return data


def test_200_mib_streams_through_with_bounded_memory(obs):
    size = 200 * MIB
    obs.put("warm-up", RandomReader(16 * MIB))  # buffers and code paths, before the baseline
    with obs.get("warm-up") as r:
        assert sum(len(chunk) for chunk in r) == 16 * MIB  # streamed: the baseline holds no copy
    baseline = rss_bytes()

    source = RandomReader(size)
    info = obs.put("big", source)
    expected = "SHA-256=" + base64.urlsafe_b64encode(source.sha.digest()).decode()
    assert (info.size, info.chunks, info.digest) == (size, size // CHUNK, expected)

    peak, got, count = source.peak, hashlib.sha256(), 0
    with obs.get("big") as r:  # the reader checks the digest itself; count and hash too
        for count, chunk in enumerate(r, 1):
            got.update(chunk)
            if count % 64 == 0:
                peak = max(peak, rss_bytes())
    assert count == info.chunks and "SHA-256=" + base64.urlsafe_b64encode(got.digest()).decode() == expected
    assert peak - baseline < 50 * MIB, f"RSS grew {(peak - baseline) / MIB:.1f} MiB"


@pytest.mark.parametrize("change", ["delete", "replace"])
def test_a_reader_learns_promptly_that_its_object_went_away(obs, change):
    """Its chunks are purged and will never come: no 30 s wait for nothing."""
    obs.put("report", b"r" * (16 << 20), chunk_size=128 * 1024)  # more than a reader buffers (~4 MiB)
    result = obs.get("report", timeout=30.0)
    first = result.read(1000)
    assert first == b"r" * 1000
    if change == "delete":
        obs.delete("report")
    else:
        obs.put("report", b"new")
    expected = jss.ObjectDeletedError if change == "delete" else jss.ObjectChangedError
    t0 = time.monotonic()
    with pytest.raises((expected, jss.DigestMismatchError)):
        result.read()  # what was buffered, then the end that never comes
    assert time.monotonic() - t0 < 10
    result.close()


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


@pytest.mark.timeout(60)
def test_a_read_whose_chunks_stop_finds_a_deleted_store_by_its_probe(js, monkeypatch):
    """The chunk reader may not hear of the deletion (no reset, no status
    reaches it): the probe after the chunks stop must say the store is gone,
    at once, not when the read's timeout runs out."""
    store = js.create_object_store("GONE2")
    store.put("big", os.urandom(1024 * 1024))
    with store.get("big") as r:
        r.read(1)

        def silent(timeout=None):
            time.sleep(min(timeout or 0.1, 0.1))
            raise jss.TimeoutError("no chunk")

        monkeypatch.setattr(r._ctx, "next", silent)  # the ordered read never learns of the deletion
        js.delete_object_store("GONE2")
        started = time.monotonic()
        with pytest.raises(jss.ObjectStoreNotFoundError, match="GONE2"):
            r.read()
        assert time.monotonic() - started < 10, "found only when the read's timeout ran out"
