"""Client: connecting and what a failed connect says, threads, fork, exit,
Ctrl-C, the loop-thread guard, events, core subscriptions (released by
close()/drain(), bounded when read slowly), and refusals (permissions, bad
calls, over-long protocol lines) reported to the caller that caused them
while the shared client stays up."""

from __future__ import annotations

import collections
import concurrent.futures
import os
import pathlib
import queue as queue_mod
import re
import signal
import ssl
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import jetstream_sync as jss

from jetstream_sync.testing import free_port
from nats.aio.client import RawCredentials

from ..helpers import (
    Bounded,
    assert_client_works,
    config_server,
    first,
    make_tls_files,
    publish,
    timed,
    wait_blocked,
    wait_until,
)


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
    from jetstream_sync.testing import free_port

    start = time.monotonic()
    with pytest.raises(jss.NoServersError):
        jss.connect(f"nats://127.0.0.1:{free_port()}", connect_timeout=1)
    assert time.monotonic() - start < 5


@pytest.mark.timeout(120)
def test_mutual_tls_without_a_client_certificate_says_the_server_requires_one(tmp_path):
    pytest.importorskip("cryptography")
    import ssl

    from jetstream_sync.testing import NatsServer, free_port

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


def _line_tracer(frame, event, arg):
    return _line_tracer


@pytest.mark.parametrize("traced", [False, True], ids=["plain", "traced"])
def test_new_inbox_from_many_threads_never_repeats(nc, traced):
    """Eight threads making inboxes at once never get the same one (a
    duplicate would route one caller's replies to another). Under a Python
    tracer (a debugger, a profiler) a thread may be switched at any line."""
    threads, per_thread = 8, 10_000 if traced else 100_000
    made: list = [[] for _ in range(threads)]
    start = threading.Barrier(threads)

    def work(i):
        if traced:
            sys.settrace(_line_tracer)
        try:
            start.wait(10)
            made[i] = [nc.new_inbox() for _ in range(per_thread)]
        finally:
            sys.settrace(None)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads take turns often
    try:
        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(60)
    finally:
        sys.setswitchinterval(switch)
    inboxes = [inbox for part in made for inbox in part]
    assert len(inboxes) == threads * per_thread
    repeated = len(inboxes) - len(set(inboxes))
    assert repeated == 0
    assert all(inbox.startswith("_INBOX.") and len(inbox) == len("_INBOX.") + 22 for inbox in inboxes)


