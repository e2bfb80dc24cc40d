"""Argument validation in jetstream_sync.options: durations, subjects, names,
headers and wire limits. Pure functions, no server."""

import pytest

import jetstream_sync as jss
from jetstream_sync import errors, options
from jetstream_sync.options import (
    MAX_CONTROL_LINE,
    MAX_DURATION,
    ack_reply,
    api_prefix,
    control_line,
    duration,
    header_block,
    name,
    optional_timeout,
    payload_size,
    subject,
    term_reason,
)

INF = float("inf")
NAN = float("nan")


def test_invalid_option_error_is_a_value_error():
    assert issubclass(errors.InvalidOptionError, ValueError)
    assert issubclass(errors.InvalidOptionError, jss.InvalidOptionError)


# duration / optional_timeout


def test_max_duration_fits_a_go_duration_in_nanoseconds():
    assert MAX_DURATION >= 365 * 86400  # generous
    assert int(MAX_DURATION * 1e9) < 2**63 - 1
    assert int(duration("d", MAX_DURATION) * 1e9) < 2**63 - 1


@pytest.mark.parametrize(
    "value, kwargs, expected",
    [
        (1, {}, 1.0),
        (0.001, {}, 0.001),
        (2.5, {"minimum": 2.5}, 2.5),
        (30, {"minimum": 0.5, "maximum": 30}, 30.0),
        (0, {"allow_zero": True}, 0.0),
        (0.0, {"allow_zero": True}, 0.0),
        (MAX_DURATION, {}, MAX_DURATION),
        (int(MAX_DURATION), {}, float(int(MAX_DURATION))),
    ],
)
def test_duration_accepts_finite_positive_numbers_in_range(value, kwargs, expected):
    result = duration("expires", value, **kwargs)
    assert result == expected and type(result) is float


@pytest.mark.parametrize("value", [NAN, INF, -INF])
def test_duration_rejects_nan_and_infinity(value):
    with pytest.raises(errors.InvalidOptionError, match="expires must be a finite number"):
        duration("expires", value)
    with pytest.raises(errors.InvalidOptionError, match="finite"):
        duration("expires", value, allow_zero=True)


@pytest.mark.parametrize("value", [True, False, "1", b"1", None, [1], 1j])
def test_duration_rejects_non_numbers_and_bools(value):
    with pytest.raises(errors.InvalidOptionError, match=r"timeout must be a number of seconds, got"):
        duration("timeout", value)


@pytest.mark.parametrize(
    "value, kwargs, message",
    [
        (0, {}, r"must be > 0 seconds, got 0"),
        (0.0, {}, r"must be > 0 seconds"),
        (-1, {}, r"must be > 0 seconds, got -1"),
        (-0.001, {"allow_zero": True}, r"must be >= 0 seconds, got -0.001"),
        (0.4, {"minimum": 0.5}, r"must be at least 0.5s, got 0.4"),
        (31, {"maximum": 30}, r"must be at most 30s, got 31"),
        (MAX_DURATION * 1.01, {}, r"must be at most"),
        (10**400, {}, r"must be at most"),  # an int too big for a float
        (MAX_DURATION + 1, {"maximum": MAX_DURATION * 10}, r"must be at most"),  # maximum is capped
    ],
)
def test_duration_rejects_out_of_range_values(value, kwargs, message):
    with pytest.raises(errors.InvalidOptionError, match=r"^wait " + message):
        duration("wait", value, **kwargs)


def test_optional_timeout_accepts_none_zero_and_positive():
    assert optional_timeout("timeout", None) is None
    assert optional_timeout("timeout", 0) == 0.0
    assert optional_timeout("timeout", 2.5) == 2.5


@pytest.mark.parametrize("value", [NAN, INF, -INF, -1, -0.1, True, "5", MAX_DURATION * 2])
def test_optional_timeout_rejects_negative_non_finite_and_non_numbers(value):
    with pytest.raises(errors.InvalidOptionError, match="^timeout "):
        optional_timeout("timeout", value)


