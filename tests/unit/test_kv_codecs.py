"""KV codecs (ADR-54) and a bucket's mirror / sources config, without a server.

The codec cases are the ones orbit.go's kvcodec tests check (codec_test.go,
chain_codec_test.go): the same inputs give the same stored keys, so a bucket
written here reads the same there."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import jetstream_sync as jss
from jetstream_sync import codecs, errors
from jetstream_sync.kv import manage
from jetstream_sync.kv.bucket import KeyValue
from jetstream_sync.kv.codecs import Codecs
from jetstream_sync.models import ExternalStream, StreamSource, SubjectTransform


def test_base64_encodes_each_token_url_safe_without_padding():
    b64 = codecs.Base64Codec()
    key = "test.key.with.special.chars!@#$%^&*()"
    assert b64.encode(key) == "dGVzdA.a2V5.d2l0aA.c3BlY2lhbA.Y2hhcnMhQCMkJV4mKigp"
    assert b64.decode(b64.encode(key)) == key
    assert b64.encode("Acme Inc") == "QWNtZSBJbmM"  # no '=' padding, no '+' or '/'
    assert b64.decode(b64.encode(b"\xff\xfe value")) == b"\xff\xfe value"
    assert b"=" not in b64.encode(b"ab")


@pytest.mark.parametrize(
    "pattern, stored",
    [("user.123", "dXNlcg.MTIz"), ("user.*", "dXNlcg.*"), ("user.>", "dXNlcg.>"), ("app.*.config.>", "YXBw.*.Y29uZmln.>")],
)
def test_base64_filters_keep_wildcards(pattern, stored):
    assert codecs.Base64Codec().encode_filter(pattern) == stored


@pytest.mark.parametrize(
    "path, stored, read_back",
    [
        ("/foo/bar", "_root_.foo.bar", "/foo/bar"),
        ("foo/bar", "foo.bar", "foo/bar"),
        ("/foo/bar/baz/qux", "_root_.foo.bar.baz.qux", "/foo/bar/baz/qux"),
        ("/foo", "_root_.foo", "/foo"),
        ("foo/bar/", "foo.bar", "foo/bar"),
        ("/", "_root_", "/"),
        ("/foo/bar/", "_root_.foo.bar", "/foo/bar"),
    ],
)
def test_path_codec(path, stored, read_back):
    pc = codecs.PathCodec()
    assert pc.encode(path) == stored and pc.decode(stored) == read_back
    assert pc.encode(b"a/b") == b"a/b"  # values pass


@pytest.mark.parametrize(
    "pattern, stored",
    [("/user/123", "_root_.user.123"), ("/user/*", "_root_.user.*"), ("/user/>", "_root_.user.>"),
     ("/app/*/config/>", "_root_.app.*.config.>"), ("user/*", "user.*")],
)  # fmt: skip
def test_path_filters(pattern, stored):
    assert codecs.PathCodec().encode_filter(pattern) == stored


def test_noop_leaves_everything():
    noop = codecs.NoOpCodec()
    assert noop.encode("a.b") == noop.decode("a.b") == "a.b"
    assert noop.encode(b"x") == b"x" and noop.encode_filter("a.*") == "a.*"


def test_chain_encodes_in_order_and_decodes_in_reverse():
    ch = codecs.chain(codecs.PathCodec(), codecs.Base64Codec())
    stored = ch.encode("/users/ann smith")
    assert stored == "X3Jvb3Rf.dXNlcnM.YW5uIHNtaXRo"
    assert ch.decode(stored) == "/users/ann smith"
    assert ch.encode_filter("/users/*") == "X3Jvb3Rf.dXNlcnM.*"
    values = codecs.chain(codecs.Base64Codec(), codecs.Base64Codec())
    assert values.decode(values.encode(b"v")) == b"v"


def test_a_codec_without_encode_filter_takes_plain_keys_only():
    upper = codecs.FuncCodec(str.upper, str.lower)
    assert Codecs(upper).encode_filter("a.b") == "A.B"
    with pytest.raises(errors.InvalidKeyError, match="wildcards"):
        Codecs(upper).encode_filter("a.*")
    with pytest.raises(errors.InvalidKeyError, match="wildcards"):
        Codecs(codecs.chain(codecs.PathCodec(), upper)).encode_filter("a/>")
    assert Codecs(codecs.chain(codecs.PathCodec(), upper)).encode_filter("a/b") == "A.B"


def test_codec_failures_and_wrong_types_are_codec_errors():
    with pytest.raises(errors.KeyValueCodecError, match="decode") as err:
        Codecs(codecs.Base64Codec()).decode_key("not base64!")
    assert err.value.__cause__ is not None
    with pytest.raises(errors.KeyValueCodecError, match="returned int"):
        Codecs(value=codecs.FuncCodec(lambda v: 5, lambda v: v)).encode_value(b"x")
    assert Codecs(value=codecs.FuncCodec(bytearray, bytes)).encode_value("é") == "é".encode()  # str values are UTF-8


class _NoDecode:
    def encode(self, value):
        return value


# Every bad codec or mirror/sources setting raises here, before a connection is even made.
BAD_OPTIONS = [
    (dict(key_codec=_NoDecode()), "no callable decode"),
    (dict(value_codec="base64"), "no callable encode or decode"),
    (dict(key_codec=SimpleNamespace(encode=str, decode=str, encode_filter=5)), "encode_filter that is not callable"),
]


@pytest.mark.parametrize("opts, message", BAD_OPTIONS)
def test_bad_codecs_are_refused_before_anything_is_sent(opts, message):
    js = SimpleNamespace()  # no connection at all: any request would fail with AttributeError
    with pytest.raises(errors.InvalidOptionError, match=message):
        manage.open_bucket(js, "B", **opts)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: codecs.chain(), "at least one codec"),
        (lambda: codecs.chain(codecs.PathCodec(), object()), "codec 1 of the chain"),
        (lambda: codecs.FuncCodec(None, bytes), "encode must be callable"),
        (lambda: codecs.FuncCodec(bytes, bytes, encode_filter="x"), "encode_filter must be callable"),
    ],
)
def test_bad_codec_building_blocks(make, message):
    with pytest.raises(errors.InvalidOptionError, match=message):
        make()


BAD_BUCKET_CONFIGS = [
    (dict(mirror="A", sources=["B"]), "mirror and sources are mutually exclusive"),
    (dict(mirror="bad name"), "mirror: bucket name"),
    (dict(mirror="KV_"), "mirror: bucket name"),
    (dict(sources=["ok", "no.dots"]), r"sources\[1\]: bucket name"),
    (dict(sources="A"), "sources must be a list"),
    (dict(mirror=5), "mirror must be a bucket name, a StreamSource or a dict"),
    (dict(mirror={"name": "A", "domain": "bad domain"}), "domain must be"),
    (dict(mirror={"name": "A", "domain": "HUB", "external": {"api": "$JS.X.API"}}), "domain or external, not both"),
]


@pytest.mark.parametrize("fields, message", BAD_BUCKET_CONFIGS)
def test_bad_mirror_or_sources_are_refused_before_anything_is_sent(fields, message):
    js = SimpleNamespace()
    with pytest.raises(errors.InvalidOptionError, match=message):
        manage.upsert_bucket(js, "B", None, fields, "create")


def test_a_mirror_bucket_has_no_subjects_and_mirror_direct():
    cfg = manage.kv_config("M", None, {"mirror": {"name": "ORIGIN", "domain": "HUB"}})
    scfg = manage.stream_config(cfg)
    assert scfg.subjects is None and scfg.mirror_direct is True and scfg.sources is None
    assert scfg.mirror.name == "KV_ORIGIN" and scfg.mirror.external.api == "$JS.HUB.API"
    assert not scfg.mirror.subject_transforms  # a mirror keeps the origin's subjects


def test_sources_map_their_keys_into_the_bucket():
    given = StreamSource(name="KV_A")
    cfg = manage.kv_config("M", None, {"sources": [given, "B", {"name": "M", "domain": "HUB"},
                                                   StreamSource(name="RAW", subject_transforms=[SubjectTransform(src="x.>", dest="$KV.M.x.>")])]})  # fmt: skip
    scfg = manage.stream_config(cfg)
    assert scfg.subjects == ["$KV.M.>"]
    a, b, same, raw = scfg.sources
    assert (a.name, a.subject_transforms[0].src, a.subject_transforms[0].dest) == ("KV_A", "$KV.A.>", "$KV.M.>")
    assert (b.name, b.subject_transforms[0].src) == ("KV_B", "$KV.B.>")
    assert same.name == "KV_M" and not same.subject_transforms  # the same bucket in another domain
    assert raw.name == "RAW" and raw.subject_transforms[0].src == "x.>"  # given transforms: as given
    assert given.subject_transforms is None  # the caller's object is left alone


@pytest.mark.parametrize(
    "mirror, api, pre, put_pre",
    [
        (None, "$JS.API", "$KV.B.", "$KV.B."),
        (StreamSource(name="KV_O"), "$JS.API", "$KV.O.", "$KV.O."),
        (StreamSource(name="KV_O"), "fromA", "$KV.O.", "fromA.$KV.O."),
        (StreamSource(name="KV_O", external=ExternalStream(api="$JS.HUB.API")), "$JS.API", "$KV.O.", "$JS.HUB.API.$KV.O."),
    ],
)
def test_a_mirror_handle_reads_the_origins_keys_and_writes_to_the_origin(mirror, api, pre, put_pre):
    info = SimpleNamespace(config=SimpleNamespace(name="KV_B", allow_direct=True, mirror=mirror))
    kv = KeyValue(SimpleNamespace(api_prefix=api), info)
    assert (kv._pre, kv._put_pre, kv.mirror_of) == (pre, put_pre, None if mirror is None else "O")


def test_with_codecs_checks_and_keeps_the_bucket():
    info = SimpleNamespace(config=SimpleNamespace(name="KV_B", allow_direct=True, mirror=None))
    kv = KeyValue(SimpleNamespace(api_prefix="$JS.API"), info)
    coded = kv.with_codecs(key_codec=codecs.PathCodec())
    assert coded.bucket == "B" and isinstance(coded, jss.KeyValue)
    with pytest.raises(errors.InvalidOptionError, match="value_codec"):
        kv.with_codecs(value_codec=object())
