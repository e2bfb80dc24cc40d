"""Client: threads, fork, exit, Ctrl-C, the loop-thread guard, events."""

from __future__ import annotations

import os
import queue as queue_mod
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import make_tls_files, wait_until


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
    from jetstream_sync._tools.server import free_port

    start = time.monotonic()
    with pytest.raises(jss.NoServersError):
        jss.connect(f"nats://127.0.0.1:{free_port()}", connect_timeout=1)
    assert time.monotonic() - start < 5


@pytest.mark.timeout(120)
def test_mutual_tls_without_a_client_certificate_says_the_server_requires_one(tmp_path):
    pytest.importorskip("cryptography")
    import ssl

    from jetstream_sync._tools.server import NatsServer, free_port

    files = make_tls_files(tmp_path, key_password=b"key-secret")
    port = free_port()
    conf = tmp_path / "mtls.conf"
    conf.write_text(
        f'tls {{ cert_file: "{files["server"]}", key_file: "{files["server_key"]}", ca_file: "{files["ca"]}", verify: true }}\n'
    )
    srv = NatsServer(port=port, jetstream=False, args=["-c", str(conf)]).start()
    url = f"tls://u:url-secret@127.0.0.1:{port}"
    try:
        # TLS 1.3 refuses the client after the handshake: an alert, or as often
        # only a reset. Several attempts, so that both ways are seen.
        for attempt in range(10):
            ctx = ssl.create_default_context(cafile=files["ca"])
            with pytest.raises(jss.NoServersError) as refused:
                jss.connect(url, tls=ctx, connect_timeout=2)  # bounded: one pass over the servers
            text = str(refused.value)
            assert "client certificate" in text, f"attempt {attempt}: {text}"
            assert "url-secret" not in text and "key-secret" not in text and "PRIVATE KEY" not in text

        ctx = ssl.create_default_context(cafile=files["ca"])
        ctx.load_cert_chain(files["client"], files["client_key"], password=b"key-secret")
        with jss.connect(url, tls=ctx, connect_timeout=2) as nc:
            sub = nc.subscribe("mtls.ok")
            nc.publish("mtls.ok", b"over mutual TLS")
            assert sub.next_msg(timeout=5).data == b"over mutual TLS"
    finally:
        srv.cleanup()


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


# -- core subscriptions the server refuses ------------------------------------------------

_SUB_PERMISSIONS_CONF = """
listen: 127.0.0.1:{port}
authorization {
  users = [
    {user: u, password: p, permissions: {subscribe: {allow: ["jobs.x", "work.q", "_INBOX.>"], deny: ["work.q bad"]}}}
  ]
}
"""


@pytest.mark.timeout(60)
def test_a_refused_core_subscription_ends_at_once_with_permission_denied(tmp_path, caplog):
    from .test_trust_errors import config_server, timed

    srv = config_server(tmp_path, "subperm", _SUB_PERMISSIONS_CONF)
    reported = []
    nc = jss.connect(f"nats://127.0.0.1:{srv.port}", user="u", password="p", error_cb=reported.append)
    try:
        # Allowed: must live on through the refusals below, though "jobs.>"
        # covers "jobs.x" and "work.q" is refused only in queue group "bad".
        allowed = [nc.subscribe("jobs.x"), nc.subscribe("work.q"), nc.subscribe("work.q", queue="good")]
        nc.flush(timeout=5)

        for subject, queue in (("secret.>", ""), ("jobs.>", ""), ("work.q", "bad")):
            sub = nc.subscribe(subject, queue=queue)
            exc, took = timed(lambda: sub.next_msg(timeout=5))
            assert isinstance(exc, jss.PermissionDeniedError), f"next_msg on {subject!r}/{queue!r}: {exc!r}"
            assert took < 2.0, f"next_msg on {subject!r}/{queue!r} took {took:.2f}s"
            assert subject in str(exc) and queue in str(exc)
            with pytest.raises(jss.PermissionDeniedError):
                sub.next_msg(timeout=1)  # stays ended
            sub.unsubscribe()

        # Iteration ends with the error too (a thread, so that a hang fails instead of blocking the test).
        sub = nc.subscribe("secret.>")
        ended = queue_mod.Queue()

        def iterate():
            try:
                for _ in sub:
                    pass
                ended.put(None)
            except Exception as exc:  # noqa: BLE001 - the test inspects it
                ended.put(exc)

        threading.Thread(target=iterate, daemon=True).start()
        assert isinstance(ended.get(timeout=5), jss.PermissionDeniedError)

        # A callback subscription stops (its thread ends) and says why in the log.
        with caplog.at_level("WARNING", logger="jetstream_sync"):
            got = []
            nc.subscribe("secret.cb", cb=got.append)
            wait_until(lambda: not any(t.name == "jetstream-sync-sub-secret.cb" for t in threading.enumerate()), timeout=5)
            wait_until(lambda: any("secret.cb" in r.getMessage() for r in caplog.records), timeout=5)
        wait_until(lambda: sum(isinstance(e, jss.PermissionDeniedError) for e in reported) >= 5, timeout=5)

        # The allowed subscriptions still get their messages; the client is up.
        for subject in ("jobs.x", "work.q"):
            nc.publish(subject, subject.encode())
        assert [s.next_msg(timeout=5).data for s in allowed] == [b"jobs.x", b"work.q", b"work.q"]
        assert nc.is_connected
    finally:
        nc.close()
        srv.cleanup()


# -- protocol lines over the server's max_control_line ------------------------------------


@pytest.mark.timeout(60)
def test_every_protocol_line_over_max_control_line_is_refused_and_the_client_stays_up(server, nc, js, stream, subj):
    # Each fits the 4096-byte limit on its own and not with what the line adds
    # (the queue group, the reply, the reply inbox the client makes).
    near = "bad." + "y" * 4000
    push = js.create_consumer(stream.name, durable_name="far", deliver_subject="deliver." + "d" * 4100)
    pull = js.create_consumer(stream.name, durable_name="pull")
    far_js = nc.jetstream(api_prefix="p" * 4010)
    cases = {
        "SUB": lambda: nc.subscribe("bad.x" + "y" * 5000),
        "SUB with queue": lambda: nc.subscribe(near, queue="q" * 200),
        "PUB": lambda: nc.publish("bad.x" + "y" * 5000),
        "PUB with reply": lambda: nc.publish(near, reply="r" * 200),
        "request": lambda: nc.request(near + "y" * 40, timeout=5),
        "JetStream publish": lambda: js.publish(near + "y" * 40, timeout=5),
        "JetStream API request": lambda: far_js.stream_names(),
        "pull request": lambda: list(jss.Consumer(far_js._api, pull.cached_info).fetch(1, expires=1)),
        "push deliver subject": lambda: push.messages(),
        "inbox_prefix": lambda: jss.connect(server.url, inbox_prefix="i" * 300),
    }
    for what, call in cases.items():
        with pytest.raises(jss.InvalidOptionError):
            call()
        nc.flush(timeout=5)  # a -ERR the server sent would have been read by now
        assert nc.is_connected, f"{what}: the connection was closed"
        assert js.publish(subj, what.encode(), timeout=5).seq > 0, what
