"""shared_client(): one Client per process and settings, remade after fork."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Iterator

import pytest

import jetstream_sync as jss

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _close_shared() -> Iterator[None]:
    yield
    jss.close_shared_clients()


def test_the_same_settings_give_the_same_client(server):
    a = jss.shared_client(server.url, name="same")
    assert jss.shared_client(server.url, name="same") is a
    assert jss.shared_client(server.url, name="other") is not a


def test_threads_racing_for_the_first_client_get_the_same_one(server):
    n = 8
    barrier = threading.Barrier(n)
    got = []

    def take() -> None:
        barrier.wait(timeout=10)
        got.append(jss.shared_client(server.url, name="race"))

    threads = [threading.Thread(target=take) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert len(got) == n and all(c is got[0] for c in got)
    assert got[0].is_connected


def test_threads_waiting_for_a_failing_first_connect_fail_with_it(tmp_path):
    """A server that accepts TCP and never says INFO: the first connect times
    out, and the threads that waited for it fail then, not one timeout later each."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # the kernel completes the handshakes; nobody answers
    url = f"nats://127.0.0.1:{silent.getsockname()[1]}"
    n = 4
    barrier = threading.Barrier(n)
    errors: list = []

    def take() -> None:
        barrier.wait(timeout=10)
        try:
            jss.shared_client(url, connect_timeout=1, max_reconnect_attempts=0)
        except jss.JetStreamError as exc:
            errors.append(exc)

    try:
        t0 = time.monotonic()
        threads = [threading.Thread(target=take) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        took = time.monotonic() - t0
    finally:
        silent.close()
    assert len(errors) == n
    assert took < 2.5, took  # one connect attempt (about 1 s), not one after another (about n s)


def test_a_closed_client_is_replaced(server):
    first = jss.shared_client(server.url, name="replaced")
    first.close()
    second = jss.shared_client(server.url, name="replaced")
    assert second is not first and second.is_connected
    second.flush(timeout=5)


def test_close_shared_clients_closes_them_and_later_calls_make_new_ones(server):
    first = jss.shared_client(server.url, name="closed-all")
    jss.close_shared_clients()
    assert first.is_closed
    assert jss.shared_client(server.url, name="closed-all") is not first


def _wait_child(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child hung")
        time.sleep(0.02)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_its_own_working_client_and_the_parents_stays_usable(server):
    parent = jss.shared_client(server.url, name="forked")
    sub = parent.subscribe("shared.fork")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: no pytest machinery; report through the pipe and leave
        try:
            signal.alarm(20)  # a hang in the child must not outlive the test
            child = jss.shared_client(server.url, name="forked")
            lines = [
                f"new client: {child is not parent}",
                f"same on a second call: {jss.shared_client(server.url, name='forked') is child}",
                f"connected: {child.is_connected}",
            ]
            child.publish("shared.fork", b"from the child")
            child.flush(timeout=5)
            jss.close_shared_clients()
            lines.append(f"closed: {child.is_closed}")
            os.write(w, "\n".join(lines).encode())
        except BaseException as exc:
            os.write(w, f"raised {exc!r}".encode())
        finally:
            os._exit(0)
    os.close(w)
    assert _wait_child(pid, 30) == 0
    with os.fdopen(r, "rb") as pipe:
        report = pipe.read().decode().splitlines()
    assert report == ["new client: True", "same on a second call: True", "connected: True", "closed: True"], report
    assert sub.next_msg(timeout=5).data == b"from the child"
    # The parent's client was neither used nor closed by the child.
    assert jss.shared_client(server.url, name="forked") is parent and parent.is_connected
    parent.publish("shared.fork", b"from the parent")
    assert sub.next_msg(timeout=5).data == b"from the parent"
