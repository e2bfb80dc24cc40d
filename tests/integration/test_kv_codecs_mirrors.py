"""KV codecs (ADR-54) and buckets that mirror or source others, on a real
server: what orbit.go's kvcodec tests (kv_test.go, filter_test.go,
chain_test.go) and nats.go's TestKeyValueMirrorCrossDomains /
TestKeyValueWithSources check, in blocking form."""

from __future__ import annotations

import pytest

import jetstream_sync as jss
from jetstream_sync import codecs
from jetstream_sync.testing import NatsServer, wait_until
from jetstream_sync.testing.server import free_port

PUT, DEL, PURGE = jss.KeyValueOp.PUT, jss.KeyValueOp.DEL, jss.KeyValueOp.PURGE
pytestmark = pytest.mark.timeout(90)


def _reverse(value: bytes) -> bytes:
    return value[::-1]


# (key codec, value codec, keys as the application writes them)
CODECS = {
    "base64": (codecs.Base64Codec(), codecs.Base64Codec(), ["Acme Inc.contact", "a key with spaces", "ünï.cödé"]),
    "path": (codecs.PathCodec(), None, ["/users/ann", "users/bob", "/"]),
    "chain": (codecs.chain(codecs.PathCodec(), codecs.Base64Codec()), codecs.chain(codecs.FuncCodec(_reverse, _reverse), codecs.Base64Codec()),
              ["/users/ann smith", "rel/a b"]),  # fmt: skip
    "noop": (codecs.NoOpCodec(), codecs.NoOpCodec(), ["plain.key", "x"]),
    "custom value": (None, codecs.FuncCodec(_reverse, _reverse), ["k1", "k2"]),
}


@pytest.mark.parametrize("name", sorted(CODECS))
def test_each_codec_round_trips_through_every_operation(js, name):
    key_codec, value_codec, keys = CODECS[name]
    raw = js.create_key_value("CODEC", history=10)
    kv = js.key_value("CODEC", key_codec=key_codec, value_codec=value_codec)
    for i, key in enumerate(keys):
        rev = kv.put(key, f"value {i}")
        entry = kv.get(key)
        assert (entry.key, entry.value, entry.revision) == (key, f"value {i}".encode(), rev)
        stored_key = key_codec.encode(key) if key_codec else key
        stored = raw.get(stored_key)  # what another client without the codec sees
        assert stored.value == (value_codec.encode(f"value {i}".encode()) if value_codec else f"value {i}".encode())
    assert kv.keys() == sorted(keys)
    assert raw.keys() == sorted(key_codec.encode(k) if key_codec else k for k in keys)

    first = keys[0]
    rev = kv.update(first, b"second", kv.get(first).revision)
    with pytest.raises(jss.KeyExistsError):
        kv.create(first, b"again")
    kv.delete(first)
    with pytest.raises(jss.KeyDeletedError) as err:
        kv.get(first)
    assert err.value.entry.key == first
    assert kv.get(first, revision=rev).value == b"second"
    assert kv.create(first, b"third") > rev
    history = kv.history(first)
    assert [(e.key, e.value, e.operation) for e in history] == [
        (first, b"value 0", PUT), (first, b"second", PUT), (first, b"", DEL), (first, b"third", PUT)]  # fmt: skip
    kv.purge(first)
    assert first not in kv.keys()

    with kv.watch_all(ignore_deletes=True) as w:
        initial = []
        while (entry := w.next(timeout=5)) is not None:
            initial.append((entry.key, entry.value))
        assert sorted(initial) == sorted((k, f"value {i}".encode()) for i, k in enumerate(keys) if k != first)
        kv.put(first, b"watched")
        entry = w.next(timeout=5)
        assert (entry.key, entry.value, entry.operation) == (first, b"watched", PUT)


def test_wildcards_go_through_a_codec_that_keeps_them(js):
    js.create_key_value("PATHS")
    kv = js.key_value("PATHS", key_codec=codecs.PathCodec())
    for path in ["/users/ann", "/users/bob", "/users/bob/settings", "/groups/admins", "relative/x"]:
        kv.put(path, b"v")
    assert kv.keys("/users/*") == ["/users/ann", "/users/bob"]
    assert kv.keys(["/users/>", "relative/*"]) == ["/users/ann", "/users/bob", "/users/bob/settings", "relative/x"]
    with kv.watch("/users/*", updates_only=True) as w:
        kv.put("/groups/admins", b"not watched")
        kv.put("/users/carl", b"watched")
        entry = w.next(timeout=5)
        assert (entry.key, entry.value) == ("/users/carl", b"watched")

    b64 = js.create_key_value("B64").with_codecs(key_codec=codecs.Base64Codec())
    for key in ["user.1", "user.2", "app.x.config.a", "other.1"]:
        b64.put(key, b"v")
    assert b64.keys("user.*") == ["user.1", "user.2"]
    assert b64.keys("app.*.config.>") == ["app.x.config.a"]
    with b64.watch("user.*") as w:
        assert sorted(w.next(timeout=5).key for _ in range(2)) == ["user.1", "user.2"]
        assert w.next(timeout=5) is None


