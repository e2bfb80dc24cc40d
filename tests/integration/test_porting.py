"""Helpers for code ported from nats-py: msg.respond(), subscribe(cb=...), run_async()."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import List

import pytest

import jetstream_sync as jss

from ..helpers import publish

pytestmark = pytest.mark.timeout(60)


# -- msg.respond() ------------------------------------------------------------------------


def test_respond_answers_a_request(nc):
    sub = nc.subscribe("port.svc", cb=lambda m: m.respond(b"pong:" + m.data, headers={"X-By": "cb"}))
    reply = nc.request("port.svc", b"ping", timeout=5)
    assert reply.data == b"pong:ping" and reply.headers == {"X-By": "cb"}
    sub.unsubscribe()


def test_respond_without_a_reply_subject_says_so(nc):
    sub = nc.subscribe("port.noreply")
    nc.publish("port.noreply", b"x")
    msg = sub.next_msg(timeout=5)
    with pytest.raises(jss.RespondError, match="no reply subject"):
        msg.respond(b"answer")


def test_respond_to_a_jetstream_message_is_refused_and_points_to_ack(js, stream, subj, cons):
    publish(js, subj, 1)
    msg = next(iter(cons.fetch(1, expires=5)))
    with pytest.raises(jss.RespondError, match=r"ack\(\)"):
        msg.respond(b"done")
    assert not msg.is_acked
    msg.ack_sync()


# -- subscribe(cb=...) -----------------------------------------------------------------------


def test_a_callback_gets_every_message_in_order_on_a_worker_thread(nc):
    got: List[bytes] = []
    threads = set()
    done = threading.Event()

    def cb(msg: jss.Msg) -> None:
        got.append(msg.data)
        threads.add(threading.current_thread().name)
        if len(got) == 200:
            done.set()

    sub = nc.subscribe("port.order", cb=cb)
    for i in range(200):
        nc.publish("port.order", str(i).encode())
    assert done.wait(10)
    assert got == [str(i).encode() for i in range(200)]
    assert len(threads) == 1 and threading.current_thread().name not in threads
    with pytest.raises(jss.InvalidOptionError, match="callback"):
        sub.next_msg(timeout=0.1)
    sub.unsubscribe()


def test_a_failing_callback_is_logged_with_traceback_reported_and_the_next_message_still_comes(server, caplog):
    errors: List[BaseException] = []
    reported = threading.Event()

    def on_error(exc: BaseException) -> None:
        errors.append(exc)
        reported.set()

    second = threading.Event()

    def cb(msg: jss.Msg) -> None:
        if msg.data == b"bad":
            raise ValueError("handler broke")
        second.set()

    with jss.connect(server.url, error_cb=on_error) as client:
        client.subscribe("port.fail", cb=cb)
        with caplog.at_level(logging.WARNING, logger="jetstream_sync"):
            client.publish("port.fail", b"bad")
            client.publish("port.fail", b"good")
            assert second.wait(10) and reported.wait(10)
    assert isinstance(errors[0], ValueError)
    records = [r for r in caplog.records if "callback raised" in r.getMessage()]
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    assert records[0].exc_info is not None and records[0].exc_info[1] is errors[0]
    assert records[0].name.startswith("jetstream_sync")


def test_unsubscribe_stops_the_callback(nc):
    got: List[bytes] = []
    sub = nc.subscribe("port.unsub", cb=lambda m: got.append(m.data))
    nc.publish("port.unsub", b"before")
    nc.flush()
    watcher = nc.subscribe("port.unsub")
    sub.unsubscribe()
    nc.publish("port.unsub", b"after")
    assert watcher.next_msg(timeout=5).data == b"after"  # delivered to this client by now
    assert b"after" not in got


def test_drain_lets_the_callback_handle_what_arrived_then_stops_it(nc):
    gate = threading.Event()
    started = threading.Event()
    got: List[bytes] = []

    def cb(msg: jss.Msg) -> None:
        started.set()
        gate.wait(10)
        got.append(msg.data)

    sub = nc.subscribe("port.drain", cb=cb)
    for i in range(5):
        nc.publish("port.drain", str(i).encode())
    nc.flush()
    assert started.wait(10)
    result: List[bool] = []
    drainer = threading.Thread(target=lambda: result.append(sub.drain(timeout=10)))
    drainer.start()
    gate.set()
    drainer.join(15)
    assert result == [True]
    assert got == [str(i).encode() for i in range(5)]


def test_an_async_callback_is_refused(nc):
    async def cb(msg: jss.Msg) -> None:
        pass

    with pytest.raises(jss.InvalidOptionError, match="plain function"):
        nc.subscribe("port.async", cb=cb)


# -- run_async() -------------------------------------------------------------------------------


def test_run_async_runs_a_coroutine_against_the_nats_py_client(nc):
    nc.subscribe("port.raw", cb=lambda m: m.respond(b"raw:" + m.data))
    reply = nc.run_async(lambda c: c.request("port.raw", b"x", timeout=5), timeout=10)
    assert reply.data == b"raw:x"
    assert nc.run_async(lambda c: _loop_thread_name(), timeout=5) != threading.current_thread().name


async def _loop_thread_name() -> str:
    return threading.current_thread().name


def test_run_async_is_bounded_by_its_timeout(nc):
    with pytest.raises(jss.TimeoutError):
        nc.run_async(lambda c: asyncio.sleep(30), timeout=0.2)
    nc.flush()  # still usable


def test_run_async_keeps_the_deadlock_guard_and_refuses_a_plain_result(nc):
    def blocking(c):
        nc.flush()  # a blocking call from the loop thread

    with pytest.raises(jss.DeadlockError):
        nc.run_async(blocking, timeout=5)
    with pytest.raises(jss.InvalidOptionError, match="coroutine"):
        nc.run_async(lambda c: 42, timeout=5)
