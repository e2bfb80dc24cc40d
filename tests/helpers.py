"""Test helpers shared by the integration tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import sys
import threading

import pytest

from jetstream_sync.testing import wait_until


def left_for_ack_wait(cons, handed, total: int, timeout: float = 2.0) -> int:
    """After a context over ``cons`` has closed, with every message in
    ``handed`` (stream sequences, of a stream of ``total``) acked: how many
    delivered messages wait out AckWait, checked long before it.

    The server keeps a NAK'd message, and one it could not deliver once the
    interest was gone, in num_ack_pending, queued for immediate redelivery
    that a pull gets before anything new; so no-wait pulls for the pending
    ones get them all at once unless some wait for AckWait. They are acked;
    then, when none is left, the consumer must show nothing pending or
    waiting, everything delivered acked and the rest still in the stream."""
    seen = set(handed)
    assert len(seen) == len(handed), "a message was handed out twice"

    def acks_in():
        info = cons.info()
        return info if info.num_ack_pending == info.delivered.stream_seq - len(seen) else None

    info = wait_until(acks_in, timeout=timeout)
    pending = set(range(1, info.delivered.stream_seq + 1)) - seen

    def probe():
        if not pending:
            return True
        for msg in cons.fetch_no_wait(len(pending)):
            seq = msg.metadata.sequence.stream
            pending.discard(seq)
            seen.add(seq)
            msg.ack()
        return not pending

    try:
        wait_until(probe, timeout=timeout)
    except AssertionError:
        return len(pending)

    def settled():
        i = cons.info()
        return i if i.num_ack_pending == 0 and i.num_waiting == 0 and i.ack_floor.stream_seq == i.delivered.stream_seq else None

    final = wait_until(settled, timeout=timeout)
    assert seen == set(range(1, final.delivered.stream_seq + 1))
    assert final.num_pending == total - final.delivered.stream_seq  # nothing lost
    return 0


def info_once(cons, done, timeout: float = 5.0):
    """The consumer's info once ``done(info)`` holds, else the last one read
    after ``timeout`` seconds, for the test's own asserts to explain. The
    server takes acks in on its own time, after it answered the PING of a
    flush and after the connection that sent them is gone: a count read at
    once can be from before them."""
    last = []

    def check():
        info = cons.info()
        last[:] = [info]
        return done(info)

    try:
        wait_until(check, timeout=timeout)
    except AssertionError:
        pass
    return last[0]


class Publishing:
    """Another client publishing ``payload`` to ``subject`` on a thread, in
    bursts, until the ``with`` block ends."""

    def __init__(self, url: str, subject: str, payload: bytes):
        self._url, self._subject, self._payload = url, subject, payload
        self._going = threading.Event()
        self._thread = threading.Thread(target=self._run, name="publishing", daemon=True)

    def _run(self):
        import jetstream_sync as jss

        with jss.connect(self._url) as client:
            js = client.jetstream()
            while self._going.is_set():
                for _ in range(50):
                    js.publish_async(self._subject, self._payload)
                js.publish_async_complete(timeout=10)

    def __enter__(self) -> "Publishing":
        self._going.set()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._going.clear()
        self._thread.join(15)


@contextlib.contextmanager
def loop_held(nc, bound: float = 10.0):
    """The client's loop thread kept busy (for at most ``bound`` seconds)
    while the block runs: whatever reaches its socket meanwhile, statuses
    included, is handled only after the block, in the order it came."""
    held, release = threading.Event(), threading.Event()

    async def hold(_client):
        held.set()
        release.wait(bound)  # noqa: ASYNC251  not a wait: the loop busy is the point

    holder = threading.Thread(target=nc.run_async, args=(hold,), kwargs=dict(timeout=bound + 5), daemon=True)
    holder.start()
    try:
        assert held.wait(bound), "the loop was not held"
        yield
    finally:
        release.set()
        holder.join(bound + 5)


def end_with_the_loop_busy(nc, ctx, end: str, busy: float = 0.1) -> None:
    """``ctx.stop()`` or ``ctx.drain()`` called on the loop thread, the
    shutdown let take its first step (its UNSUB and PING written), then the
    loop kept busy for ``busy`` seconds, as parsing a large read would."""

    async def end_then_busy(_client):
        getattr(ctx, end)()  # on the loop thread: its shutdown is among the next things the loop runs
        await asyncio.sleep(0)  # the shutdown starts its task
        await asyncio.sleep(0)  # whose first step writes the UNSUB and the PING
        time.sleep(busy)  # noqa: ASYNC251  not a wait: the loop busy is the point

    nc.run_async(end_then_busy, timeout=busy + 5)


def raw_pull(nc, stream: str, consumer: str, batch: int, expires: float = 2.0, timeout: float = 5.0):
    """Pull up to ``batch`` messages with a hand-made MSG.NEXT request on a core
    subscription; stops at the first status message. Returns the user messages."""
    import json

    import jetstream_sync as jss

    inbox = f"_INBOX.rawpull.{time.monotonic_ns()}"
    sub = nc.subscribe(inbox)
    try:
        body = json.dumps({"batch": batch, "expires": int(expires * 1e9)}).encode()
        nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", body, reply=inbox)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < batch:
            try:
                msg = sub.next_msg(timeout=max(0.01, deadline - time.monotonic()))
            except jss.TimeoutError:
                break
            if msg.headers and "Status" in msg.headers and not msg.data:
                break
            out.append(msg)
        return out
    finally:
        sub.unsubscribe()


def publish(js, subject: str, n: int, payload: bytes = b"", start: int = 0):
    """Publish ``n`` messages (payload, or "0", "1", … when empty) and wait for every ack."""
    futures = [js.publish_async(subject, payload or str(start + i).encode()) for i in range(n)]
    assert js.publish_async_complete(timeout=60)
    return [f.result().seq for f in futures]


class PullSpy:
    """Counts the pull requests sent for one consumer, read off the wire."""

    def __init__(self, nc, stream: str, consumer: str = "*"):
        self._sub = nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}")
        nc.flush()
        self.bodies = []

    def collect(self):
        import json

        import jetstream_sync as jss

        while True:
            try:
                self.bodies.append(json.loads(self._sub.next_msg(timeout=0.2).data or b"{}"))
            except jss.TimeoutError:
                return self.bodies

    @property
    def count(self) -> int:
        return len(self.collect())


def sized_payload(stream: str, consumer: str, subject: str, size: int) -> bytes:
    """A payload making each of the first 9 messages exactly ``size`` bytes as the
    server counts them (subject + v1 ack reply + payload)."""
    reply = 8 + len(stream) + 1 + len(consumer) + len(".1.1.1.") + 19 + len(".0")
    return b"x" * (size - len(subject) - reply)


class BlockedNext:
    """A thread blocked in ``ctx.next()``; records what ended the wait and when."""

    def __init__(self, ctx, timeout=None):
        import threading

        self.result = None
        self.error = None
        self.ended = None
        self.thread = threading.Thread(target=self._run, args=(ctx, timeout), daemon=True)
        self.thread.start()

    def _run(self, ctx, timeout):
        try:
            self.result = ctx.next(timeout=timeout)
        except Exception as exc:
            self.error = exc
        self.ended = time.monotonic()

    def join(self, timeout: float = 10.0) -> "BlockedNext":
        self.thread.join(timeout)
        return self


class Bounded:
    """Run ``fn()`` on a daemon thread; ``join()`` reports how it ended.

    ``finished`` is False when it was still running at the deadline (a hang),
    otherwise ``result`` or ``error`` holds the outcome and ``elapsed`` the time.
    """

    def __init__(self, fn, name="bounded"):
        self.result = None
        self.error = None
        self.elapsed = None
        self._fn = fn
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = time.monotonic()
        self._thread.start()

    def _run(self):
        try:
            self.result = self._fn()
        except BaseException as exc:  # KeyboardInterrupt included: report, never kill the runner
            self.error = exc
        self.elapsed = time.monotonic() - self._started

    def join(self, timeout):
        self._thread.join(timeout)
        return self

    @property
    def finished(self):
        return not self._thread.is_alive()

    @property
    def thread(self):
        return self._thread


def wait_blocked(thread, timeout=5.0):
    """Wait until ``thread`` sits still in a blocking call: its innermost Python
    frame stays the same, at the same instruction, over a few samples."""

    def still():
        seen = set()
        for _ in range(3):
            frame = sys._current_frames().get(thread.ident)
            if frame is None:
                return False
            seen.add((id(frame), frame.f_lasti))
            time.sleep(0.02)
        return len(seen) == 1

    wait_until(still, timeout=timeout)


def make_tls_files(directory, key_password: bytes = b"") -> dict:
    """A CA, a server certificate for 127.0.0.1 and a client certificate,
    written as PEM files into ``directory``; their paths by name ("ca",
    "server", "server_key", "client", "client_key"). Needs ``cryptography``;
    the client key is encrypted with ``key_password`` when one is given."""
    import datetime
    import ipaddress
    import os

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def cert(subject, key, issuer, issuer_key, *extensions):
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        for ext in extensions:
            builder = builder.add_extension(ext, critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    files = {
        "ca": cert("test-ca", ca_key, "test-ca", ca_key, x509.BasicConstraints(ca=True, path_length=None)),
        "server": cert(
            "server", server_key, "test-ca", ca_key,
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
        ),
        "client": cert("client", client_key, "test-ca", ca_key, x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])),
        "server_key": server_key,
        "client_key": client_key,
    }
    paths = {}
    for label, obj in files.items():
        if isinstance(obj, x509.Certificate):
            pem = obj.public_bytes(serialization.Encoding.PEM)
        else:
            secret = key_password if label == "client_key" else b""
            encryption = serialization.BestAvailableEncryption(secret) if secret else serialization.NoEncryption()
            pem = obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        paths[label] = os.path.join(str(directory), f"{label}.pem")
        with open(paths[label], "wb") as f:
            f.write(pem)
    return paths


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
    from jetstream_sync.testing import NatsServer, free_port

    port = free_port()
    store = tmp_path / f"{name}-store"
    store.mkdir()
    cfg = tmp_path / f"{name}.conf"
    cfg.write_text(body.replace("{port}", str(port)).replace("{store}", str(store)))
    return NatsServer(port=port, store_dir=str(store), jetstream=False, args=["-c", str(cfg)]).start()


def assert_client_works(nc, js, subj):
    """The client is connected, and a JetStream publish on it is acked."""
    import jetstream_sync as jss

    assert nc.is_connected and not nc.is_closed
    ack = js.publish(subj, b"still-works", timeout=5)
    assert isinstance(ack, jss.PubAck) and ack.seq > 0
    assert nc.is_connected and not nc.is_closed


def first(fetch_result):
    """The first message of a fetch (the rest, if any, is NAK'd by close())."""
    with fetch_result as r:
        for m in r:
            return m
    raise AssertionError("the fetch returned no message")


def stream_messages(stream):
    """How many messages ``stream`` holds now."""
    return stream.info().state.messages


N_BUSY = 3000


def marker_then_updates(js, subject_of, body, open_watch, list_all):
    """Write N_BUSY entries, open a watch, write N_BUSY more before reading
    it: the marker must follow the first N_BUSY, the rest come as updates,
    and a listing still sees all of them."""

    def write(first):
        for i in range(first, first + N_BUSY):
            js.publish_async(subject_of(i), body(i), headers={"Nats-Rollup": "sub"})
        assert js.publish_async_complete(timeout=30)

    write(0)
    with open_watch() as w:
        write(N_BUSY)  # while the initial values are still on their way
        seen = 0
        while w.next(timeout=5) is not None and seen <= 2 * N_BUSY:
            seen += 1
        assert seen == N_BUSY
        assert sum(1 for _ in iter(lambda: _next_or_none(w), None)) == N_BUSY
    assert len(list_all()) == 2 * N_BUSY


def _next_or_none(w):
    import jetstream_sync as jss

    try:
        return w.next(timeout=1)
    except jss.TimeoutError:
        return None


def process_gone(pid: int) -> bool:
    """The process ``pid`` no longer runs: it does not exist, or it is a zombie
    that its new parent (init, when its own died) has not reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:  # no /proc (not Linux): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def children_of(pid: int) -> list:
    """The pids of the child processes of ``pid`` (Linux /proc)."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(p) for p in f.read().split()]
    return found


def survivors_of_sigkill(proc, pids, timeout: float = 10.0) -> list:
    """SIGKILL ``proc`` (a Popen) and poll until every process of ``pids`` is
    gone; those still running after ``timeout`` seconds, killed then so that
    nothing is left behind."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + timeout
    while not all(process_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if not process_gone(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def jetstream_answers(js) -> bool:
    """JetStream answers an API request on this connection (a fresh cluster's
    servers answer INFO before their JetStream does)."""
    from jetstream_sync import JetStreamError

    try:
        js.account_info()
        return True
    except JetStreamError:
        return False


def stream_placed(js, stream: str) -> bool:
    """The replicated ``stream`` has a leader and every replica is current."""
    c = js.stream_info(stream).cluster
    return bool(c and c.leader and c.replicas and all(r.current for r in c.replicas))


@pytest.fixture(autouse=True)
def spark_clients_closed_after():
    """Imported by a module that runs the Spark helpers in this process (as an
    executor would): each test's shared clients and KVLookup watches end with it."""
    yield
    from jetstream_sync.spark._clients import close_all  # the spark extra: only where used

    close_all()
