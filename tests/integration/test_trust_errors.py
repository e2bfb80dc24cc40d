"""Regression tests: bad input, refused permissions and failed connections are
reported to the caller that caused them, clearly, quickly, and without taking
the shared client down; SIGTERM ends a worker without losing acks.

Each test is named after the defect it pins down. Every wait is bounded (a
poll with a deadline, a join or subprocess wait with a timeout). Only the
public API is used, plus the test servers' own controls.
"""

from __future__ import annotations

import os
import queue
import signal
import ssl
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import jetstream_sync as jss
from jetstream_sync._tools.server import NatsServer, free_port

from ..helpers import publish, wait_until

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- helpers ------------------------------------------------------------------


def timed(fn):
    """Run ``fn()``; return (exception or None, seconds taken)."""
    t0 = time.monotonic()
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        return exc, time.monotonic() - t0
    return None, time.monotonic() - t0


def config_server(tmp_path, name, body):
    """A NatsServer started with a config file ``body`` (``{port}`` and
    ``{store}`` filled in). JetStream comes from the config's ``jetstream``
    block (the server refuses -sd next to a config store_dir), so NatsServer's
    own -js/-sd flags are off; its -a/-p name the config's address."""
    port = free_port()
    store = tmp_path / f"{name}-store"
    store.mkdir()
    cfg = tmp_path / f"{name}.conf"
    cfg.write_text(body.replace("{port}", str(port)).replace("{store}", str(store)))
    return NatsServer(port=port, store_dir=str(store), jetstream=False, args=["-c", str(cfg)]).start()


def assert_client_works(nc, js, subj):
    assert nc.is_connected and not nc.is_closed
    ack = js.publish(subj, b"still-works", timeout=5)
    assert isinstance(ack, jss.PubAck) and ack.seq > 0
    assert nc.is_connected and not nc.is_closed


# -- defect 11 ----------------------------------------------------------------


@pytest.mark.timeout(60)
def test_one_bad_call_never_closes_the_shared_client(nc, js, stream, subj, cons):
    oversize = b"x" * (nc.max_payload + 1)
    assert nc.max_payload > 0

    js.publish(subj, b"for-term")
    msgs = list(cons.fetch(1, expires=5))
    assert len(msgs) == 1
    msg = msgs[0]

    bad_calls = [
        ("js.publish_async oversize", lambda: js.publish_async(subj, oversize)),
        ("js.publish oversize", lambda: js.publish(subj, oversize)),
        ("nc.publish oversize", lambda: nc.publish(subj, oversize)),
        ("msg.term oversize reason", lambda: msg.term("r" * (nc.max_payload + 10))),
        ("js.publish 5000-char subject", lambda: js.publish("a" * 5000, b"")),
        ("nc.request 5000-char subject", lambda: nc.request("a" * 5000, b"")),
        ("js.stream_info 5000-char name", lambda: js.stream_info("S" * 5000)),
        ("js.consumer_info 5000-char name", lambda: js.consumer_info(stream.name, "c" * 5000)),
    ]
    problems = []
    for what, call in bad_calls:
        exc, _took = timed(call)
        if not isinstance(exc, jss.InvalidOptionError):
            problems.append(f"{what}: expected InvalidOptionError, got {exc!r}")
        # The shared client survives: the next call on it works.
        assert nc.is_connected and not nc.is_closed, f"client not connected after {what}; {problems}"
        assert_client_works(nc, js, subj)
    assert not problems, "\n".join(problems)

    # The refused term left the message ackable, and publish_async still resolves.
    msg.ack()
    fut = js.publish_async(subj, b"after")
    assert isinstance(fut.result(timeout=10), jss.PubAck)
    assert js.publish_async_complete(timeout=10)
    nc.flush(timeout=5)
    assert nc.is_connected and not nc.is_closed
    wait_until(lambda: cons.info().num_ack_pending == 0, timeout=5)


