"""Object store logic without a server: names and subjects, digests, the
stored JSON form, the bucket's stream config, chunking and option checks."""

from __future__ import annotations

import hashlib
import io
import json

import pytest

import jetstream_sync as jss
from jetstream_sync.object_store import model as obj
from jetstream_sync import options
from jetstream_sync.models import StreamConfig

ADR_EXAMPLE = {  # ADR-20's ObjectInfo example (metadata as nats.go writes it: a map)
    "name": "object-name",
    "description": "object-desc",
    "metadata": {"owner": "infra"},
    "headers": {"key1": ["foo"], "key2": ["bar", "baz"]},
    "options": {"link": {"bucket": "link-to-bucket", "name": "link-to-name"}, "max_chunk_size": 8196},
    "bucket": "object-bucket",
    "nuid": "CkuyLEX4z2hbyjj1aWCfiH",
    "size": 344000,
    "chunks": 42,
    "digest": "SHA-256=abcdefghijklmnopqrstuvwxyz=",
    "deleted": True,
}


# -- names, subjects, digests --------------------------------------------------------------


def test_subjects_follow_adr_20():
    assert obj.stream_name("MY-STORE") == "OBJ_MY-STORE"
    assert obj.chunk_subject("B", "NUID") == "$O.B.C.NUID"
    assert obj.meta_subject("B", "A") == "$O.B.M.QQ=="  # URL-safe base64, padded
    assert obj.meta_subject("B", "a?b>") == "$O.B.M.YT9iPg=="
    assert (obj.all_chunks("B"), obj.all_meta("B")) == ("$O.B.C.>", "$O.B.M.>")


@pytest.mark.parametrize(
    "data, digest",
    [  # values from nats.py's object-store tests
        (b"A", "SHA-256=VZrq0IJk1XldOQlxjN0Fq9SVcuhP5VWQ7vMaiKCP3_0="),
        (b"B", "SHA-256=335w5QIVRPSDS77mSp43if68S-gUcN9inK1t2wMyClw="),
        (b"C", "SHA-256=ayPA1fNdGxH5toPwsKYXNV3rESd9ka4JHTmcZVuHlA0="),
        (b"A" * (1024 * 1024 + 33), "SHA-256=mhT1pLyi9JlIaqwVmvt0wQp2x09kor_80Lirl4SDblA="),
    ],
)
def test_digest_value_and_decode(data, digest):
    assert obj.digest_value(hashlib.sha256(data)) == digest
    raw = hashlib.sha256(data).digest()
    assert obj.decode_digest(digest) == raw
    assert obj.decode_digest(digest.rstrip("=")) == raw  # padding may be missing
    assert obj.decode_digest("sha-256=" + digest[8:].replace("-", "+").replace("_", "/")) == raw


@pytest.mark.parametrize("value", [None, "", "SHA-256", "MD5=abc=", "SHA-256=!!!!", "SHA-256=YWJj", 5])
def test_decode_digest_refuses_what_is_not_a_sha256(value):
    with pytest.raises(jss.BadObjectMetaError):
        obj.decode_digest(value)


# -- the stored JSON ---------------------------------------------------------------------------


def test_adr_example_parses_and_writes_back_the_same():
    info = jss.ObjectInfo.from_wire(ADR_EXAMPLE)
    assert info.headers == {"key1": ["foo"], "key2": ["bar", "baz"]} and info.metadata == {"owner": "infra"}
    assert info.link == jss.ObjectLink("link-to-bucket", "link-to-name") and info.is_link
    assert (info.size, info.chunks, info.deleted, info.options.max_chunk_size) == (344000, 42, True, 8196)
    assert info.to_wire() == ADR_EXAMPLE


def test_unknown_fields_survive_a_round_trip_and_mtime_is_never_written():
    wire = {**ADR_EXAMPLE, "future": {"x": 1}, "mtime": "2024-01-01T00:00:00Z"}
    wire["options"] = {**wire["options"], "later": True}
    info = jss.ObjectInfo.from_wire(wire)
    out = info.to_wire()
    assert out["future"] == {"x": 1} and out["options"]["later"] is True and "mtime" not in out