def test_optional_timeout_tells_to_use_none_for_no_limit():
    with pytest.raises(errors.InvalidOptionError, match=r"finite number of seconds \(use None for no limit\)"):
        optional_timeout("timeout", INF)


@pytest.mark.parametrize("value", [NAN, INF, -INF, -MAX_DURATION * 2])
def test_a_signed_duration_refuses_what_is_not_finite_or_out_of_range(value):
    with pytest.raises(errors.InvalidOptionError, match="^older_than "):
        duration("older_than", value, allow_zero=True, allow_negative=True)


@pytest.mark.parametrize("value", [-1, -0.5, 0, 1800])
def test_a_signed_duration_keeps_a_negative_meaning_none(value):
    assert duration("older_than", value, allow_zero=True, allow_negative=True) == value


@pytest.mark.parametrize(
    "given",
    [
        {"connect_timeout": INF},
        {"connect_timeout": 0},
        {"reconnect_time_wait": NAN},
        {"reconnect_time_wait": -1},
        {"ping_interval": -INF},
        {"drain_timeout": "30"},
        {"flush_timeout": INF},
    ],
)
def test_connect_durations_refuses_what_nats_py_would_wait_on_forever_or_choke_on(given):
    with pytest.raises(errors.InvalidOptionError, match=next(iter(given))):
        options.connect_durations(given)


def test_connect_durations_accepts_finite_values_and_none_for_flush_timeout():
    options.connect_durations(
        {"connect_timeout": 2, "reconnect_time_wait": 0, "ping_interval": 120, "drain_timeout": 30.5, "flush_timeout": None}
    )


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "Infinity", "-5", "0", "soon", ""])
def test_duration_text_refuses_what_is_not_a_finite_positive_number(text):
    with pytest.raises(errors.InvalidOptionError, match="^fetchTimeout "):
        options.duration_text("fetchTimeout", text, 10.0)


def test_duration_text_reads_seconds_or_gives_the_default():
    assert options.duration_text("fetchTimeout", "2.5", 10.0) == 2.5
    assert options.duration_text("fetchTimeout", None, 10.0) == 10.0


# subject


@pytest.mark.parametrize(
    "value",
    ["FOO", "foo.bar", "$JS.API.INFO", "_INBOX.abc123", "a-b_c.d/e:f", "ä.ö.ü", "x" * 1000, "1.2.3"],
)
def test_subject_accepts_literal_subjects(value):
    assert subject(value) == value
    assert subject(value, wildcards=True) == value


@pytest.mark.parametrize("value", ["*", ">", "foo.*", "foo.>", "*.bar.>", "foo.*.baz", "*.*"])
def test_subject_accepts_whole_token_wildcards_only_when_allowed(value):
    assert subject(value, wildcards=True) == value
    with pytest.raises(errors.InvalidOptionError, match="must not contain wildcards"):
        subject(value)


@pytest.mark.parametrize(
    "value",
    [
        ".foo",
        "foo.",
        "foo..bar",
        ".",
        "..",
        "FOO.>.123",
        ">.foo",
        "fo*",
        "foo.b>r",
        "foo.**",
        "foo.>>",
    ],
)
def test_subject_rejects_empty_tokens_and_misplaced_wildcards(value):
    for wildcards in (False, True):
        with pytest.raises(errors.InvalidOptionError, match=r"^filter_subject"):
            subject(value, what="filter_subject", wildcards=wildcards)


@pytest.mark.parametrize(
    "value", ["foo bar", "foo\tbar", "foo\r", "foo\nbar", "foo\x00", "foo\x7f", "foo\x0c", "a.\u00a0.b", "\u2028"]
)
def test_subject_rejects_whitespace_and_control_characters(value):
    with pytest.raises(errors.InvalidOptionError, match="whitespace or control characters"):
        subject(value, wildcards=True)


@pytest.mark.parametrize("value", ["", None, b"foo", 1, ["foo"], "\ud800"])
def test_subject_rejects_empty_non_str_and_non_utf8(value):
    with pytest.raises(errors.InvalidOptionError, match="^subject"):
        subject(value)


# name