# -- defect 12 ----------------------------------------------------------------


@pytest.mark.timeout(60)
def test_bad_header_fails_only_its_own_publish(nc, js, stream, subj):
    first = [js.publish_async(subj, b"a%d" % i) for i in range(50)]
    with pytest.raises(jss.InvalidOptionError):
        js.publish_async(subj, b"bad", headers={"bad key": "v"})
    with pytest.raises(jss.InvalidOptionError):
        js.publish_async(subj, b"bad", headers={"K": 5})
    second = [js.publish_async(subj, b"b%d" % i) for i in range(50)]

    acks = [f.result(timeout=15) for f in first + second]
    assert all(isinstance(a, jss.PubAck) for a in acks)
    assert len({a.seq for a in acks}) == 100
    assert js.publish_async_complete(timeout=10)
    assert stream.info().state.messages == 100
    assert nc.is_connected and not nc.is_closed


# -- defect 13 ----------------------------------------------------------------


@pytest.mark.timeout(60)
def test_ack_on_a_core_request_message_is_refused(server, nc):
    # A second connection sees everything sent to request inboxes, so an ack
    # protocol payload leaking to the requester is caught even after the first reply.
    spy_client = jss.connect(server.url, name="inbox-spy")
    try:
        spy = spy_client.subscribe("_INBOX.>")
        spy_client.flush()
        sub = nc.subscribe("svc")
        nc.flush()

        results = {}
        seen = {}

        def responder():
            try:
                m = sub.next_msg(timeout=10)
            except BaseException as exc:  # noqa: BLE001
                results["receive"] = exc
                return
            seen["reply"] = m.reply
            for name, call in [
                ("ack", m.ack),
                ("nak", m.nak),
                ("term", m.term),
                ("in_progress", m.in_progress),
                ("ack_sync", lambda: m.ack_sync(timeout=2)),
            ]:
                try:
                    call()
                    results[name] = None
                except BaseException as exc:  # noqa: BLE001
                    results[name] = exc
            nc.publish(m.reply, b"answer")

        t = threading.Thread(target=responder, name="responder", daemon=True)
        t.start()
        exc, _took = timed(lambda: seen.setdefault("response", nc.request("svc", b"q", timeout=5)))
        t.join(10)
        assert not t.is_alive(), "responder hung"
        assert "receive" not in results, f"responder got no request: {results.get('receive')!r}"

        for name in ("ack", "nak", "term", "in_progress", "ack_sync"):
            assert isinstance(results[name], jss.NotJSMessageError), (
                f"msg.{name}() on a core request message: expected NotJSMessageError, got {results[name]!r}"
            )
        # The requester got the explicit answer (or timed out), never an ack payload.
        if exc is None:
            assert seen["response"].data == b"answer", f"requester got {seen['response'].data!r}"
        else:
            assert isinstance(exc, jss.TimeoutError), f"request failed with {exc!r}"

        spy_client.flush()
        nc.flush()
        sent = []
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                m = spy.next_msg(timeout=0.2)
            except jss.TimeoutError:
                break
            if m.subject == seen["reply"]:
                sent.append(m.data)
        assert sent == [b"answer"], f"payloads sent to the request inbox: {sent!r}"
        assert nc.is_connected
    finally:
        spy_client.close()


# -- defect 19 ----------------------------------------------------------------

_PERMISSIONS_CONF = """
listen: 127.0.0.1:{port}
jetstream { store_dir: "{store}" }
authorization {
  users = [
    {user: a, password: p, permissions: {publish: {deny: ["denied.>"]}, subscribe: {allow: [">"]}}}
    {user: b, password: p, permissions: {publish: {deny: ["$JS.API.CONSUMER.MSG.NEXT.>"]}, subscribe: {allow: [">"]}}}
  ]
}
"""