def test_minimal_and_nats_py_style_infos():
    info = jss.ObjectInfo.from_wire({"name": "n", "bucket": "b", "nuid": "x", "headers": {"h": "v"}})
    assert (info.size, info.chunks, info.digest, info.deleted, info.options) == (0, 0, None, False, None)
    assert info.headers == {"h": ["v"]}  # nats.py wrote plain strings
    assert json.loads(json.dumps(info.to_wire())) == {
        "name": "n", "headers": {"h": ["v"]}, "bucket": "b", "nuid": "x", "size": 0, "chunks": 0,
    }  # fmt: skip
    bucket_link = jss.ObjectInfo.from_wire({"name": "d", "options": {"link": {"bucket": "B"}}})
    assert bucket_link.link == jss.ObjectLink("B") and bucket_link.to_wire()["options"] == {"link": {"bucket": "B"}}


@pytest.mark.parametrize(
    "wire", [[], "x", {"nuid": "no name"}, {"name": "n", "size": "big"}, {"name": "n", "headers": 1}]
)
def test_bad_infos_raise_bad_object_meta(wire):
    with pytest.raises(jss.BadObjectMetaError):
        jss.ObjectInfo.from_wire(wire)


def test_meta_is_a_copy():
    info = jss.ObjectInfo.from_wire(ADR_EXAMPLE)
    meta = info.meta
    meta.headers["key1"].append("more")
    meta.metadata["x"] = "y"
    assert info.headers["key1"] == ["foo"] and "x" not in info.metadata


# -- the bucket's stream ------------------------------------------------------------------------


def test_stream_config_defaults():
    cfg = jss.ObjectStoreConfig("MY-STORE").stream_config()
    assert isinstance(cfg, StreamConfig)
    assert (cfg.name, cfg.subjects) == ("OBJ_MY-STORE", ["$O.MY-STORE.C.>", "$O.MY-STORE.M.>"])
    assert (cfg.max_age, cfg.max_bytes, cfg.num_replicas, cfg.storage) == (0.0, -1, 1, "file")
    assert (cfg.discard, cfg.allow_rollup_hdrs, cfg.allow_direct, cfg.compression) == ("new", True, True, None)


def test_stream_config_options():
    cfg = jss.ObjectStoreConfig(
        "B", description="d", ttl=60, max_bytes=0, storage="memory", replicas=3, compression=True,
        metadata={"k": "v"}, placement={"cluster": "c", "tags": ["t"]},
    ).stream_config()  # fmt: skip
    assert (cfg.description, cfg.max_age, cfg.max_bytes, cfg.num_replicas) == ("d", 60.0, -1, 3)
    assert (cfg.storage, cfg.compression, cfg.metadata, cfg.placement.cluster) == ("memory", "s2", {"k": "v"}, "c")


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"bucket": "a.b"}, jss.InvalidObjectStoreNameError),
        ({"bucket": "a b"}, jss.InvalidObjectStoreNameError),
        ({"bucket": ""}, jss.InvalidObjectStoreNameError),
        ({"bucket": "é"}, jss.InvalidObjectStoreNameError),
        ({"bucket": "x" * 252}, jss.InvalidObjectStoreNameError),
        ({"bucket": "B", "ttl": -1}, jss.InvalidOptionError),
        ({"bucket": "B", "ttl": float("nan")}, jss.InvalidOptionError),
        ({"bucket": "B", "max_bytes": -2}, jss.InvalidOptionError),
        ({"bucket": "B", "max_bytes": True}, jss.InvalidOptionError),
        ({"bucket": "B", "replicas": 0}, jss.InvalidOptionError),
        ({"bucket": "B", "replicas": 1.0}, jss.InvalidOptionError),
        ({"bucket": "B", "compression": 1}, jss.InvalidOptionError),
        ({"bucket": "B", "metadata": {"k": None}}, jss.InvalidOptionError),
        ({"bucket": "B", "description": 1}, jss.InvalidOptionError),
        ({"bucket": "B", "placement": ["c"]}, jss.InvalidOptionError),
    ],
)
def test_stream_config_refuses_bad_options(fields, error):
    with pytest.raises(error):
        jss.ObjectStoreConfig(**fields).stream_config()