def test_a_codec_that_cannot_keep_wildcards_refuses_patterns_before_sending(js):
    js.create_key_value("UPPER")
    kv = js.key_value("UPPER", key_codec=codecs.FuncCodec(str.upper, str.lower))
    kv.put("a.b", b"v")
    assert kv.keys() == ["a.b"] and kv.keys("a.b") == ["a.b"]
    for call in (lambda: kv.keys("a.*"), lambda: kv.watch("a.>")):
        with pytest.raises(jss.InvalidKeyError, match="wildcards"):
            call()


def test_keys_another_client_stored_raise_a_codec_error(js):
    raw = js.create_key_value("MIXED")
    raw.put("x", b"not base64 either")  # a 1-character token is no base64
    kv = raw.with_codecs(key_codec=codecs.Base64Codec(), value_codec=codecs.Base64Codec())
    with pytest.raises(jss.KeyValueCodecError):
        kv.keys()
    with pytest.raises(jss.KeyValueCodecError) as err:
        js.key_value("MIXED", value_codec=codecs.Base64Codec()).get("x")
    assert err.value.__cause__ is not None
    kv.put("good key", b"v")
    with kv.watch_all() as w:  # the bad entry raises; the watch goes on
        with pytest.raises(jss.KeyValueCodecError):
            w.next(timeout=5)
        assert (w.next(timeout=5).key, w.next(timeout=5)) == ("good key", None)
    # An invalid encoded key is refused before sending.
    bad = raw.with_codecs(key_codec=codecs.FuncCodec(lambda k: k + " !", str))
    with pytest.raises(jss.InvalidKeyError, match="encodes to an invalid key"):
        bad.put("a", b"v")


def test_bad_codecs_are_refused_before_the_bucket_is_looked_up(js, nc):
    for opts in ({"key_codec": object()}, {"value_codec": "base64"}, {"key_codec": codecs.PathCodec(), "value_codec": 1}):
        with pytest.raises(jss.InvalidOptionError):
            js.key_value("NO_SUCH_BUCKET", **opts)  # no BucketNotFoundError: nothing was asked


# -- mirrors and sources ------------------------------------------------------------


def _seed(kv):
    kv.put("name", b"derek")
    kv.put("age", b"22")
    kv.put("v", b"v")
    kv.delete("v")


def _value(kv, key):
    try:
        return kv.get(key).value
    except jss.KeyNotFoundError:
        return None


def test_a_mirror_bucket_reads_the_origin_and_writes_to_it(js):
    origin = js.create_key_value("TEST")
    _seed(origin)
    mirror = js.create_key_value("MIRROR", mirror="TEST")
    cfg = js.stream_info("KV_MIRROR").config
    assert cfg.mirror_direct and not cfg.subjects and cfg.mirror.name == "KV_TEST"
    assert mirror.mirror_of == "TEST" and mirror.status().config.mirror.name == "KV_TEST"
    assert js.create_key_value("MIRROR", mirror="TEST").bucket == "MIRROR"  # idempotent
    wait_until(lambda: js.stream_info("KV_MIRROR").state.messages == 3, timeout=10)

    mkv = js.key_value("MIRROR")
    assert mkv.get("name").value == b"derek" and mkv.keys() == ["age", "name"]
    with pytest.raises(jss.KeyDeletedError):
        mkv.get("v")
    with mkv.watch_all(updates_only=True) as w:
        mkv.put("name", b"rip")  # lands in the origin, comes back through the mirror
        assert origin.get("name").value == b"rip"
        entry = w.next(timeout=10)
        assert (entry.key, entry.value, entry.bucket) == ("name", b"rip", "MIRROR")
        origin.put("v", b"vv")
        entry = w.next(timeout=10)
        assert (entry.key, entry.value) == ("v", b"vv")
    mkv.delete("v")
    wait_until(lambda: _value(origin, "v") is None, timeout=10)
    wait_until(lambda: _value(mkv, "v") is None, timeout=10)
    assert [e.value for e in mkv.history("name")] == [b"rip"]