@pytest.mark.timeout(90)
def test_permission_denied_is_reported_at_once(tmp_path):
    srv = config_server(tmp_path, "perm", _PERMISSIONS_CONF)
    url = f"nats://127.0.0.1:{srv.port}"
    nc = nc_b = None
    try:
        nc = jss.connect(url, user="a", password="p", name="perm-a")
        js = nc.jetstream()
        js.create_stream(name="DENIED", subjects=["denied.>"])
        ok = js.create_stream(name="OK", subjects=["ok.>"])
        js.publish("ok.1", b"one")
        ok.create_consumer(durable_name="c", ack_policy="explicit")

        exc, took = timed(lambda: nc.request("denied.x", b"", timeout=5))
        assert isinstance(exc, jss.PermissionDeniedError), f"nc.request: got {exc!r} after {took:.2f}s"
        assert took < 2.0, f"nc.request denial took {took:.2f}s"
        assert_client_works(nc, js, "ok.2")

        exc, took = timed(lambda: js.publish("denied.x", timeout=5))
        assert isinstance(exc, jss.PermissionDeniedError), f"js.publish: got {exc!r} after {took:.2f}s"
        assert took < 2.0, f"js.publish denial took {took:.2f}s"
        assert_client_works(nc, js, "ok.3")

        # A plain publish may raise or not, but it must not take the client down.
        try:
            nc.publish("denied.x", b"")
        except jss.PermissionDeniedError:
            pass
        nc.flush(timeout=5)  # whatever -ERR the server sent has been read now
        assert_client_works(nc, js, "ok.4")

        # A pull whose MSG.NEXT publish is denied ends with the denial, not empty.
        nc_b = jss.connect(url, user="b", password="p", name="perm-b")
        cons_b = nc_b.jetstream().stream("OK").consumer("c")
        exc, took = timed(lambda: list(cons_b.fetch(1, expires=5)))
        assert isinstance(exc, jss.PermissionDeniedError), f"fetch: got {exc!r} after {took:.2f}s"
        assert took < 2.0, f"fetch denial took {took:.2f}s"
        assert nc_b.is_connected and not nc_b.is_closed
    finally:
        for c in (nc, nc_b):
            if c is not None:
                c.close()
        srv.cleanup()


# -- defect 20 ----------------------------------------------------------------

_USER_CONF = """
listen: 127.0.0.1:{port}
jetstream { store_dir: "{store}" }
authorization { user: u, password: topsecret }
"""

_HOST_LOOKUP_WORDS = (
    "name not resolved",
    "not known",
    "resolv",
    "getaddrinfo",
    "name or service",
    "no address",
    "nodename",
    "temporary failure in name resolution",
)


def try_connect(*args, **kwargs):
    """(exception or None, seconds): a connection that unexpectedly succeeds is closed."""
    box = {}

    def call():
        box["nc"] = jss.connect(*args, **kwargs)

    exc, took = timed(call)
    if "nc" in box:
        box["nc"].close()
    return exc, took