@pytest.mark.parametrize(
    "value", ["ORDERS", "my-stream_1", "a", "x" * 255, "é" * 127, "Ünïcødé", "$weird:but#ok", "hub-1"]
)
def test_name_accepts_adr6_names_up_to_255_bytes(value):
    assert name("stream", value) == value


@pytest.mark.parametrize(
    "value, reason",
    [
        ("", "non-empty string"),
        (None, "non-empty string"),
        (b"ORDERS", "non-empty string"),
        (5, "non-empty string"),
        ("a.b", "must not contain"),
        ("a*", "must not contain"),
        ("a>", "must not contain"),
        ("a/b", "must not contain"),
        ("a\\b", "must not contain"),
        ("a b", "must not contain"),
        ("a\tb", "must not contain"),
        ("a\nb", "must not contain"),
        ("a\x00", "must not contain"),
        ("a\x1b", "must not contain"),
        ("x" * 256, "at most 255 bytes, got 256"),
        ("é" * 128, "at most 255 bytes, got 256"),  # bytes, as the server counts
        ("\udfff", "UTF-8"),
    ],
)
def test_name_rejects_empty_reserved_characters_and_long_names(value, reason):
    with pytest.raises(errors.InvalidOptionError, match="^consumer name") as info:
        name("consumer", value)
    assert reason in str(info.value)


# api_prefix


@pytest.mark.parametrize(
    "value, expected",
    [("$JS.API", "$JS.API"), ("$JS.API.", "$JS.API"), ("$JS.hub.API", "$JS.hub.API"), ("X", "X"), ("X.", "X")],
)
def test_api_prefix_strips_one_trailing_dot(value, expected):
    assert api_prefix(value) == expected


@pytest.mark.parametrize("value", ["", ".", "..", "$JS.API..", ".$JS.API", "$JS.*.API", "$JS.>", "a b", None, 1])
def test_api_prefix_rejects_empty_wildcards_and_bad_subjects(value):
    with pytest.raises(errors.InvalidOptionError, match="^api_prefix"):
        api_prefix(value)


# header_block


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({}, b"NATS/1.0\r\n\r\n"),
        ({"Nats-Msg-Id": "abc"}, b"NATS/1.0\r\nNats-Msg-Id: abc\r\n\r\n"),
        ({"A": "1", "b": ""}, b"NATS/1.0\r\nA: 1\r\nb: \r\n\r\n"),
        ({"X-Unicode": "grüße"}, "NATS/1.0\r\nX-Unicode: grüße\r\n\r\n".encode()),
        ({"X": "a: b\tc"}, b"NATS/1.0\r\nX: a: b\tc\r\n\r\n"),
        ({"X": ["1", "2"]}, b"NATS/1.0\r\nX: 1\r\nX: 2\r\n\r\n"),
        ({"X": ("1",)}, b"NATS/1.0\r\nX: 1\r\n\r\n"),
        ({"!#$%&'*+-.^_`|~09az": "v"}, b"NATS/1.0\r\n!#$%&'*+-.^_`|~09az: v\r\n\r\n"),
    ],
)
def test_header_block_builds_nats_1_0_block(headers, expected):
    assert header_block(headers) == expected


def test_header_block_round_trips_through_the_parser():
    from jetstream_sync._core.message import parse_header_block

    headers = {"Nats-Msg-Id": "id-1", "Nats-Expected-Stream": "ORDERS", "X-Text": "grüße"}
    assert parse_header_block(header_block(headers)) == headers