def test_store_config_merges_a_config_a_bucket_and_keywords():
    base = jss.ObjectStoreConfig("A", description="d")
    assert obj.store_config(base, None, {"ttl": 5}) == jss.ObjectStoreConfig("A", description="d", ttl=5)
    assert obj.store_config(None, base, {}) == base
    assert obj.store_config(None, "B", {"replicas": 3}).replicas == 3
    with pytest.raises(jss.InvalidOptionError):
        obj.store_config({"bucket": "A"}, None, {})
    with pytest.raises(jss.InvalidOptionError):
        obj.store_config(None, "A", {"history": 5})


# -- chunking -----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 4, 5, 9, 12])
@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview, io.BytesIO])
def test_chunks_of_bytes_and_readers(size, wrap):
    data = bytes(range(size))
    chunks = list(obj.chunks_of(wrap(data), 4))
    assert b"".join(chunks) == data and all(len(c) == 4 for c in chunks[:-1]) and len(chunks) == -(-size // 4)


def test_chunks_of_short_reads_and_text():
    class Trickle:
        def __init__(self, data):
            self.data = data

        def read(self, n):
            out, self.data = self.data[:2], self.data[2:]  # at most 2 bytes a read
            return out

    assert list(obj.chunks_of(Trickle(b"abcdefghij"), 4)) == [b"abcd", b"efgh", b"ij"]
    text = "añb€c" * 3  # multi-byte characters: a read of n characters overshoots n bytes
    chunks = list(obj.chunks_of(io.StringIO(text), 4))
    assert b"".join(chunks) == text.encode() and all(len(c) == 4 for c in chunks[:-1])
    assert list(obj.chunks_of("héllo", 3)) == [b"h\xc3\xa9", b"llo"]


def test_chunks_of_a_non_blocking_reader_with_no_data_yet_is_an_error_not_the_end():
    # read() -> None was taken for the end: put() stored the object cut short and returned success.
    reads = iter([b"abc", None, b"def", b""])
    with pytest.raises(jss.InvalidOptionError, match="non-blocking"):
        list(obj.chunks_of(type("NB", (), {"read": lambda self, n: next(reads)})(), 4))


def test_chunks_of_refuses_other_types_at_once():
    with pytest.raises(jss.InvalidOptionError):
        obj.chunks_of(42, 4)
    with pytest.raises(jss.InvalidOptionError):
        list(obj.chunks_of(type("R", (), {"read": lambda self, n: 7})(), 4))


# -- option checks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["A", "foo bar", "a.b", "*", ">", "объект", "x" * 2900])
def test_object_names_accepted(name):
    assert obj.check_object_name("B", name) == name


@pytest.mark.parametrize("name", ["", None, 5, b"A", "\udc80", "x" * 3100])
def test_object_names_refused(name):
    with pytest.raises(jss.InvalidObjectNameError):
        obj.check_object_name("B", name)


def test_chunk_size_headers_and_maps():
    assert options.chunk_size(1, 1024) == 1 and options.chunk_size(1024, 1024) == 1024
    assert options.chunk_size(10**9, None) == 10**9  # max_payload not known: no cap
    for bad in (0, -1, 1.5, True, "1", 1025):
        with pytest.raises(jss.InvalidOptionError):
            options.chunk_size(bad, 1024)
    assert options.object_headers({"a": "1", "b": ["2", "3"]}) == {"a": ["1"], "b": ["2", "3"]}
    assert options.object_headers(None) is None
    for bad in ({"a b": "1"}, {"a": 1}, {"a": ["x\n"]}, ["a"]):
        with pytest.raises(jss.InvalidOptionError):
            options.object_headers(bad)
    assert options.string_map("metadata", {"k": "v"}) == {"k": "v"}
    for bad in ({1: "v"}, {"k": 1}, "kv"):
        with pytest.raises(jss.InvalidOptionError):
            options.string_map("metadata", bad)


def test_error_tree():
    assert issubclass(jss.ObjectStoreNotFoundError, jss.StreamNotFoundError)
    assert issubclass(jss.ObjectDeletedError, jss.ObjectNotFoundError)
    assert issubclass(jss.ObjectNotFoundError, jss.NotFoundError)
    for cls in (jss.InvalidObjectStoreNameError, jss.InvalidObjectNameError, jss.ObjectLinkError):
        assert issubclass(cls, jss.InvalidOptionError) and issubclass(cls, ValueError)
    err = jss.DigestMismatchError("m", "SHA-256=a", "SHA-256=b")
    assert (err.expected, err.actual, str(err)) == ("SHA-256=a", "SHA-256=b", "m")