@pytest.mark.timeout(120)
def test_connect_errors_say_why_and_hide_passwords(tmp_path, server):
    # Every case is checked, and every problem reported together at the end.
    problems = []
    seen = {}

    def check(ok, text):
        if not ok:
            problems.append(text)

    # (a) connection refused, said at once
    port = free_port()
    exc, took = seen["a refused"] = try_connect(f"nats://127.0.0.1:{port}")
    check(isinstance(exc, jss.NoServersError), f"(a) refused: not NoServersError: {exc!r}")
    check("connection refused" in str(exc).lower(), f"(a) refused: message {str(exc)!r}")
    check(took < 2.0, f"(a) refused took {took:.2f}s")

    # (b) unknown host
    exc, took = seen["b unknown host"] = try_connect("nats://no-such-host.invalid:4222")
    check(isinstance(exc, jss.NoServersError), f"(b) unknown host: not NoServersError: {exc!r}")
    check(any(w in str(exc).lower() for w in _HOST_LOOKUP_WORDS), f"(b) unknown host: message {str(exc)!r}")

    srv = config_server(tmp_path, "auth", _USER_CONF)
    try:
        base = f"127.0.0.1:{srv.port}"

        # (c) wrong password
        exc, took = seen["c wrong password"] = try_connect(f"nats://{base}", user="u", password="secret")
        check(isinstance(exc, jss.AuthorizationError), f"(c) wrong password: not AuthorizationError: {exc!r}")
        check(isinstance(exc, jss.NoServersError), f"(c) wrong password: not NoServersError: {exc!r}")
        check("authorization violation" in str(exc).lower(), f"(c) wrong password: message {str(exc)!r}")
        check(took < 3.0, f"(c) wrong password took {took:.2f}s")

        # (d) passwords never appear
        nc = jss.connect(f"nats://u:topsecret@{base}")
        try:
            check(nc.is_connected, "(d) right password in URL: not connected")
            check("topsecret" not in (nc.connected_url or ""), f"(d) connected_url {nc.connected_url!r}")
            check("topsecret" not in repr(nc), f"(d) repr(client) {nc!r}")
        finally:
            nc.close()

        exc, took = seen["d wrong password in url"] = try_connect(f"nats://u:wrongpass@{base}")
        check(isinstance(exc, jss.NoServersError), f"(d) wrong password in URL: not NoServersError: {exc!r}")
        check("wrongpass" not in str(exc), f"(d) password in message: {str(exc)!r}")
        check("wrongpass" not in repr(exc), f"(d) password in repr: {exc!r}")
    finally:
        srv.cleanup()

    # (e) TLS asked of a plain server
    exc, took = seen["e tls"] = try_connect(server.url, tls=ssl.create_default_context())
    check(isinstance(exc, jss.NoServersError), f"(e) TLS mistake: not NoServersError: {exc!r}")
    text = str(exc).lower()
    check("tls" in text or "secure connection not available" in text, f"(e) TLS mistake: message {str(exc)!r}")

    for what, (e, t) in seen.items():
        print(f"{what}: {type(e).__name__}: {e} ({t:.2f}s)")
    assert not problems, "\n".join(problems)


# -- defect 21 ----------------------------------------------------------------


@pytest.mark.timeout(60)
def test_invalid_subjects_and_names_are_refused_before_sending(nc, js, stream, subj):
    for bad in (".foo", "foo."):
        with pytest.raises(jss.InvalidOptionError):
            stream.create_consumer(durable_name="x", filter_subject=bad)
    with pytest.raises(jss.InvalidOptionError):
        nc.jetstream(api_prefix="")
    with pytest.raises(jss.InvalidOptionError):
        js.stream_names(subject="FOO.>.123")

    exc, took = timed(lambda: js.publish("a..b", b""))
    assert isinstance(exc, jss.InvalidOptionError), f"js.publish('a..b'): got {exc!r}"
    assert took < 0.5, f"js.publish('a..b') took {took:.2f}s"

    with pytest.raises(jss.MsgNotFoundError):
        stream.delete_msg(999999)

    with pytest.raises(jss.StreamNotFoundError) as ei:
        js.stream("NOPE")
    assert "NOPE" in str(ei.value), str(ei.value)

    with pytest.raises(jss.ConsumerNotFoundError) as ei:
        stream.consumer("nope")
    assert "nope" in str(ei.value), str(ei.value)

    stream.create_consumer(durable_name="push", deliver_subject="deliver.x")
    with pytest.raises(jss.ConsumerPushBasedError, match="push_consumer"):
        stream.consumer("push")  # a pull handle on it is refused: it names the call that fits
    push = stream.push_consumer("push")  # a push consumer gets its own handle; pulls on it are refused
    assert isinstance(push, jss.PushConsumer)
    with pytest.raises(jss.ConsumerPushBasedError) as ei:
        push.next(timeout=1)
    assert "push" in str(ei.value), str(ei.value)

    assert_client_works(nc, js, subj)


