"""Key-value codecs (path keys, base64 values) and a bucket that mirrors another."""

import os

import jetstream_sync as jss
from jetstream_sync import codecs
from jetstream_sync.testing import wait_until

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

with jss.connect(NATS_URL) as nc:
    js = nc.jetstream()
    js.create_key_value("EX_FILES", history=3)
    try:
        # Path-style keys become '.' tokens; values are stored base64-encoded.
        files = js.key_value("EX_FILES", key_codec=codecs.PathCodec(), value_codec=codecs.Base64Codec())
        files.put("/etc/app/config", b"debug: true")
        files.put("/etc/app/secrets", b"token: s3cr3t")
        files.put("/var/log/app", b"started")
        print(f"get: {files.get('/etc/app/config').value.decode()}")
        print(f"keys under /etc/app: {files.keys('/etc/app/*')}")

        raw = js.key_value("EX_FILES")  # the same bucket without codecs: what is stored
        print(f"stored as: {raw.keys('_root_.etc.app.*')[0]} = {raw.get('_root_.etc.app.config').value.decode()}")

        # Any text as a key: base64 per '.'-separated token, wildcards still work.
        anything = js.key_value("EX_FILES", key_codec=codecs.chain(codecs.PathCodec(), codecs.Base64Codec()))
        anything.put("/users/Ann Smith", b"admin")
        print(f"chain: {anything.keys('/users/*')}")

        # A mirror: a read replica (here in the same domain; mirror={"name": ..., "domain": "HUB"}
        # mirrors a bucket of another domain). Writes through it go to the origin.
        js.create_key_value("EX_FILES_COPY", mirror="EX_FILES")
        try:
            copy = js.key_value("EX_FILES_COPY", key_codec=codecs.PathCodec(), value_codec=codecs.Base64Codec())
            wait_until(lambda: "/var/log/app" in copy.keys(), timeout=10)
            copy.put("/var/log/app", b"written through the mirror")
            print(f"origin after a put on the mirror: {files.get('/var/log/app').value.decode()}")
        finally:
            js.delete_key_value("EX_FILES_COPY")
    finally:
        js.delete_key_value("EX_FILES")
