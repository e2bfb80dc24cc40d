"""Object store: put a file-like object in chunks, read it back as a stream."""

import io
import os
import shutil

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

with jss.connect(NATS_URL) as nc:
    js = nc.jetstream()
    store = js.create_object_store("EX_FILES")
    try:
        payload = os.urandom(300_000)  # stored in 128 KiB chunks, digest checked on read
        info = store.put("report.bin", io.BytesIO(payload))
        print(f"put: {info.name}, {info.size} bytes in {info.chunks} chunks")

        out = io.BytesIO()
        with store.get("report.bin") as reader:  # a readable stream; never all in memory
            shutil.copyfileobj(reader, out)
        print(f"get: {len(out.getvalue())} bytes, same={out.getvalue() == payload}")
        print(f"list: {[o.name for o in store.list()]}")
    finally:
        js.delete_object_store("EX_FILES")
