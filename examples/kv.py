"""Key-value bucket: put, get, optimistic update, create-if-absent, watch."""

import os

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

with jss.connect(NATS_URL) as nc:
    js = nc.jetstream()
    kv = js.create_key_value("EX_CONFIG", history=5)
    try:
        rev = kv.put("db.url", b"postgres://db-1/app")
        entry = kv.get("db.url")
        print(f"get: {entry.key} = {entry.value.decode()} (revision {entry.revision})")

        kv.update("db.url", b"postgres://db-2/app", last=rev)  # only if rev is still the latest
        try:
            kv.update("db.url", b"postgres://db-3/app", last=rev)
        except jss.KeyWrongLastSequenceError:
            print("update: refused, someone else wrote first")

        kv.create("lock.nightly", b"host-a")
        try:
            kv.create("lock.nightly", b"host-b")
        except jss.KeyExistsError:
            print("create: the lock is taken")

        with kv.watch("db.>") as w:
            first = w.next(timeout=5)  # the current value first; then None; then updates
            print(f"watch: {first.key} = {first.value.decode()}")
        print(f"history: {len(kv.history('db.url'))} revisions of db.url")
    finally:
        js.delete_key_value("EX_CONFIG")
