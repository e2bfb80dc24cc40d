"""Core publish queues instead of handing each message to the loop thread:
order per thread with acks and later calls, nothing lost on close, errors in
the calling thread, and a bound on what waits when the server does not read."""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import publish, wait_until
from .test_memory import MIB, rss_bytes

THREADS, PER_THREAD = 4, 25_000


class Reader:
    """One subscription on a second connection: what arrives from one
    publishing connection keeps its order, so a request from thread k that
    arrives after k's publishes proves they were sent before it."""

    def __init__(self, client: jss.Client) -> None:
        self.next = [0] * THREADS
        self.errors: list = []
        self.done = threading.Event()
        self.sub = client.subscribe("cp.>", cb=self.on_msg)
        client.flush()

    def on_msg(self, msg) -> None:
        kind, k = msg.subject.split(".")[1:3]
        k = int(k)
        if kind == "data":
            if int(msg.data) != self.next[k]:
                self.errors.append(f"thread {k}: got {int(msg.data)}, expected {self.next[k]}")
            self.next[k] = int(msg.data) + 1
            if sum(self.next) == THREADS * PER_THREAD:
                self.done.set()
        else:  # a request: answer with how many of k's publishes came before it
            msg.respond(str(self.next[k]).encode())


@pytest.mark.timeout(180)
def test_publishes_from_threads_with_acks_and_requests_arrive_in_order_and_close_loses_none(server, js, stream):
    subj = f"{stream.name.lower()}.x"
    publish(js, subj, THREADS * 40)
    cons = stream.create_consumer(durable_name="c", ack_policy="explicit", ack_wait=60)
    reader_client = jss.connect(server.url)
    pub_client = jss.connect(server.url)
    try:
        reader = Reader(reader_client)
        answers: dict = {k: [] for k in range(THREADS)}
        failures: list = []

        def work(k: int) -> None:
            try:
                msgs = iter(cons.fetch(40, expires=10))
                for i in range(PER_THREAD):
                    pub_client.publish(f"cp.data.{k}", str(i).encode())
                    if i % 1000 == 999:
                        next(msgs).ack()
                    if i % 5000 == 4999:
                        reply = pub_client.request(f"cp.req.{k}", b"", timeout=10)
                        answers[k].append((i + 1, int(reply.data)))
            except BaseException as exc:  # reported by the main thread
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        pub_client.close()  # at once: what is still queued must go out first
        assert not failures, failures
        # Every request arrived after the publishes its thread made before it.
        for k in range(THREADS):
            assert answers[k] == [(n, n) for n in range(5000, PER_THREAD + 1, 5000)]
        assert reader.done.wait(60), f"received {sum(reader.next)} of {THREADS * PER_THREAD}"
        assert reader.errors == []
        # The acks made between the publishes were sent too: 25 of each thread's 40.
        wait_until(lambda: cons.info().num_ack_pending == THREADS * 15, timeout=10)
    finally:
        pub_client.close()
        reader_client.close()


def test_bad_input_raises_in_the_calling_thread_and_queues_nothing(nc):
    sub = nc.subscribe("cp.ok")
    nc.flush()
    for kwargs in ({"subject": "a b"}, {"subject": ""}, {"subject": "x", "data": 12},
                   {"subject": "x", "headers": {"bad key": "v"}}, {"subject": "x", "reply": "r y"},
                   {"subject": "x", "timeout": -1}, {"subject": "x", "data": b"x" * (nc.max_payload + 1)}):
        with pytest.raises(jss.InvalidOptionError):
            nc.publish(**kwargs)
    nc.publish("cp.ok", b"after", headers={"K": "v"})
    msg = sub.next_msg(timeout=5)
    assert (msg.data, msg.headers) == (b"after", {"K": "v"})
    assert nc.stats["out_msgs"] >= 1


