"""An R3 bucket on a 3-node cluster stays linearizable while its stream
leader is SIGKILLed and restarted and a follower is frozen: eight threads put,
update (compare-and-set), create, delete and read a few keys with unique
values; tests/kv_history.py checks the history against the stream afterwards.

``KV_LIN_SECONDS`` sets how long the workload runs (default 40 s; the slow
tier's run stays within 3 minutes in all).
"""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import jetstream_answers, stream_placed, wait_until
from ..kv_history import Entry, Op, check

pytestmark = pytest.mark.slow
SECONDS = float(os.environ.get("KV_LIN_SECONDS", "40"))
KEYS = ["k0", "k1", "k2", "k3"]
BUCKET, STREAM = "LIN", "KV_LIN"
DEFINITE = (jss.KeyWrongLastSequenceError, jss.KeyExistsError)  # the server refused: nothing written


def _bucket(js):
    deadline = time.monotonic() + 45
    while True:  # a fresh cluster may answer before its meta leader can place a stream
        try:
            kv = js.create_key_value(bucket=BUCKET, replicas=3, history=64)
            break
        except jss.TimeoutError:
            if time.monotonic() > deadline:
                raise
    # Keep every revision, not the last 64 per key: the checker needs the whole history
    # (a bucket's stream must keep some limit, or handles refuse it as no bucket).
    cfg = js.stream_info(STREAM).config
    cfg.max_msgs_per_subject = 10**9
    js.update_stream(cfg)
    wait_until(lambda: _placed(js), timeout=30, interval=0.1)
    wait_until(lambda: _writable(kv), timeout=30, interval=0.1)
    return kv


def _placed(js):
    try:
        return stream_placed(js, STREAM)
    except jss.JetStreamError:  # no leader for a moment, a server still starting
        return False


def _writable(kv):
    try:
        kv.update("probe", b"", last=10**9)  # refused: proves the leader answers from here
    except jss.KeyWrongLastSequenceError:
        return True
    except jss.JetStreamError:
        return False
    raise AssertionError("the probe was stored")


class Client(threading.Thread):
    """One of the eight: random operations on KEYS until ``stop``, each recorded."""

    def __init__(self, n, kv, js, stop, record):
        super().__init__(name=f"lin-{n}", daemon=True)
        self.n, self.kv, self.js, self.stop, self.record = n, kv, js, stop, record
        self.rng = random.Random(n)
        self.last = {}  # key -> the revision this thread saw last

    def run(self):
        i = 0
        while not self.stop.is_set():
            i += 1
            key = self.rng.choice(KEYS)
            kind = self.rng.choices(["get", "leader_get", "put", "update", "create", "delete"],
                                    weights=[30, 15, 15, 25, 8, 7])[0]
            value = f"{self.n}-{i}".encode()
            self.record(self.one(kind, key, value))

    def one(self, kind, key, value):
        kv, t0 = self.kv, time.monotonic()
        try:
            if kind == "get":
                return self.read(key, t0, lambda: self.replica_get(key), consistent=False)
            if kind == "leader_get":
                return self.read(key, t0, lambda: self.leader_get(key), consistent=True)
            last = None
            if kind == "put":
                rev = kv.put(key, value)
            elif kind == "update":
                last = self.last.get(key, 0)
                rev = kv.update(key, value, last=last)
            elif kind == "create":
                rev = kv.create(key, value)
            else:
                kv.delete(key)
                rev, value = None, None
            if rev is not None:
                self.last[key] = rev
            return Op(kind, key, t0, time.monotonic(), "ok", value=value, last=last, revision=rev)
        except DEFINITE as exc:
            return Op(kind, key, t0, time.monotonic(), "fail", value=value, last=last, error=type(exc).__name__)
        except jss.JetStreamError as exc:  # a timeout, no leader, a lost connection: it may have been written
            return Op(kind, key, t0, time.monotonic(), "info", value=value, last=last, error=type(exc).__name__)

    def read(self, key, t0, get, consistent):
        try:
            revision, value, op = get()
        except jss.KeyDeletedError as exc:
            revision, value, op = exc.entry.revision, None, exc.operation.value
        except jss.KeyNotFoundError:
            revision, value, op = None, None, None
        except jss.JetStreamError as exc:
            return Op("get", key, t0, time.monotonic(), "info", error=type(exc).__name__)
        if revision is not None:
            self.last[key] = revision
        return Op("get", key, t0, time.monotonic(), "ok", value=value, revision=revision, read_op=op,
                  consistent=consistent)

    def replica_get(self, key):
        """kv.get(): a direct get, which any replica may answer."""
        e = self.kv.get(key)
        return e.revision, e.value, "PUT"

    def leader_get(self, key):
        """The stream leader's answer (a MSG.GET request, not a direct get)."""
        try:
            m = self.js.get_msg(STREAM, last_by_subject=f"$KV.{BUCKET}.{key}", direct=False)
        except jss.MsgNotFoundError:
            raise jss.KeyNotFoundError(key) from None
        op = (m.headers or {}).get("KV-Operation", "PUT")
        return m.seq, (m.data if op == "PUT" else None), op