@pytest.mark.parametrize(
    "headers, message",
    [
        ({"": "v"}, "header name"),
        ({" Key": "v"}, "header name"),
        ({"Key ": "v"}, "header name"),
        ({"Ke y": "v"}, "header name"),
        ({"Key:": "v"}, "header name"),
        ({"Key\r\nInjected": "v"}, "header name"),
        ({"Kéy": "v"}, "header name"),
        ({"NATS/1.0": "v"}, "header name"),
        ({1: "v"}, "header name"),
        ({b"Key": "v"}, "header name"),
        ({"Key": 1}, "value must be a str or a list of str, got 1"),
        ({"Key": None}, "value must be a str"),
        ({"Key": b"v"}, "value must be a str"),
        ({"Key": ["a", 2]}, "value must be a str, got 2"),
        ({"Key": "a\r\nInjected: yes"}, "must not contain CR or LF"),
        ({"Key": "a\nb"}, "must not contain CR or LF"),
        ({"Key": "a\rb"}, "must not contain CR or LF"),
        ({"Key": ["ok", "a\nb"]}, "must not contain CR or LF"),
        ({"Key": "\udc80"}, "UTF-8"),
    ],
)
def test_header_block_rejects_bad_keys_and_non_str_values(headers, message):
    with pytest.raises(errors.InvalidOptionError) as info:
        header_block(headers)
    assert message in str(info.value)


@pytest.mark.parametrize("headers", [None, "Key: v", [("Key", "v")], 1])
def test_header_block_rejects_non_mappings(headers):
    with pytest.raises(errors.InvalidOptionError, match="headers must be a mapping"):
        header_block(headers)


# control_line / payload_size


def _arg_len(subj, reply=""):
    # what the server measures: "<subject> [reply] <hdr> <total>", sizes at 10 digits
    return len(f"{subj} {reply} {'9' * 10} {'9' * 10}" if reply else f"{subj} {'9' * 10} {'9' * 10}")


def test_control_line_accepts_lines_up_to_the_limit():
    assert MAX_CONTROL_LINE == 4096
    control_line("foo")
    control_line("foo", "_INBOX.x")
    control_line("foo", None)
    fits = "a" * (MAX_CONTROL_LINE - _arg_len(""))
    assert _arg_len(fits) == MAX_CONTROL_LINE
    control_line(fits)
    reply = "r" * (MAX_CONTROL_LINE - _arg_len("s" * 100) - 1)
    assert _arg_len("s" * 100, reply) == MAX_CONTROL_LINE
    control_line("s" * 100, reply)


@pytest.mark.parametrize(
    "subj, reply, limit",
    [
        ("a" * MAX_CONTROL_LINE, "", MAX_CONTROL_LINE),
        ("a" * (MAX_CONTROL_LINE - _arg_len("") + 1), "", MAX_CONTROL_LINE),
        ("a" * 2000, "r" * 2100, MAX_CONTROL_LINE),
        ("é" * 2100, "", MAX_CONTROL_LINE),  # counted in bytes
        ("a" * 100, "", 100),
    ],
)
def test_control_line_rejects_lines_over_max_control_line(subj, reply, limit):
    with pytest.raises(errors.InvalidOptionError, match=f"max_control_line of {limit}"):
        control_line(subj, reply, max_control_line=limit)


def test_reply_room_is_the_longest_request_inbox_nats_py_makes():
    # <prefix>.<nuid>.<nuid + 2 random bytes in hex>
    assert options.reply_room() == len("_INBOX.") + 22 + 1 + 26
    assert options.reply_room("my.inbox") == len("my.inbox.") + 22 + 1 + 26


def test_control_line_counts_the_reply_inbox_made_later():
    subj = "a" * (MAX_CONTROL_LINE - _arg_len("") - 1 - options.reply_room())
    control_line(subj, reply_room=options.reply_room())
    with pytest.raises(errors.InvalidOptionError, match="reply inbox"):
        control_line(subj + "a", reply_room=options.reply_room())


@pytest.mark.parametrize("value", ["my.inbox", b"my.inbox", "_INBOX", "i" * 255])
def test_inbox_prefix_accepts_a_plain_subject_of_up_to_255_bytes(value):
    assert options.inbox_prefix(value) == (value.decode() if isinstance(value, bytes) else value)


@pytest.mark.parametrize("value", ["", "a b", "in.*", "in.>", "in..x", "in.", "i" * 256, 5, None])
def test_inbox_prefix_refuses_what_would_make_bad_or_overlong_inboxes(value):
    with pytest.raises(errors.InvalidOptionError, match="inbox_prefix"):
        options.inbox_prefix(value)


