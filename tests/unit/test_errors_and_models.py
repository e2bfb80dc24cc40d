"""Error hierarchy and model round-trips (no server)."""

import builtins
import ssl

import pytest

import jetstream_sync as jss
from jetstream_sync.options import publish_headers
from jetstream_sync._core.publisher import parse_puback
from jetstream_sync.options import build_config, validate_name


@pytest.mark.parametrize(
    "err_code, cls",
    [(10059, jss.StreamNotFoundError), (10014, jss.ConsumerNotFoundError), (10037, jss.MsgNotFoundError)],
)
def test_api_error_by_err_code(err_code, cls):
    exc = jss.APIError.from_error({"code": 404, "err_code": err_code, "description": "gone"})
    assert type(exc) is cls
    assert isinstance(exc, jss.NotFoundError)
    assert (exc.code, exc.err_code, exc.description) == (404, err_code, "gone")


def test_unknown_api_error_keeps_codes():
    exc = jss.APIError.from_error({"code": 400, "err_code": 10148, "description": "consumer already exists"})
    assert type(exc) is jss.APIError and exc.err_code == 10148


def test_builtin_compatibility():
    assert issubclass(jss.TimeoutError, builtins.TimeoutError)
    assert issubclass(jss.InvalidOptionError, ValueError)
    assert issubclass(jss.TimeoutError, jss.JetStreamError)


def test_consumer_config_keeps_unknown_and_new_fields():
    server = {
        "durable_name": "d",
        "ack_policy": "explicit",
        "ack_wait": 30_000_000_000,
        "max_batch": 10,
        "max_expires": 5_000_000_000,
        "max_bytes": 1024,
        "priority_groups": ["g"],
        "priority_policy": "pinned_client",
        "priority_timeout": 120_000_000_000,
        "some_future_field": {"x": 1},
    }
    cfg = jss.ConsumerConfig.from_response(dict(server))
    assert (cfg.max_batch, cfg.max_expires, cfg.priority_timeout, cfg.ack_wait) == (10, 5.0, 120.0, 30.0)
    out = cfg.as_dict()
    for key, value in server.items():
        assert out[key] == value, key


def test_stream_config_keeps_unknown_fields():
    cfg = jss.StreamConfig.from_response({"name": "S", "subjects": ["a"], "max_age": 10**9, "new_knob": True})
    assert cfg.max_age == 1.0
    out = cfg.as_dict()
    assert out["new_knob"] is True and out["max_age"] == 10**9


def test_build_config_validates_before_sending():
    with pytest.raises(jss.InvalidOptionError):
        build_config(jss.ConsumerConfig, None, {"ack_policy": "sometimes"})
    with pytest.raises(jss.InvalidOptionError):
        build_config(jss.ConsumerConfig, None, {"no_such_field": 1})
    with pytest.raises(jss.InvalidOptionError):
        build_config(jss.ConsumerConfig, None, {"ack_wait": -1})
    cfg = build_config(jss.ConsumerConfig, None, {"ack_policy": "none"})
    assert cfg.ack_policy is jss.AckPolicy.NONE


@pytest.mark.parametrize("name", ["", "a.b", "a*", "a>", "a b", "a/b", "a\\b", None])
def test_invalid_names(name):
    with pytest.raises(jss.InvalidOptionError):
        validate_name("stream", name)


def test_publish_headers():
    hdrs = publish_headers({"X": "1"}, "id-1", "S", 0, 5, "id-0")
    assert hdrs == {
        "X": "1",
        "Nats-Msg-Id": "id-1",
        "Nats-Expected-Stream": "S",
        "Nats-Expected-Last-Sequence": "0",
        "Nats-Expected-Last-Subject-Sequence": "5",
        "Nats-Expected-Last-Msg-Id": "id-0",
    }
    assert publish_headers(None, None, None, None, None, None) is None
    with pytest.raises(jss.InvalidOptionError):
        publish_headers(None, None, None, -1, None, None)


def test_parse_puback():
    ack = parse_puback(b'{"stream":"S","seq":3}')
    assert (ack.stream, ack.seq, ack.duplicate) == ("S", 3, False)
    assert parse_puback(b'{"stream":"S","seq":3,"duplicate":true}').duplicate is True
    with pytest.raises(jss.APIError) as ei:
        parse_puback(b'{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 1"}}')
    assert ei.value.err_code == 10071


def _alert(reason):
    exc = ssl.SSLError(1, f"[SSL: {reason}] alert")
    exc.reason = reason  # as the ssl module sets it
    return exc


@pytest.mark.parametrize(
    "exc, info, tls, words",
    [
        # TLS 1.3: the server's alert, or only a reset/EOF after the handshake.
        (_alert("TLSV13_ALERT_CERTIFICATE_REQUIRED"), None, True, "none was sent"),
        (ConnectionResetError("Connection lost"), {"tls_required": True, "tls_verify": True}, True, "requires a client certificate"),
        (EOFError(), {"tls_required": True, "tls_verify": True}, True, "requires a client certificate"),
        (ConnectionResetError("Connection lost"), None, True, "may require a client certificate"),
        (ConnectionResetError("Connection lost"), {"tls_required": True}, False, "may require a client certificate"),
    ],
)
def test_a_tls_client_refused_for_want_of_a_certificate_is_told_so(exc, info, tls, words):
    from jetstream_sync._core.nats_errors import describe_connect_error

    text = describe_connect_error(exc, info, tls)
    assert words in text and "load_cert_chain" in text


def test_a_reset_without_tls_says_nothing_of_certificates():
    from jetstream_sync._core.nats_errors import describe_connect_error

    assert "certificate" not in describe_connect_error(ConnectionResetError(104, "Connection reset by peer"), {}, False)