# -- defect 26 ----------------------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import sys, time
    import jetstream_sync as jss

    url, stream_name = sys.argv[1], sys.argv[2]
    nc = jss.connect(url, name="sigterm-worker")
    jss.install_signal_handlers(timeout=5)
    cons = nc.jetstream().stream(stream_name).consumer("c")
    ready = False
    # A small buffer: what a drain has to hand out (20 x 20 ms) fits well
    # inside the 5 s shutdown budget, so nothing needs to be NAK'd.
    with cons.messages(max_messages=20) as it:
        for msg in it:
            if not ready:
                print("READY", flush=True)
                ready = True
            time.sleep(0.02)
            try:
                msg.ack()
            except Exception as exc:
                print(f"ACKFAIL {msg.metadata.sequence.stream} {exc!r}", flush=True)
                continue
            print(f"ACKED {msg.metadata.sequence.stream}", flush=True)
    print("END", flush=True)
    """
)


@pytest.mark.timeout(90)
def test_sigterm_drains_and_acks_before_exit(server, js, stream, subj, cons, tmp_path):
    total = 200
    publish(js, subj, total)
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, str(script), server.url, stream.name],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def reader():
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=reader, daemon=True).start()
    out = []
    try:
        deadline = time.monotonic() + 20
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "worker never printed READY"
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                continue
            assert line is not None, f"worker exited before READY: {proc.wait(5)} {proc.stderr.read()}"
            out.append(line)
            if line == "READY":
                break
        # Let it work a little so that acks and a buffer are in flight, then stop it.
        wait_until(lambda: sum(1 for line in list(lines.queue) if line and line.startswith("ACKED")) >= 5, timeout=10)
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            pytest.fail("worker did not exit within 15 s of SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    # Collect the rest of stdout (the reader ends at EOF).
    end = time.monotonic() + 5
    while time.monotonic() < end:
        try:
            line = lines.get(timeout=max(0.01, end - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        out.append(line)
    err = proc.stderr.read()

    assert rc in (0, -signal.SIGTERM, 128 + signal.SIGTERM), f"exit status {rc}; stderr:\n{err}"
    ack_fail = [line for line in out if line.startswith("ACKFAIL")]
    acked = [int(line.split()[1]) for line in out if line.startswith("ACKED")]
    assert acked, "worker acked nothing"
    assert acked == list(range(1, len(acked) + 1)), f"acked out of order / with gaps: {acked[:10]}…"

    info = settled_info(cons)
    # Nothing handed out is left un-acked (no message waits out AckWait).
    # Note: a NAK'd message still counts in num_ack_pending on nats-server
    # (it stays pending, queued for redelivery), so 0 here means the drain
    # handed the buffer out and the worker acked all of it.
    assert info.num_ack_pending == 0, (
        f"num_ack_pending={info.num_ack_pending} delivered={info.delivered} ack_floor={info.ack_floor}"
        f" acked by worker={len(acked)}; acks refused by the worker's client: {len(ack_fail)}"
        f" (first: {ack_fail[:1]}); stderr:\n{err}"
    )
    # The consumer delivers stream sequences 1, 2, 3 … in order (one consumer,
    # no redeliveries: AckWait is 30 s), and the worker acks each message as it
    # gets it and prints it right after ack() returned. So the acked set is the
    # prefix 1..len(acked), and the ack floor (highest sequence with everything
    # at or below it acked) equals len(acked) exactly when no printed ack was
    # lost (floor < printed) and no ack went out unprinted (floor > printed,
    # i.e. the process was killed between ack() and print, before its loop ended).
    assert info.ack_floor.stream_seq == len(acked), (
        f"ack_floor={info.ack_floor.stream_seq} but worker printed {len(acked)} acks; "
        f"delivered={info.delivered.stream_seq}; stderr:\n{err}"
    )
    assert info.delivered.stream_seq == info.ack_floor.stream_seq
    assert not ack_fail, f"acks refused during shutdown: {ack_fail}\nstderr:\n{err}"
    print(f"worker: exit {rc}, acked {len(acked)}, loop ended by itself: {'END' in out}")


def settled_info(cons):
    """The consumer's info once it stopped changing (acks the dying worker
    sent have been applied): two equal readings 0.1 s apart, within 5 s."""
    last = [None, None]

    def stable():
        i = cons.info()
        key = (i.num_ack_pending, i.ack_floor.stream_seq, i.delivered.stream_seq, i.num_redelivered)
        same = key == last[0]
        last[0], last[1] = key, i
        return same

    wait_until(stable, timeout=5, interval=0.1)
    return last[1]


# -- found by review after the fixes ---------------------------------------------------


@pytest.mark.timeout(30)
def test_expected_headers_need_the_right_types(js, stream, subj):
    """A sequence given as a string or float used to be sent as a header and
    answered "wrong last sequence" by the server."""
    js.publish(subj, b"1")
    for bad in ("1", 1.5, -1, True):
        with pytest.raises(jss.InvalidOptionError):
            js.publish(subj, b"x", expected_last_seq=bad)
        with pytest.raises(jss.InvalidOptionError):
            js.publish_async(subj, b"x", expected_last_subject_seq=bad)
    for bad in ("", 5):
        with pytest.raises(jss.InvalidOptionError):
            js.publish(subj, b"x", msg_id=bad)
    assert js.publish(subj, b"x", expected_last_seq=1).seq == 2


@pytest.mark.timeout(30)
def test_stream_subjects_must_be_a_list(js):
    for bad in ("t.>", "tt"):
        with pytest.raises(jss.InvalidOptionError, match="list"):
            js.create_stream(name="T", subjects=bad)


@pytest.mark.timeout(30)
def test_publish_async_complete_validates_its_timeout_first(nc):
    js = nc.jetstream()
    for bad in (float("nan"), -1, "1"):
        with pytest.raises(jss.InvalidOptionError):
            js.publish_async_complete(timeout=bad)


@pytest.mark.timeout(30)
def test_consume_wait_returns_with_final_stats(js, stream, subj):
    """stop() from a handler: once wait() returns, the NAKs of the buffer are counted."""
    cons = stream.create_consumer(durable_name="c2", ack_policy="explicit", ack_wait=30)
    publish(js, subj, 20)
    box = {}
    started = threading.Event()

    def handler(msg):
        started.wait(5)  # the handler may run before consume() returned the context
        msg.ack()
        box["cc"].stop()

    box["cc"] = cons.consume(handler, max_messages=10)
    started.set()
    assert box["cc"].wait(10)
    stats = box["cc"].stats
    assert stats.delivered == 1 and stats.nakd_on_stop == 9


_FRAMEWORK_WORKER = """
import signal, sys, threading, time
import jetstream_sync as jss

stop = threading.Event()
signal.signal(signal.SIGTERM, lambda s, f: (print("FRAMEWORK", flush=True), stop.set()))
nc = jss.connect(sys.argv[1])
jss.install_signal_handlers(timeout=5)
print("READY", flush=True)
stop.wait(30)
deadline = time.monotonic() + 10
while not nc.is_closed and time.monotonic() < deadline:  # the helper closes it
    time.sleep(0.01)
print("CLOSED" if nc.is_closed else "OPEN", flush=True)
"""


@pytest.mark.timeout(60)
def test_signal_helper_chains_a_framework_handler(server, tmp_path):
    """gunicorn-style: a SIGTERM handler installed before is still called, and
    the process ends the framework's way (not re-killed by the helper)."""
    script = tmp_path / "framework.py"
    script.write_text(_FRAMEWORK_WORKER)
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, str(script), server.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout.readline().strip() == "READY"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, (proc.returncode, err[-2000:])
    assert out.split() == ["FRAMEWORK", "CLOSED"], (out, err[-2000:])
