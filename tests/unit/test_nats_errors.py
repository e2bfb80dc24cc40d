"""The one mapping of nats-py errors to ours (_core.nats_errors): types and texts."""

import asyncio

import nats.errors as nerr
import pytest

import jetstream_sync as jss
from jetstream_sync._core import nats_errors


@pytest.mark.parametrize(
    "exc, cls, text",
    [
        (nerr.ConnectionClosedError(), jss.ConnectionClosedError, "nats: connection closed"),
        (nerr.NoRespondersError(), jss.NoRespondersError, "no responders available for request"),
        (nerr.TimeoutError(), jss.TimeoutError, "nats: timeout"),
        (asyncio.TimeoutError(), jss.TimeoutError, "timed out"),
        (nerr.BadSubjectError(), jss.InvalidOptionError, "nats: invalid subject"),
        (nerr.Error("nats: something"), jss.JetStreamError, "nats: something"),
    ],
)
def test_translate_maps_nats_py_errors_to_ours(exc, cls, text):
    err = nats_errors.translate(exc)
    assert type(err) is cls and str(err) == text
    assert isinstance(exc, nats_errors.NATS_ERRORS)


def test_translate_leaves_ours_and_foreign_errors_alone():
    ours, foreign = jss.TimeoutError("x"), ValueError("y")
    assert nats_errors.translate(ours) is ours and nats_errors.translate(foreign) is foreign


def test_a_slow_consumer_nats_py_reports_names_the_subscription_subject():
    class Sub:  # what nats-py's report holds of the subscription
        subject = "orders.*"

    report = nerr.SlowConsumerError(subject="orders.new", reply="", sid=7, sub=Sub())
    err = nats_errors.translate(report)
    assert type(err) is jss.SlowConsumerError
    assert str(err) == "slow consumer on 'orders.*': pending limit reached, dropping messages"
    assert nats_errors.slow_consumer(report) == (7, "orders.*")
    assert nats_errors.slow_consumer(nerr.Error("nats: other")) is None


def test_a_jetstream_api_request_nobody_answered_says_jetstream_is_not_enabled():
    err = nats_errors.api_request_error(nerr.NoRespondersError(), "$JS.API.INFO", "$JS.API", 5.0)
    assert isinstance(err, jss.JetStreamNotEnabledError)
    assert str(err) == "no JetStream API answered on $JS.API (JetStream not enabled, or wrong domain/prefix)"


def test_a_jetstream_api_request_out_of_time_names_subject_and_timeout():
    err = nats_errors.api_request_error(nerr.TimeoutError(), "$JS.API.INFO", "$JS.API", 2.5)
    assert isinstance(err, jss.TimeoutError)
    assert str(err) == "JetStream API request $JS.API.INFO timed out after 2.5s"
    assert all(issubclass(c, nerr.Error) for c in nats_errors.API_REQUEST_FAILURES)


@pytest.mark.parametrize(
    "text, kind, subject, queue, message",
    [
        ('nats: permissions violation for publish to "orders.new"', "publish", "orders.new", "", "permission denied: publish to 'orders.new'"),
        (
            'nats: permissions violation for subscription to "jobs" using queue "workers"',
            "subscription", "jobs", "workers", "permission denied: subscription to 'jobs' (queue group 'workers')",
        ),
    ],
)  # fmt: skip
def test_a_permissions_violation_is_read_from_the_error_text(text, kind, subject, queue, message):
    violation = nats_errors.permission_violation(nerr.Error(text))
    assert violation is not None
    assert (violation.kind, violation.subject, violation.queue, str(violation.error)) == (kind, subject, queue, message)
    assert isinstance(violation.error, jss.PermissionDeniedError)
    assert nats_errors.permission_violation(nerr.Error("nats: stale connection")) is None


def test_a_failed_connect_names_the_servers_and_the_reason():
    refused = nats_errors.connect_error(ConnectionRefusedError(), "nats://u:***@h:4222", None, False)
    assert isinstance(refused, jss.NoServersError)
    assert str(refused) == "could not connect to nats://u:***@h:4222: connection refused"
    denied = nats_errors.connect_error(nerr.AuthorizationError(), "nats://h:4222", None, False)
    assert isinstance(denied, jss.AuthorizationError)
    assert str(nats_errors.connect_error(None, "nats://h:4222", None, False)).endswith(": timed out")
    insecure = nats_errors.connect_error(nats_errors.InsecureServer(), "tls://h:4222", None, True)
    assert "does not offer TLS" in str(insecure)