def test_requests_from_many_threads_each_get_their_own_reply(server, nc):
    """Every caller gets the answer to its own request, never another's."""
    responder = jss.connect(server.url, name="echo")
    try:
        responder.subscribe("svc.mirror", cb=lambda msg: msg.respond(msg.data))
        responder.flush()
        threads, per_thread = 8, 2_000
        wrong: list = []
        counts = [0] * threads

        def requester(i):
            for n in range(per_thread):
                sent = f"{i}-{n}".encode()
                got = nc.request("svc.mirror", sent, timeout=5).data
                if got != sent:
                    wrong.append((sent, got))
                counts[i] += 1

        workers = [threading.Thread(target=requester, args=(i,)) for i in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(60)
        assert counts == [per_thread] * threads
        assert not wrong
    finally:
        responder.close()


def test_blocking_call_from_loop_thread_raises(nc):
    seen = []
    done = threading.Event()

    def on_loop():
        try:
            nc.flush()
        except BaseException as exc:
            seen.append(exc)
        done.set()

    nc._conn.loop_thread.call_soon(on_loop)
    assert done.wait(5)
    assert isinstance(seen[0], jss.DeadlockError)
    nc.flush()


def test_core_publish_on_the_loop_thread_is_queued_not_refused(nc):
    """A core publish only queues: from the loop thread (an asyncio callback) it is sent too."""
    sub = nc.subscribe("loop.pub")
    nc.flush()
    done = threading.Event()

    def on_loop():
        nc.publish("loop.pub", b"from the loop")
        done.set()

    nc._conn.loop_thread.call_soon(on_loop)
    assert done.wait(5)
    assert sub.next_msg(timeout=5).data == b"from the loop"


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
    assert elapsed < 5.0  # promptly: not at the request's timeout (30 s)
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


def test_calls_after_close_from_a_new_thread_say_the_client_is_closed(server, js, stream, subj, cons):
    """A thread started after close() may get the ended loop thread's ident
    (the system reuses them): it is not the loop thread, the client is closed."""
    tries = 30
    publish(js, subj, tries)
    seen: dict = {}
    for _ in range(tries):
        c = jss.connect(server.url)
        j = c.jetstream()
        consumer = j.consumer(stream.name, cons.name)
        msg = first(consumer.fetch(1, expires=5))
        c.close()
        for name, call in (
            ("js.publish", lambda: j.publish(subj, b"")),
            ("nc.request", lambda: c.request("svc.none", b"", timeout=1)),
            ("nc.publish", lambda: c.publish(subj, b"")),
            ("msg.ack", msg.ack),
            ("consumer.fetch", lambda: list(consumer.fetch(1, expires=1))),
        ):
            outcome: list = []
            t = threading.Thread(target=lambda: outcome.append(timed(call)[0]))
            t.start()
            t.join(10)
            assert not t.is_alive(), name
            seen.setdefault(name, []).append(type(outcome[0]).__name__)
    assert {name: len(kinds) for name, kinds in seen.items()} == dict.fromkeys(seen, tries)
    wrong = {name: collections.Counter(kinds) for name, kinds in seen.items() if set(kinds) != {"ConnectionClosedError"}}
    assert not wrong


def test_request_no_responders_and_timeout(nc):
    with pytest.raises(jss.NoRespondersError):
        nc.request("nobody.here", b"", timeout=2)
    nc.subscribe("silent")
    nc.flush()
    start = time.monotonic()
    with pytest.raises(jss.TimeoutError):
        nc.request("silent", b"", timeout=0.2)
    assert time.monotonic() - start < 1.5


def _child_try(label, fn):
    try:
        fn()
    except jss.ForkedProcessError:
        return f"{label}: ForkedProcessError"
    except BaseException as exc:
        return f"{label}: raised {type(exc).__name__}"
    return f"{label}: no error"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.timeout(60)
def test_inherited_objects_raise_in_forked_child(nc, js, subj, cons):
    publish(js, subj, 10)
    held = first(cons.fetch(1, expires=2))  # fetched, not acked
    ctx = cons.messages(max_messages=5)
    ctx.next(timeout=5)
    wait_until(lambda: ctx.stats.buffered_high_water >= 2)  # at least one message buffered
    wait_until(lambda: cons.info().num_ack_pending == 6)  # 1 fetched + 5 pulled by ctx
    before = cons.info().num_ack_pending

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: no pytest machinery, report through the pipe and leave
        try:
            signal.alarm(20)  # a hang in the child must not outlive the test
            lines = [
                _child_try("msg.ack()", held.ack),
                _child_try("ctx.next(timeout=1)", lambda: ctx.next(timeout=1)),
                _child_try("js.publish()", lambda: js.publish(subj, b"from child")),
                _child_try("nc.publish()", lambda: nc.publish(subj, b"from child")),
                _child_try("cons.info()", cons.info),
            ]
            os.write(w, "\n".join(lines).encode())
        finally:
            os._exit(0)
    os.close(w)
    deadline = time.monotonic() + 30
    while True:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child hung")
        time.sleep(0.02)
    with os.fdopen(r, "rb") as pipe:
        report = pipe.read().decode().splitlines()

    wrong = [line for line in report if not line.endswith(": ForkedProcessError")]
    assert len(report) == 5 and not wrong, "in the forked child:\n" + "\n".join(report)
    # Nothing the child did reached the server: the held message is still pending …
    assert cons.info().num_ack_pending == before, "the child's ack reached the server"
    # … and the parent can still ack it.
    held.ack()
    nc.flush()
    wait_until(lambda: cons.info().num_ack_pending == before - 1)
    ctx.stop()


# -- what a failed connect says ------------------------------------------------------------


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


# -- credential files: read and checked before anything connects ---------------------------

# Made up, of the right form: the checks read a file's form, nothing connects with them.
_SEED = "SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4"
_JWT = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVQUJDIn0.c2lnbmF0dXJl"
_GARBAGE = "garbage-SECRET-1 not a creds file\nmore-SECRET-2\n"


def _credential_files(tmp_path):
    """Paths by name: files that exist (good or bad) and one that does not."""
    files = {
        "missing": tmp_path / "nowhere" / "user.creds",
        "dir": tmp_path / "a-directory",
        "garbage": tmp_path / "bad.creds",
        "jwt_only": tmp_path / "jwt-only.creds",
        "seed": tmp_path / "user.nk",
        "seed_nl": tmp_path / "user-nl.nk",
        "jwt": tmp_path / "user.jwt",
    }
    files["dir"].mkdir()
    files["garbage"].write_text(_GARBAGE)
    files["jwt_only"].write_text(f"-----BEGIN NATS USER JWT-----\n{_JWT}\n------END NATS USER JWT------\n")
    files["seed"].write_text(_SEED)
    files["seed_nl"].write_text(_SEED + "\n")
    files["jwt"].write_text(_JWT + "\n")
    return {name: str(path) for name, path in files.items()}


_CREDENTIAL_CASES = {
    "creds file missing": (lambda f: {"user_credentials": f["missing"]},
                           r"option 'user_credentials': cannot read the credentials file {missing} \(No such file"),
    "creds file missing, as a Path": (lambda f: {"user_credentials": pathlib.Path(f["missing"])},
                                      r"option 'user_credentials': cannot read the credentials file {missing} \(No such"),
    "creds file is a directory": (lambda f: {"user_credentials": f["dir"]},
                                  r"option 'user_credentials': cannot read the credentials file {dir} \(Is a directory\)"),
    "creds file of garbage": (lambda f: {"user_credentials": f["garbage"]},
                              r"option 'user_credentials': the credentials file {garbage} holds no user JWT"),
    "creds file without its seed": (lambda f: {"user_credentials": f["jwt_only"]},
                                    r"the credentials file {jwt_only} holds no nkey seed"),
    "creds text given as a path": (lambda f: {"user_credentials": _GARBAGE + "-----BEGIN USER NKEY SEED-----"},
                                   r"option 'user_credentials' must be a path to the credentials file, not its content"),
    "raw creds text of garbage": (lambda f: {"user_credentials": RawCredentials(_GARBAGE)},
                                  r"option 'user_credentials': the credentials text holds no user JWT"),
    "JWT file of a pair missing": (lambda f: {"user_credentials": (f["missing"], f["seed"])},
                                   r"option 'user_credentials': cannot read the user JWT file {missing} \(No such"),
    "JWT file of a pair of garbage": (lambda f: {"user_credentials": (f["garbage"], f["seed"])},
                                      r"the user JWT file {garbage} does not hold a user JWT"),
    "seed file of a pair missing": (lambda f: {"user_credentials": (f["jwt"], f["missing"])},
                                    r"option 'user_credentials': cannot read the nkey seed file {missing} \(No such"),
    "seed file of a pair with a line break": (lambda f: {"user_credentials": (f["jwt"], f["seed_nl"])},
                                              r"the nkey seed file {seed_nl} must hold the seed alone"),
    "nkeys_seed file missing": (lambda f: {"nkeys_seed": f["missing"]},
                                r"option 'nkeys_seed': cannot read the nkey seed file {missing} \(No such file"),
    "nkeys_seed file is a directory": (lambda f: {"nkeys_seed": f["dir"]},
                                       r"option 'nkeys_seed': cannot read the nkey seed file {dir} \(Is a directory\)"),
    "nkeys_seed file of garbage": (lambda f: {"nkeys_seed": f["garbage"]},
                                   r"option 'nkeys_seed': the nkey seed file {garbage} does not hold an nkey seed"),
    "nkeys_seed given the seed": (lambda f: {"nkeys_seed": _SEED},
                                  r"option 'nkeys_seed' must be a path to the nkey seed file, not its content "
                                  r"\(the seed itself goes in 'nkeys_seed_str'\)"),
    "nkeys_seed_str given a file": (lambda f: {"nkeys_seed_str": f["seed"]},
                                    r"option 'nkeys_seed_str' takes the seed itself, not a file"),
    "nkeys_seed_str not a seed": (lambda f: {"nkeys_seed_str": "not-a-seed-SECRET-3"},
                                  r"option 'nkeys_seed_str' is not an nkey seed"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(_CREDENTIAL_CASES))
def test_a_credential_file_that_cannot_be_used_is_refused_before_anything_connects(tmp_path, server, case):
    # nats-py reads these files only when a server asks for a signature: a server without
    # authentication got a connection without the credentials asked for.
    files = _credential_files(tmp_path)
    options, says = _CREDENTIAL_CASES[case]
    before = server.varz()["total_connections"]
    with pytest.raises(jss.InvalidOptionError, match=says.format(**{k: re.escape(v) for k, v in files.items()})) as info:
        jss.connect(server.url, **options(files)).close()
    assert server.varz()["total_connections"] == before  # nothing reached the server
    for secret in ("SECRET", _SEED, _JWT, "garbage"):  # neither a file's content nor a credential
        assert secret not in str(info.value) and secret not in repr(info.value)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads a file of mode 000")
def test_an_unreadable_credential_file_is_refused_before_anything_connects(tmp_path, server):
    creds = tmp_path / "user.creds"
    creds.write_text("-----BEGIN NATS USER JWT-----\n")
    creds.chmod(0)
    before = server.varz()["total_connections"]
    with pytest.raises(jss.InvalidOptionError, match=rf"cannot read the credentials file {re.escape(str(creds))} \(Permission denied\)"):
        jss.connect(server.url, user_credentials=str(creds)).close()
    assert server.varz()["total_connections"] == before


# -- core subscription readers: released by close()/drain(), bounded when slow -------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["close", "drain"])
def test_close_and_drain_release_core_subscription_readers(server, how):
    client = jss.connect(server.url, name=f"core-readers-{how}")
    iterated = client.subscribe("x")
    waited = client.subscribe("y")
    seen = []

    def iterate():
        for m in iterated:
            seen.append(m.data)
        return "ended"

    iterator = Bounded(iterate, "iterator")
    reader = Bounded(lambda: waited.next_msg(None), "next_msg")
    client.publish("x", b"1")
    wait_until(lambda: seen == [b"1"])
    wait_blocked(iterator.thread)
    wait_blocked(reader.thread)

    ending = Bounded(getattr(client, how), how).join(10)
    assert ending.finished, f"{how}() did not return within 10s"
    released_by = time.monotonic() + 1.0
    iterator.join(max(0.0, released_by - time.monotonic()))
    reader.join(max(0.0, released_by - time.monotonic()))
    assert iterator.finished, f"a thread iterating a subscription is still blocked 1s after {how}()"
    assert iterator.error is None and iterator.result == "ended", f"iteration ended with {iterator.error!r}"
    assert reader.finished, f"a thread in next_msg(None) is still blocked 1s after {how}()"
    assert isinstance(reader.error, jss.ConnectionClosedError), f"next_msg ended with {reader.error!r}"


# -- drain(): what was received is finished before the close ---------------------------------


@pytest.mark.timeout(60)
def test_flush_while_reconnecting_waits_for_the_server_and_says_why_it_timed_out(private_server, fnc):
    """nats-py's flush returns at once while reconnecting, with no PONG: a
    flush must not report "the server has it" then."""
    private_server.stop()
    wait_until(lambda: fnc.is_reconnecting)
    with pytest.raises(jss.TimeoutError, match="reconnecting"):
        fnc.flush(timeout=0.5)
    done = threading.Event()
    threading.Thread(target=lambda: (fnc.flush(timeout=20), done.set()), daemon=True).start()
    assert not done.wait(0.5)  # the condition under test: no PONG can have come, so it must still wait
    private_server.start()
    assert done.wait(20)


@pytest.mark.timeout(60)
def test_nothing_new_subscribes_while_the_client_drains(server):
    """Client.drain(): calls still work for the handlers finishing, new
    interest is refused at once, and a refused service leaves no thread."""
    nc = jss.connect(server.url)
    release, held = threading.Event(), threading.Event()
    svc = nc.add_service("holder", "1.0.0")
    svc.add_endpoint("h", lambda req: (held.set(), release.wait(20), req.respond(b"done")), subject="drain.hold")
    stream = nc.jetstream().create_stream(name="DRAINING", subjects=["draining.>"])
    cons = stream.create_consumer(durable_name="c")
    nc.flush()
    nc.publish("drain.hold", b"", reply="_INBOX.drain.hold")
    assert held.wait(10)
    drainer = threading.Thread(target=nc.drain, kwargs={"timeout": 30}, daemon=True)
    drainer.start()
    try:
        wait_until(lambda: nc.is_draining)
        assert nc.jetstream().publish("draining.x", b"still works").seq == 1
        for start in (
            lambda: nc.subscribe("drain.new"),
            lambda: cons.fetch(1, expires=1),
            lambda: cons.messages(),
            lambda: nc.add_service("late", "1.0.0"),
            lambda: svc.add_endpoint("late", lambda req: None, subject="drain.late"),
        ):
            with pytest.raises(jss.ConnectionDrainingError, match="draining"):
                start()
        wait_until(lambda: not [t for t in threading.enumerate() if "late" in t.name], timeout=5)
    finally:
        release.set()
        drainer.join(30)
    assert not nc.is_draining and nc.is_closed


@pytest.mark.timeout(60)
def test_a_client_drain_lets_a_subscription_callback_answer_what_arrived(server):
    sc = jss.connect(server.url, name="drained-callback")
    handled = []

    def answer(msg):
        time.sleep(0.05)
        msg.respond(b"done " + msg.data)
        handled.append(msg.data)

    sc.subscribe("drained.cb", cb=answer)
    sc.flush()
    received = sc.stats["in_msgs"]
    with jss.connect(server.url) as requester:
        pool = concurrent.futures.ThreadPoolExecutor(5)
        futures = [pool.submit(requester.request, "drained.cb", b"%d" % i, timeout=5.0) for i in range(5)]
        pool.shutdown(wait=False)
        wait_until(lambda: sc.stats["in_msgs"] == received + 5)  # one in the callback, four waiting
        sc.drain(timeout=10)
        assert len(handled) == 5, f"drain() returned with {len(handled)} of 5 messages handled"
        assert sorted(f.result(timeout=5).data for f in futures) == [b"done %d" % i for i in range(5)]
    assert sc.is_closed


@pytest.mark.timeout(60)
def test_a_client_drain_lets_consume_and_messages_finish_what_they_received(server, js, stream, subj):
    publish(js, subj, 20)
    for durable in ("handled", "iterated"):
        stream.create_consumer(durable_name=durable, ack_policy="explicit")
    sc = jss.connect(server.url, name="drained-contexts")
    sjs = sc.jetstream()
    handled, iterated, iteration_end = [], [], []

    def handler(msg):
        time.sleep(0.01)
        msg.ack()
        handled.append(msg.metadata.sequence.stream)

    def iterate(ctx):
        try:
            for msg in ctx:
                time.sleep(0.01)
                msg.ack()
                iterated.append(msg.metadata.sequence.stream)
            iteration_end.append("ended")
        except Exception as exc:
            iteration_end.append(exc)

    sjs.consumer(stream.name, "handled").consume(handler, max_messages=20)
    reader = threading.Thread(target=iterate, args=(sjs.consumer(stream.name, "iterated").messages(max_messages=20),))
    reader.start()
    for durable in ("handled", "iterated"):  # everything is in the client: buffered or in hand
        wait_until(lambda: js.consumer_info(stream.name, durable).delivered.stream_seq == 20)
    sc.drain(timeout=10)
    reader.join(5)
    assert handled == list(range(1, 21)) and iterated == list(range(1, 21)) and iteration_end == ["ended"]
    for durable in ("handled", "iterated"):  # every ack was sent before the close
        info = wait_until(lambda: (i := js.consumer_info(stream.name, durable)).ack_floor.stream_seq == 20 and i)
        assert info.num_ack_pending == 0 and info.num_redelivered == 0


@pytest.mark.timeout(60)
def test_core_subscription_slow_reader_is_bounded(server):
    """A core subscription nobody reads keeps at most pending_msgs_limit
    messages, drops the rest (counted in sub.dropped) and reports a slow consumer."""
    reported = []
    client = jss.connect(server.url, name="slow-reader", error_cb=reported.append)
    sender = jss.connect(server.url, name="fast-sender")
    try:
        sub = client.subscribe("slow", pending_msgs_limit=1000)
        client.flush()
        for i in range(5000):
            sender.publish("slow", b"%d" % i)
        sender.flush()
        client.flush()
        wait_until(lambda: sub.pending() + sub.dropped == 5000, timeout=10)  # all kept or dropped
        assert sub.pending() <= 1000, f"{sub.pending()} messages queued with pending_msgs_limit=1000"
        assert sub.dropped == 5000 - sub.pending()

        def slow_reports():
            return [e for e in reported if "slow" in f"{type(e).__name__} {e}".lower()]

        try:
            wait_until(slow_reports, timeout=5)
        except AssertionError:  # not through error_cb: then reading the subscription must say so
            with pytest.raises(jss.JetStreamError, match="(?i)slow"):
                sub.next_msg(timeout=1)
    finally:
        sender.close()
        client.close()


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


# -- publishes, requests and pulls the server refuses --------------------------------------


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


# -- protocol lines over the server's max_control_line ------------------------------------


@pytest.mark.timeout(60)
def test_every_protocol_line_over_max_control_line_is_refused_and_the_client_stays_up(server, nc, js, stream, subj):
    # Each fits the 4096-byte limit on its own and not with what the line adds
    # (the queue group, the reply, the reply inbox the client makes).
    near = "bad." + "y" * 4000
    push = js.create_push_consumer(stream.name, durable_name="far", deliver_subject="deliver." + "d" * 4100)
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


# -- a bad call is refused and never closes the shared client ------------------------------


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
