"""ADR-15 ack-subject parsing."""

import datetime

import pytest

import jetstream_sync as jss
from jetstream_sync._core.message import Msg, parse_metadata

TS = 1_700_000_000_123_456_789  # ns


def test_v1_nine_tokens():
    md = parse_metadata(f"$JS.ACK.ORDERS.billing.3.41.7.{TS}.12")
    assert (md.stream, md.consumer) == ("ORDERS", "billing")
    assert md.num_delivered == 3
    assert md.sequence.stream == 41
    assert md.sequence.consumer == 7
    assert md.num_pending == 12
    assert md.domain is None


def test_v2_with_domain_and_account_hash():
    md = parse_metadata(f"$JS.ACK.hub.ACCHASH.ORDERS.billing.5.10.20.{TS}.1.token")
    assert md.domain == "hub"
    assert (md.stream, md.consumer, md.num_delivered) == ("ORDERS", "billing", 5)
    assert (md.sequence.stream, md.sequence.consumer, md.num_pending) == (10, 20, 1)


def test_v2_eleven_tokens_accepted():
    md = parse_metadata(f"$JS.ACK.hub.ACCHASH.S.C.1.2.3.{TS}.0")
    assert (md.stream, md.sequence.stream) == ("S", 2)


def test_v2_underscore_domain_means_none():
    assert parse_metadata(f"$JS.ACK._.ACCHASH.S.C.1.2.3.{TS}.0.x").domain is None


def test_timestamp_is_aware_utc_with_microseconds():
    ts = parse_metadata(f"$JS.ACK.S.C.1.2.3.{TS}.0").timestamp
    assert ts.tzinfo is datetime.timezone.utc
    assert ts == datetime.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=datetime.timezone.utc)


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.a.b.1.2.3.4.5.6",  # 10 tokens
        "$JS.ACK.S.C.1.2.3.4",  # 8 tokens
        "$JS.NAK.S.C.1.2.3.4.5",  # not $JS.ACK
        "FOO.ACK.S.C.1.2.3.4.5",
        "$JS.ACK.S.C.x.2.3.4.5",  # not a number
        "_INBOX.abc",
        "",
    ],
)
def test_malformed_rejected(reply):
    with pytest.raises(jss.NotJSMessageError):
        parse_metadata(reply)


def test_msg_metadata_is_cached_and_size_counts_everything():
    reply = f"$JS.ACK.S.C.1.2.3.{TS}.0"
    msg = Msg("foo.bar", reply, b"x" * 10, {"A": "b"})
    assert msg.metadata is msg.metadata
    # subject 7 + reply + "NATS/1.0\r\n" (10) + "A: b\r\n" (6) + "\r\n" (2) + payload 10
    assert msg.size == 7 + len(reply) + 18 + 10
    assert Msg("FOO.123", "r" * 43, b"x" * 10).size == 60


def test_ack_without_reply_raises():
    with pytest.raises(jss.NotJSMessageError):
        Msg("a", "", b"").ack()


def test_nak_delay_validated():
    msg = Msg("a", f"$JS.ACK.S.C.1.2.3.{TS}.0", b"")
    with pytest.raises(jss.InvalidOptionError):
        msg.nak(delay=-1)


# Only plain ASCII decimal digits are numbers; empty tokens and
# timestamps outside datetime's range are not JetStream ack subjects.

V1 = "$JS.ACK.S.C.{}.{}.{}.{}.{}"
V2 = "$JS.ACK.hub.ACCHASH.S.C.{}.{}.{}.{}.{}.token"
GOOD = ["1", "2", "3", str(TS), "0"]


def _with(template, index, value):
    nums = list(GOOD)
    nums[index] = value
    return template.format(*nums)


@pytest.mark.parametrize("template", [V1, V2], ids=["v1", "v2"])
@pytest.mark.parametrize("index", range(5), ids=["delivered", "sseq", "cseq", "ts", "pending"])
def test_parse_metadata_rejects_negative_numbers(template, index):
    with pytest.raises(jss.NotJSMessageError):
        parse_metadata(_with(template, index, "-1"))


@pytest.mark.parametrize("template", [V1, V2], ids=["v1", "v2"])
@pytest.mark.parametrize("token", ["1_0", "+1", " 1", "1 ", "0x1", "1e3"])
def test_parse_metadata_rejects_underscores_signs_and_spaces(template, token):
    for index in range(5):
        with pytest.raises(jss.NotJSMessageError):
            parse_metadata(_with(template, index, token))


@pytest.mark.parametrize("template", [V1, V2], ids=["v1", "v2"])
@pytest.mark.parametrize(
    "token",
    [
        "\u0661\u0662",  # Arabic-Indic 12: int() gives 12
        "\u0967",  # Devanagari 1
        "\uff11",  # fullwidth 1
        "\u00b2",  # superscript 2
        "1\u0660",
    ],
)
def test_parse_metadata_rejects_non_ascii_digits(template, token):
    for index in range(5):
        with pytest.raises(jss.NotJSMessageError):
            parse_metadata(_with(template, index, token))


@pytest.mark.parametrize(
    "reply",
    [
        f"$JS.ACK..C.1.2.3.{TS}.0",  # v1, empty stream
        f"$JS.ACK.S..1.2.3.{TS}.0",  # v1, empty consumer
        f"$JS.ACK.hub.ACCHASH..C.1.2.3.{TS}.0",  # v2, empty stream
        f"$JS.ACK.hub.ACCHASH.S..1.2.3.{TS}.0",  # v2, empty consumer
        f"$JS.ACK.hub..S.C.1.2.3.{TS}.0",  # v2, empty account hash
        f"$JS.ACK..ACCHASH.S.C.1.2.3.{TS}.0",  # v2, empty domain
        f"$JS.ACK.hub.ACCHASH.S.C.1.2.3.{TS}.0.",  # v2, empty trailing token
    ],
)
def test_parse_metadata_rejects_empty_tokens(reply):
    with pytest.raises(jss.NotJSMessageError):
        parse_metadata(reply)


@pytest.mark.parametrize("template", [V1, V2], ids=["v1", "v2"])
@pytest.mark.parametrize("index", range(5), ids=["delivered", "sseq", "cseq", "ts", "pending"])
def test_parse_metadata_rejects_empty_numbers(template, index):
    with pytest.raises(jss.NotJSMessageError):
        parse_metadata(_with(template, index, ""))


@pytest.mark.parametrize("template", [V1, V2], ids=["v1", "v2"])
@pytest.mark.parametrize("ts", [str(10**21), str(10**30), "9" * 400])
def test_parse_metadata_rejects_timestamp_out_of_datetime_range(template, ts):
    with pytest.raises(jss.NotJSMessageError):
        parse_metadata(_with(template, 3, ts))


def test_parse_metadata_accepts_extreme_valid_values():
    last_us = 253402300799_999999  # 9999-12-31T23:59:59.999999Z
    big = str(2**64 - 1)
    md = parse_metadata(f"$JS.ACK.S.C.{big}.{big}.{big}.{last_us * 1000 + 999}.007")
    assert md.timestamp == datetime.datetime.max.replace(tzinfo=datetime.timezone.utc)
    assert (md.num_delivered, md.sequence.stream, md.num_pending) == (2**64 - 1, 2**64 - 1, 7)
    assert parse_metadata("$JS.ACK.S.C.0.0.0.0.0").timestamp == datetime.datetime(
        1970, 1, 1, tzinfo=datetime.timezone.utc
    )
