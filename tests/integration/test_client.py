"""Client: threads, fork, exit, Ctrl-C, the loop-thread guard, events."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import wait_until


def run_script(code: str, *args: str, timeout: float = 30.0, **popen: object) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def test_import_starts_no_thread_and_no_pyspark():
    code = "import sys, threading, jetstream_sync; print(threading.active_count(), 'pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.stdout.split() == ["1", "False"]


def test_connect_failure_is_prompt():
    from jetstream_sync._server import free_port

    start = time.monotonic()
    with pytest.raises(jss.NoServersError):
        jss.connect(f"nats://127.0.0.1:{free_port()}", connect_timeout=1)
    assert time.monotonic() - start < 5


def test_unknown_option_rejected(server):
    with pytest.raises(jss.InvalidOptionError):
        jss.connect(server.url, no_such_option=1)


def test_publish_and_request_from_many_threads(server, nc):
    responder = jss.connect(server.url, name="responder")
    sub = responder.subscribe("svc.echo")

    def serve():
        for msg in sub:
            responder.publish(msg.reply, b"re:" + msg.data)

    threading.Thread(target=serve, daemon=True).start()
    responder.flush()
    counter = nc.subscribe("load.>")
    nc.flush()
    errors: list = []
    replies: list = []

    def publisher(i):
        try:
            for n in range(200):
                nc.publish(f"load.{i}", f"{i}-{n}".encode())
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def requester(i):
        try:
            for n in range(50):
                reply = nc.request("svc.echo", f"{i}-{n}".encode(), timeout=5)
                replies.append((f"{i}-{n}", reply.data))
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=publisher, args=(i,)) for i in range(8)]
    threads += [threading.Thread(target=requester, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len(replies) == 400
    assert all(data == b"re:" + sent.encode() for sent, data in replies)
    wait_until(lambda: counter.pending() == 1600, timeout=10)
    sub.unsubscribe()
    responder.close()


def test_blocking_call_from_loop_thread_raises(nc):
    seen = []
    done = threading.Event()

    def on_loop():
        try:
            nc.publish("x", b"1")
        except BaseException as exc:
            seen.append(exc)
        done.set()

    nc._conn.loop_thread.call_soon(on_loop)
    assert done.wait(5)
    assert isinstance(seen[0], jss.DeadlockError)
    nc.publish("x", b"still fine")


def test_blocking_publish_request_and_result_on_the_loop_thread_raise_at_once(nc, js, stream, subj):
    """They wait for the loop thread to deliver a reply: there, they would block it for good."""
    future = js.publish_async(subj, b"queued")
    seen = {}
    done = threading.Event()

    def on_loop():
        for name, call in (
            ("publish", lambda: js.publish(subj, b"1")),
            ("request", lambda: nc.request("svc.none", b"1", timeout=1)),
            ("result", lambda: js.publish_async(subj, b"2").result(1)),
        ):
            start = time.monotonic()
            try:
                call()
            except BaseException as exc:
                seen[name] = (exc, time.monotonic() - start)
        done.set()

    nc._conn.loop_thread.call_soon(on_loop)
    assert done.wait(10)
    for name in ("publish", "request", "result"):
        exc, took = seen[name]
        assert isinstance(exc, jss.DeadlockError), (name, exc)
        assert took < 0.5, (name, took)
    assert future.result(5).seq >= 1  # the client is unharmed
    assert js.publish(subj, b"after").seq >= 2


def test_process_that_forgets_close_exits_quickly(server):
    proc = run_script(
        """
        import sys, time, jetstream_sync as jss
        nc = jss.connect(sys.argv[1])
        js = nc.jetstream()
        js.create_stream(name="EXIT", subjects=["exit.>"])
        js.publish("exit.a", b"1")
        print("done", flush=True)
        """,
        server.url,
    )
    line = proc.stdout.readline()
    assert line.strip() == "done"
    start = time.monotonic()
    proc.wait(10)
    assert time.monotonic() - start < 2.0
    assert proc.returncode == 0, proc.stderr.read()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_gets_clear_error_and_parent_keeps_working(nc):
    sub = nc.subscribe("fork.test")
    nc.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never touch pytest machinery
        try:
            nc.publish("fork.test", b"from child")
            os.write(w, b"no error")
        except jss.ForkedProcessError as exc:
            os.write(w, b"ForkedProcessError:" + str(exc).encode())
        except BaseException as exc:  # pragma: no cover
            os.write(w, repr(exc).encode())
        os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    result = os.read(r, 1000).decode()
    os.close(r)
    assert result.startswith("ForkedProcessError:"), result
    assert "os.fork()" in result
    nc.publish("fork.test", b"from parent")
    assert sub.next_msg(timeout=5).data == b"from parent"


def test_ctrl_c_in_request_is_prompt_and_close_still_works(server):
    slow = jss.connect(server.url)
    sub = slow.subscribe("svc.slow")  # receives, never answers: a slow responder
    slow.flush()
    proc = run_script(
        """
        import sys, time, jetstream_sync as jss
        nc = jss.connect(sys.argv[1])
        print("ready", flush=True)
        try:
            nc.request("svc.slow", b"?", timeout=30)
        except KeyboardInterrupt:
            t = time.monotonic()
            nc.close()
            print("interrupted", "closed" if nc.is_closed else "open", round(time.monotonic() - t, 3), flush=True)
        """,
        server.url,
    )
    assert proc.stdout.readline().strip() == "ready"
    sub.next_msg(timeout=10)  # the request is in flight
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    line = proc.stdout.readline().split()
    elapsed = time.monotonic() - sent
    proc.wait(10)
    assert line[:2] == ["interrupted", "closed"], (line, proc.stderr.read())
    assert elapsed < 1.0
    assert proc.returncode == 0
    slow.close()


def test_connection_events_fan_out_to_listeners(private_server):
    events = []
    user = []
    nc = jss.connect(
        private_server.url,
        reconnect_time_wait=0.1,
        max_reconnect_attempts=-1,
        disconnected_cb=lambda: user.append("disconnected"),
        reconnected_cb=lambda: user.append("reconnected"),
    )
    for i in range(3):
        for ev in ("disconnected", "reconnected", "closed"):
            nc._conn.add_listener(ev, lambda ev=ev, i=i: events.append((ev, i)))
    private_server.restart()
    wait_until(lambda: ("reconnected", 2) in events, timeout=15)
    assert {("disconnected", i) for i in range(3)} <= set(events)
    wait_until(lambda: "reconnected" in user)
    nc.close()
    assert {("closed", i) for i in range(3)} <= set(events)


def test_close_is_idempotent_and_calls_after_close_raise(server):
    nc = jss.connect(server.url)
    with nc:
        nc.publish("a", b"1")
    nc.close()
    assert nc.is_closed
    with pytest.raises(jss.ConnectionClosedError):
        nc.publish("a", b"2")


def test_request_no_responders_and_timeout(nc):
    with pytest.raises(jss.NoRespondersError):
        nc.request("nobody.here", b"", timeout=2)
    nc.subscribe("silent")
    nc.flush()
    start = time.monotonic()
    with pytest.raises(jss.TimeoutError):
        nc.request("silent", b"", timeout=0.2)
    assert time.monotonic() - start < 1.5


def test_a_ping_goes_out_after_what_was_queued_before_it(nc):
    """nats-py wrote a flush's PING straight to the socket, ahead of commands
    queued for its flusher: Subscription.drain() sent PING before its UNSUB,
    took the PONG for "the server has seen the UNSUB", removed the
    subscription, and dropped what the server still sent it (an open pull's
    messages then waited out AckWait)."""

    async def wire_order(client):
        sub = await client.subscribe("order.x")
        await client.flush()
        transport = client._transport
        written = []
        write, writelines = transport.write, transport.writelines
        transport.write = lambda data: (written.append(bytes(data)), write(data))[1]
        transport.writelines = lambda parts: (written.extend(bytes(p) for p in parts), writelines(parts))[1]
        try:
            await sub.drain()
            await client.publish("order.y", b"z")
            await client.flush()
        finally:
            del transport.write, transport.writelines
        return b"".join(written)

    wire = nc.run_async(wire_order, timeout=10)
    assert wire.index(b"UNSUB") < wire.index(b"PING")
    assert wire.index(b"PUB order.y") < wire.rindex(b"PING")  # flush() after a publish, alike