def test_a_publish_waits_for_room_then_fails_clearly_when_the_server_does_not_read(private_server):
    client = jss.connect(private_server.url, pending_size=256 * 1024)
    try:
        private_server.pause()
        try:
            payload = b"p" * 1024
            with pytest.raises(jss.TimeoutError, match="pending_size"):
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:  # kernel buffers take some MiB first
                    client.publish("cp.stuck", payload, timeout=0.5)
            assert client._conn.outbox.pub_bytes <= 256 * 1024
        finally:
            private_server.resume()
        client.flush(timeout=10)  # the queued ones go out once it reads again
    finally:
        client.close()


@pytest.mark.timeout(300)
def test_rss_stays_flat_over_a_million_publishes_to_a_slow_server(private_server):
    limit = 512 * 1024
    client = jss.connect(private_server.url, pending_size=limit)
    outbox = client._conn.outbox
    stop = threading.Event()
    worst = [0]

    def slow_server() -> None:  # reads in bursts: 30 ms frozen, 30 ms running
        while not stop.is_set():
            private_server.pause()
            stop.wait(0.03)
            private_server.resume()
            stop.wait(0.03)

    def watch() -> None:
        while not stop.is_set():
            worst[0] = max(worst[0], outbox.pub_bytes)
            stop.wait(0.001)

    payload = b"r" * 100
    try:
        for _ in range(100_000):  # warm up: buffers and caches at their working size
            client.publish("cp.rss", payload, timeout=30)
        client.flush(timeout=30)
        before = rss_bytes()
        helpers = [threading.Thread(target=slow_server), threading.Thread(target=watch)]
        for t in helpers:
            t.start()
        try:
            for _ in range(1_000_000):
                client.publish("cp.rss", payload, timeout=30)
        finally:
            stop.set()
            for t in helpers:
                t.join(5)
            private_server.resume()
        client.flush(timeout=30)
        growth = rss_bytes() - before
        assert worst[0] <= limit + len(payload)  # the bound on queued bytes held
        assert worst[0] > limit // 2  # and was reached: the server really was slow
        assert growth < 20 * MIB, f"RSS grew {growth / MIB:.1f} MiB"
        assert client.stats["out_msgs"] >= 1_100_000
    finally:
        client.close()


@pytest.mark.parametrize("queued_before", [False, True], ids=["idle", "behind-queued-publishes"])
def test_a_reply_goes_out_at_once_not_held_for_a_batch(server, monkeypatch, queued_before):
    # Queued publishes wait up to the outbox's DELAY for company; a reply's
    # requester waits for it, so respond() must not. With the delay at 60 s
    # every request below would time out if a reply were held for a batch.
    from jetstream_sync._core.outbox import AckOutbox

    monkeypatch.setattr(AckOutbox, "DELAY", 60.0)
    with jss.connect(server.url) as responder, jss.connect(server.url) as nc:
        side = nc.subscribe("cp.side")
        nc.flush()

        def answer(msg) -> None:
            if queued_before:  # an earlier publish of this thread is queued: it goes first, and the reply at once
                responder.publish("cp.side", msg.data)
            msg.respond(msg.data)

        responder.subscribe("cp.echo", cb=answer)
        responder.flush()
        for i in range(20):
            assert nc.request("cp.echo", b"%d" % i, timeout=5).data == b"%d" % i
        if queued_before:
            assert [side.next_msg(timeout=5).data for _ in range(20)] == [b"%d" % i for i in range(20)]


def test_a_publish_with_a_reply_subject_goes_out_at_once(server, monkeypatch):
    from jetstream_sync._core.outbox import AckOutbox

    monkeypatch.setattr(AckOutbox, "DELAY", 60.0)  # as above: held for a batch, nothing would arrive
    with jss.connect(server.url) as nc, jss.connect(server.url) as other:
        sub = other.subscribe("cp.manual")
        other.flush()
        nc.publish("cp.manual", b"q", reply="cp.answers")
        msg = sub.next_msg(timeout=5)
        assert (msg.data, msg.reply) == (b"q", "cp.answers")