@pytest.mark.parametrize("subj, reply", [(None, ""), (b"foo", ""), ("foo", 1)])
def test_control_line_rejects_non_str_subject_or_reply(subj, reply):
    with pytest.raises(errors.InvalidOptionError):
        control_line(subj, reply)


@pytest.mark.parametrize("total, max_payload", [(0, 1024), (1024, 1024), (10**9, 0), (10**9, None)])
def test_payload_size_accepts_totals_within_max_payload_or_unknown(total, max_payload):
    payload_size(total, max_payload)


@pytest.mark.parametrize("total, max_payload", [(1025, 1024), (1_048_577, 1_048_576)])
def test_payload_size_rejects_totals_over_max_payload(total, max_payload):
    with pytest.raises(errors.InvalidOptionError, match=f"batch is {total} bytes .* max_payload of {max_payload}"):
        payload_size(total, max_payload, "batch")


# ack_reply / term_reason


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.ORDERS.C1.1.2.3.1700000000000000000.0",
        "$JS.ACK.hub.ACCHASH.ORDERS.C1.1.2.3.1700000000000000000.0.rand",
    ],
)
def test_ack_reply_accepts_js_ack_subjects(reply):
    assert ack_reply(reply) == reply


@pytest.mark.parametrize(
    "reply",
    [None, "", "_INBOX.abc", "$JS.API.INFO", "$JS.ACK", "$JS.ACK.", "$js.ack.X.Y", "$JS.ACK.a..b", "$JS.ACK.a b", 5],
)
def test_ack_reply_rejects_non_js_replies_with_not_js_message_error(reply):
    with pytest.raises(errors.NotJSMessageError, match="not a JetStream message") as info:
        ack_reply(reply)
    assert not isinstance(info.value, errors.InvalidOptionError)


@pytest.mark.parametrize(
    "reason, max_payload, expected",
    [
        (None, 1024, b"+TERM"),
        ("", 1024, b"+TERM"),
        ("bad data", 1024, b"+TERM bad data"),
        ("grüße", 1024, "+TERM grüße".encode()),
        ("x" * 1018, 1024, b"+TERM " + b"x" * 1018),  # exactly max_payload
        ("x" * 5000, 0, b"+TERM " + b"x" * 5000),  # max_payload unknown
    ],
)
def test_term_reason_builds_term_body(reason, max_payload, expected):
    assert term_reason(reason, max_payload) == expected


@pytest.mark.parametrize(
    "reason, max_payload, message",
    [
        ("a\nb", 1024, "must not contain CR or LF"),
        ("a\rb", 1024, "must not contain CR or LF"),
        (b"bytes", 1024, "term reason must be a str"),
        (5, 1024, "term reason must be a str"),
        ("x" * 1019, 1024, "max_payload of 1024"),
        ("\ud800", 1024, "UTF-8"),
    ],
)
def test_term_reason_rejects_multiline_non_str_and_oversized_reasons(reason, max_payload, message):
    with pytest.raises(errors.InvalidOptionError) as info:
        term_reason(reason, max_payload)
    assert message in str(info.value)


def test_str_data_that_utf8_cannot_carry_is_refused_clearly():
    assert options.as_bytes("hé") == "hé".encode()
    with pytest.raises(jss.InvalidOptionError, match="not valid UTF-8 text"):
        options.as_bytes("a\ud800b")  # a lone surrogate


def test_default_sentinel_gives_the_context_default_and_none_is_no_limit():
    # None means "no limit" everywhere; where a call must be bounded it is refused,
    # and jss.DEFAULT (the default value) stands for the context's timeout.
    assert options.timeout_or_default("timeout", jss.DEFAULT, 5.0) == 5.0
    assert options.timeout_or_default("timeout", 2, 5.0) == 2.0
    with pytest.raises(jss.InvalidOptionError, match="leave timeout out"):
        options.timeout_or_default("timeout", None, 5.0)
    assert repr(jss.DEFAULT) == "jetstream_sync.DEFAULT"
    assert options.optional_timeout("timeout", None) is None  # where None is allowed, it means no limit
