"""What the package logs: connection events with redacted URLs, handler
exceptions with their traceback, module loggers under ``jetstream_sync``."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

import jetstream_sync as jss

from ..helpers import publish, wait_until

pytestmark = pytest.mark.timeout(60)

SECRET = "s3cr3t-pw"


def _ours(caplog):
    return [r for r in caplog.records if r.name.startswith("jetstream_sync")]


def test_connection_events_are_logged_with_the_url_and_no_password(private_server, caplog):
    url = private_server.url.replace("nats://", f"nats://alice:{SECRET}@")
    reconnected = threading.Event()
    caplog.set_level(logging.INFO, logger="jetstream_sync")
    client = jss.connect(
        url, reconnect_time_wait=0.2, max_reconnect_attempts=-1, reconnected_cb=lambda: reconnected.set()
    )
    try:
        private_server.restart()
        assert reconnected.wait(20)
    finally:
        client.close()

    redacted = private_server.url.replace("nats://", "nats://alice:***@")
    seen = [(r.getMessage(), r.levelno, r.name) for r in _ours(caplog)]
    module = "jetstream_sync._connection"
    assert (f"connected to {redacted}", logging.INFO, module) in seen, seen
    assert (f"disconnected from {redacted}", logging.WARNING, module) in seen, seen  # the restart
    assert (f"reconnected to {redacted}", logging.INFO, module) in seen, seen
    assert (f"disconnected from {redacted}", logging.INFO, module) in seen, seen  # close(): expected
    assert (f"connection to {redacted} closed", logging.INFO, module) in seen, seen
    for record in caplog.records:
        formatted = logging.Formatter().format(record)
        assert SECRET not in formatted, formatted
    connection = [r for r in _ours(caplog) if r.name == module]
    assert connection and all(r.nats_server == redacted for r in connection)  # the structured field, redacted


def test_a_consume_handler_exception_is_a_warning_with_its_traceback(js, stream, subj, cons, caplog):
    publish(js, subj, 1)
    failed = threading.Event()

    def handler(msg: jss.Msg) -> None:
        raise RuntimeError("handler broke")

    caplog.set_level(logging.INFO, logger="jetstream_sync")
    cc = cons.consume(handler, error_handler=lambda exc: failed.set())
    try:
        assert failed.wait(10)
    finally:
        cc.stop()
        cc.wait(10)
    records = [r for r in _ours(caplog) if "handler raised" in r.getMessage()]
    assert records, [r.getMessage() for r in _ours(caplog)]
    record = records[0]
    assert record.levelno == logging.WARNING and record.name == "jetstream_sync.contexts"
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)
    assert "Traceback" in logging.Formatter().format(record)
    assert (record.nats_subject, record.nats_stream, record.nats_consumer) == (subj, stream.name, cons.name)
    assert record.nats_seq == 1 and record.nats_server is None


def test_no_message_repeats_the_logger_name(caplog):
    # A record's name already says "jetstream_sync…"; the text must not say it again.
    caplog.set_level(logging.DEBUG, logger="jetstream_sync")
    with pytest.raises(jss.NoServersError):
        jss.connect("nats://127.0.0.1:1", connect_timeout=0.5)
    for record in _ours(caplog):
        assert not record.getMessage().startswith("jetstream_sync"), record.getMessage()


def test_a_failed_first_connect_logs_nothing_and_raises_why(caplog):
    """The caller gets NoServersError naming the URL; no 'disconnected' or
    'closed' line for a connection that never existed."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    caplog.set_level(logging.DEBUG, logger="jetstream_sync")
    with pytest.raises(jss.NoServersError, match=f"alice:\\*\\*\\*@127.0.0.1:{port}: connection refused"):
        jss.connect(f"nats://alice:{SECRET}@127.0.0.1:{port}", connect_timeout=1)
    assert [r.getMessage() for r in _ours(caplog) if r.levelno >= logging.INFO] == []
    assert SECRET not in caplog.text


def test_retry_on_failed_connect_logs_the_connect_when_it_comes(caplog):
    from jetstream_sync.testing import NatsServer

    srv = NatsServer()  # its port is chosen; it starts once the client has failed once
    caplog.set_level(logging.INFO, logger="jetstream_sync")
    failed_once = threading.Event()
    starter = threading.Thread(target=lambda: failed_once.wait(15) and srv.start())
    starter.start()
    try:
        client = jss.connect(
            srv.url, retry_on_failed_connect=True, reconnect_time_wait=0.1, max_reconnect_attempts=-1,
            error_cb=lambda exc: failed_once.set(),
        )  # fmt: skip
        client.close()
    finally:
        failed_once.set()
        starter.join(30)
        srv.cleanup()
    lines = [r.getMessage() for r in _ours(caplog)]
    connected = [line for line in lines if line in (f"connected to {srv.url}", f"reconnected to {srv.url}")]
    assert connected and f"connection to {srv.url} closed" in lines, lines


def _slow_consumer_records(caplog, subject):
    return [r for r in _ours(caplog) if r.levelno == logging.WARNING and f"slow consumer on {subject!r}" in r.getMessage()]


def test_a_slow_consumer_warning_names_the_subscription_subject(server, caplog):
    caplog.set_level(logging.INFO, logger="jetstream_sync")
    reported = []
    with jss.connect(server.url, error_cb=reported.append) as nc:
        sub = nc.subscribe("x.slow", pending_msgs_limit=5)
        for _ in range(50):
            nc.publish("x.slow", b"x")
        nc.flush()
        wait_until(lambda: sub.pending() + sub.dropped == 50)
        records = wait_until(lambda: _slow_consumer_records(caplog, "x.slow"))
        wait_until(lambda: reported)
    assert len(records) == 1  # one per episode
    assert records[0].nats_subject == "x.slow" and records[0].nats_server == server.url
    assert isinstance(reported[0], jss.SlowConsumerError) and "x.slow" in str(reported[0])


def test_a_slow_consumer_nats_py_reports_is_a_warning_naming_its_subject(server, caplog):
    """A nats-py subscription (made through run_async) reports each message
    it drops to the error callback: logged as a warning with its subject, once."""
    caplog.set_level(logging.INFO, logger="jetstream_sync")
    reported = []

    async def stuck(msg):
        await asyncio.sleep(30)  # cancelled by the close

    with jss.connect(server.url, error_cb=reported.append) as nc:
        nc.run_async(lambda c: c.subscribe("y.*", cb=stuck, pending_msgs_limit=5), timeout=5)
        for _ in range(50):
            nc.publish("y.slow", b"y")
        nc.flush()
        wait_until(lambda: len(reported) >= 40)  # one report per message dropped
        records = wait_until(lambda: _slow_consumer_records(caplog, "y.*"))
    assert len(records) == 1, [r.getMessage() for r in records]  # not one per dropped message
    assert records[0].nats_subject == "y.*" and records[0].nats_server == server.url
    assert all(isinstance(e, jss.SlowConsumerError) and "'y.*'" in str(e) for e in reported), reported[:3]