def test_a_mirror_through_codecs(js):
    origin = js.create_key_value("ORIG")
    coded = origin.with_codecs(key_codec=codecs.PathCodec(), value_codec=codecs.Base64Codec())
    coded.put("/a/b", b"one")
    js.create_key_value("REPLICA", mirror={"name": "ORIG"})
    replica = js.key_value("REPLICA", key_codec=codecs.PathCodec(), value_codec=codecs.Base64Codec())
    wait_until(lambda: _value(replica, "/a/b") == b"one", timeout=10)
    replica.put("/a/c", b"two")
    assert coded.get("/a/c").value == b"two"
    wait_until(lambda: replica.keys("/a/*") == ["/a/b", "/a/c"], timeout=10)


def test_sources_merge_buckets(js):
    a, b = js.create_key_value("A"), js.create_key_value("B")
    a.put("from.a", b"1")
    b.put("from.b", b"2")
    merged = js.create_key_value("MERGED", sources=["A", {"name": "KV_B"}])
    cfg = js.stream_info("KV_MERGED").config
    assert cfg.subjects == ["$KV.MERGED.>"]
    assert sorted((s.name, s.subject_transforms[0].src, s.subject_transforms[0].dest) for s in cfg.sources) == [
        ("KV_A", "$KV.A.>", "$KV.MERGED.>"), ("KV_B", "$KV.B.>", "$KV.MERGED.>")]  # fmt: skip
    wait_until(lambda: merged.keys() == ["from.a", "from.b"], timeout=10)
    a.put("from.a", b"updated")
    wait_until(lambda: _value(merged, "from.a") == b"updated", timeout=10)
    merged.put("own", b"3")  # a sourcing bucket takes writes of its own
    assert merged.get("own").value == b"3" and a.keys() == ["from.a"]


@pytest.mark.parametrize(
    "fields",
    [dict(mirror="TEST", sources=["A"]), dict(mirror="no such.bucket"), dict(sources=["ok", 5]), dict(sources="A")],
)
def test_bad_mirror_or_sources_raise_before_anything_is_sent(js, fields):
    with pytest.raises(jss.InvalidOptionError):
        js.create_key_value("BAD", **fields)
    assert "KV_BAD" not in js.stream_names()


HUB_CONF = "jetstream {{ domain: HUB }}\nleafnodes {{ port: {leaf} }}\n"
LEAF_CONF = 'jetstream {{ domain: LEAF }}\nleafnodes {{ remotes = [ {{ url: "nats-leaf://127.0.0.1:{leaf}" }} ] }}\n'


def test_a_mirror_of_a_bucket_in_another_domain(tmp_path):
    # nats.go's TestKeyValueMirrorCrossDomains: a leaf node's bucket mirrors the hub's.
    leaf_port = free_port()
    (tmp_path / "hub.conf").write_text(HUB_CONF.format(leaf=leaf_port))
    (tmp_path / "leaf.conf").write_text(LEAF_CONF.format(leaf=leaf_port))
    with NatsServer(config=str(tmp_path / "hub.conf")) as hub, NatsServer(config=str(tmp_path / "leaf.conf")) as leaf:
        with jss.connect(hub.url) as hnc, jss.connect(leaf.url) as lnc:
            kv = hnc.jetstream().create_key_value("TEST")
            _seed(kv)
            ljs = lnc.jetstream()
            wait_until(lambda: _leaf_sees_hub(lnc), timeout=20)
            ljs.create_key_value("MIRROR", mirror={"name": "TEST", "domain": "HUB"})
            assert ljs.stream_info("KV_MIRROR").config.mirror.external.api == "$JS.HUB.API"
            wait_until(lambda: ljs.stream_info("KV_MIRROR").state.messages == 3, timeout=20)
            mkv = ljs.key_value("MIRROR")
            mkv.put("name", b"rip")
            wait_until(lambda: _value(kv, "name") == b"rip", timeout=10)
            mkv.put("v", b"vv")
            wait_until(lambda: _value(kv, "v") == b"vv", timeout=10)
            mkv.delete("v")
            wait_until(lambda: _value(kv, "v") is None, timeout=10)
            with mkv.watch_all() as w:
                assert w.next(timeout=10) is not None
            rkv = hnc.jetstream(domain="HUB").key_value("TEST")  # the origin, by its domain (as nats.go's test)
            rkv.put("name", b"ivan")
            wait_until(lambda: _value(mkv, "name") == b"ivan", timeout=10)


def _leaf_sees_hub(lnc) -> bool:
    try:
        lnc.jetstream(domain="HUB", timeout=1.0).account_info()
        return True
    except jss.JetStreamError:
        return False