def _faults(cluster, js, stop, done):
    """Until ``stop``: SIGKILL the stream's leader and start it again; freeze a follower 1-3 s."""
    rng = random.Random(7)
    while not stop.wait(rng.uniform(2, 4)):
        try:
            c = js.stream_info(STREAM).cluster
        except jss.JetStreamError:
            continue
        if not (c and c.leader and c.replicas):
            continue
        if len(done) % 2 == 0:
            leader = cluster.server(c.leader)
            leader.kill()
            stop.wait(rng.uniform(0.5, 2))
            leader.start()
            done.append(("killed", c.leader))
        else:
            follower = cluster.server(rng.choice([r.name for r in c.replicas]))
            with follower.paused():
                stop.wait(rng.uniform(1, 3))
            done.append(("paused", follower))


@pytest.mark.timeout(SECONDS + 140)
def test_an_r3_bucket_is_linearizable_across_a_leader_kill_and_a_frozen_follower(cluster):
    nc = jss.connect(cluster.urls, reconnect_time_wait=0.2, max_reconnect_attempts=-1)
    try:
        # set-up, faults and the final read wait long; the workload's calls give up after 3 s
        admin = nc.jetstream(timeout=10)
        wait_until(lambda: jetstream_answers(admin), timeout=30, interval=0.2)
        _bucket(admin)
        js = nc.jetstream(timeout=3)
        kv = js.key_value(BUCKET)
        history, lock = [], threading.Lock()

        def record(op):
            with lock:
                history.append(op)

        stop, done = threading.Event(), []
        clients = [Client(n, kv, js, stop, record) for n in range(8)]
        for c in clients:
            c.start()
        faults = threading.Thread(target=_faults, args=(cluster, admin, stop, done), daemon=True)
        faults.start()
        stop.wait(SECONDS)
        stop.set()
        faults.join(30)
        for c in clients:
            c.join(30)
        assert not faults.is_alive() and not any(c.is_alive() for c in clients)

        # Every server back and current; then the stream as it is.
        for s in cluster.servers:
            if not s.running:
                s.start()
        wait_until(lambda: _placed(admin), timeout=60, interval=0.2)
        reader = admin.key_value(BUCKET)
        final = []
        for key in KEYS:
            try:
                entries = reader.history(key)
            except jss.KeyNotFoundError:
                continue
            final += [Entry(key, e.revision, e.value, e.operation.value) for e in entries]
        report = check(history, final)
        print(f"\n{len(history)} operations in {SECONDS:.0f}s, faults {[d[0] for d in done]}\n{report}")
        assert report.violations == [], str(report)
        # The run tested something: faults happened, and each kind of call succeeded and was refused.
        assert {"killed", "paused"} <= {d[0] for d in done}, done
        ok = report.outcomes
        assert ok[("update", "ok")] and ok[("update", "fail")] and ok[("create", "ok")] and ok[("create", "fail")]
        assert ok[("put", "ok")] >= 50 and ok[("delete", "ok")] and report.reads >= 100, report
    finally:
        nc.close()
