"""The async publisher's PubAck replies: the C accelerator's router resolves
the plain ones in the parser's loop, and every future ends as the Python
path (``_on_reply`` and ``_done``) leaves it, whatever watches it."""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any, Dict, List, Tuple

import pytest

from jetstream_sync import errors
from jetstream_sync._core import publisher as _publisher
from jetstream_sync._core import wire as _wire
from jetstream_sync._core.publisher import AsyncPublisher, PubAckFuture
from jetstream_sync._core.wire import FastParser

from .fakes import FakeLoopThread, FakeOutbox
from .test_wire import FakeClient

SPEEDUPS = _wire.load_speedups()
PREFIX = b"_INBOX.abc."
SID = 7


class PublisherConn:
    """What an AsyncPublisher touches of its connection before anything is sent."""

    nc = None

    def __init__(self) -> None:
        self.loop_thread = FakeLoopThread()
        self.outbox = FakeOutbox()

    def add_listener(self, event: str, fn: Any) -> Any:
        return lambda: None

    def timed_out(self, what: str) -> BaseException:
        return errors.TimeoutError(what)


def new_publisher(use_c: bool, monkeypatch: pytest.MonkeyPatch, max_pending: int = 4000) -> AsyncPublisher:
    with monkeypatch.context() as m:
        if not use_c:
            m.setattr(_publisher, "load_speedups", lambda: None)
        pub = AsyncPublisher(PublisherConn(), max_pending)  # type: ignore[arg-type]
    pub._prefix = PREFIX
    return pub


def track(pub: AsyncPublisher, token: bytes, subject: str = "s.a") -> PubAckFuture:
    future = PubAckFuture(pub, subject, b"payload", {"A": "1"}, b"NATS/1.0\r\nA: 1\r\n\r\n", deadline=1e12)
    pub._inflight[token] = future
    pub._submitted += 1
    return future


def reply(token: bytes, data: bytes) -> bytes:
    return b"MSG %s%s %d %d\r\n%s\r\n" % (PREFIX, token, SID, len(data), data)


def no_responders(token: bytes) -> bytes:
    status = b"NATS/1.0 503\r\n\r\n"
    return b"HMSG %s%s %d %d %d\r\n%s\r\n" % (PREFIX, token, SID, len(status), len(status), status)


def parse(pub: AsyncPublisher, stream: Any, use_c: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read ``stream`` (bytes, or a list of reads) as the connection's parser does."""
    reads = [stream] if isinstance(stream, bytes) else stream
    with monkeypatch.context() as m:
        if not use_c:
            m.setattr(_wire, "load_speedups", lambda: None)
        parser = FastParser(FakeClient(), {SID: pub._reply_handler()}, {})  # type: ignore[arg-type]

    async def run() -> None:
        for data in reads:
            await parser.parse(data)

    asyncio.run(run())


def state(f: PubAckFuture) -> Tuple[Any, ...]:
    """What a user (and the publisher) can see of a future."""
    if not f.done():
        return ("pending", f._data)
    if f.cancelled():
        return ("cancelled",)
    exc = f.exception(0)
    outcome = f.result(0) if exc is None else (type(exc).__name__, str(exc))
    return ("done", outcome, f._data, f._hdr, f._headers)


def scenario(use_c: bool, monkeypatch: pytest.MonkeyPatch) -> Tuple[Any, ...]:
    """Replies of every kind, to futures watched in every way; returns what
    each future, the window and the on_reply fallback saw."""
    pub = new_publisher(use_c, monkeypatch)
    fallback: List[bytes] = []
    on_reply = pub._on_reply

    def counting(subject: bytes, reply_to: bytes, data: bytes, headers: Any) -> None:
        fallback.append(subject[len(PREFIX):])
        on_reply(subject, reply_to, data, headers)

    pub._on_reply = counting  # type: ignore[method-assign]
    futures: Dict[bytes, PubAckFuture] = {}
    for i in range(1, 13):
        futures[b"%d" % i] = track(pub, b"%d" % i)
    futures[b"d1"] = track(pub, b"d1")  # one its caller wrote
    seen: List[Any] = []
    futures[b"3"].add_done_callback(lambda f: seen.append(("callback", f.result(0))))
    assert futures[b"4"].cancel()
    wake = threading.Lock()  # an owner parked on its future (_wait_as_owner)
    wake.acquire()
    futures[b"5"]._wake = wake
    futures[b"9"].retry_with((0, 0.0))  # no more tries after "no responders"
    stream = b"".join([
        reply(b"1", b'{"stream":"S","seq":1}'),
        reply(b"2", b'{"stream":"S",  "seq":0002}  '),
        reply(b"3", b'{"stream":"S","seq":3}'),
        reply(b"4", b'{"stream":"S","seq":4}'),
        reply(b"5", b'{"stream":"S","seq":5}'),
        reply(b"6", b'{"stream":"S","seq":6,"duplicate":true}'),
        reply(b"7", b'{"error":{"code":400,"err_code":10060,"description":"expected stream does not match"}}'),
        reply(b"8", b'not json'),
        no_responders(b"9"),
        reply(b"99", b'{"stream":"S","seq":99}'),  # timed out already: nothing in flight
        reply(b"10", b'{"stream":"T\xc3\xa9","seq":10}'),
        reply(b"11", b'{"stream":"\xff","seq":11}'),  # not UTF-8
        reply(b"d1", b'{"stream":"S","seq":12}'),
        reply(b"1", b'{"stream":"S","seq":1}'),  # again: already resolved
    ])  # fmt: skip
    parse(pub, stream, use_c, monkeypatch)
    released = wake.acquire(blocking=False)
    states = {token.decode(): state(f) for token, f in futures.items()}
    return states, seen, released, pub._completed, sorted(pub._inflight), pub.pending, fallback


@pytest.mark.skipif(SPEEDUPS is None, reason="the C accelerator is not built here")
def test_the_router_ends_every_future_as_the_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    *with_c, c_fallback = scenario(True, monkeypatch)
    *in_python, py_fallback = scenario(False, monkeypatch)
    assert with_c == in_python
    states, seen, released, completed, inflight, pending = in_python
    assert states["1"] == ("done", _publisher.PubAck("S", 1), b"", b"", None)
    assert states["2"][1] == _publisher.PubAck("S", 2)
    assert states["10"][1] == _publisher.PubAck("Té", 10)
    assert states["4"] == ("cancelled",)
    assert states["6"][1].duplicate
    assert states["7"][1][0] == "APIError" and states["8"][1][0] == "JetStreamError"
    assert states["9"][1][0] == "NoRespondersError"
    assert states["12"] == ("pending", b"payload")
    assert seen == [("callback", _publisher.PubAck("S", 3))] and released
    assert states["11"][1][0] == "JetStreamError"  # a name that is not UTF-8 fails its future, not the handler
    assert inflight == [b"12"] and pending == 1 and completed == 12
    # The plain acknowledgements never reached on_reply with the router; the rest did.
    assert sorted(py_fallback) == sorted([b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9", b"99", b"10", b"11",
                                          b"d1", b"1"])  # fmt: skip
    assert sorted(c_fallback) == sorted([b"6", b"7", b"8", b"9", b"11"])


@pytest.mark.parametrize("use_c", [True, False], ids=["c", "python"])
def test_blocked_publishers_are_woken_once_half_the_window_is_free(use_c: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if use_c and SPEEDUPS is None:
        pytest.skip("the C accelerator is not built here")
    pub = new_publisher(use_c, monkeypatch, max_pending=4)
    freed: List[int] = []
    monkeypatch.setattr(pub, "_freed", lambda: freed.append(pub._completed))
    for i in range(1, 5):
        track(pub, b"%d" % i)
    pub._waiters = 1  # a publisher waits for the window
    parse(pub, b"".join(reply(b"%d" % i, b'{"stream":"S","seq":%d}' % i) for i in range(1, 5)), use_c, monkeypatch)
    assert freed == [1, 2, 3, 4] and pub.pending == 0


def test_without_the_accelerator_the_handler_is_on_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    pub = new_publisher(False, monkeypatch)
    assert pub._reply_handler() == pub._on_reply


@pytest.mark.parametrize("use_c", [True, False], ids=["c", "python"])
def test_a_thread_waiting_on_each_future_gets_every_result(use_c: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller asks for each result while the replies are being read: the
    Condition it makes and the router's check of it never miss each other."""
    if use_c and SPEEDUPS is None:
        pytest.skip("the C accelerator is not built here")
    monkeypatch.setattr(_publisher.AsyncPublisher, "kick_quietly", lambda self: None)
    monkeypatch.setattr(_publisher.AsyncPublisher, "check_not_loop_thread", lambda self: None)
    pub = new_publisher(use_c, monkeypatch)
    n = 3000
    futures = [track(pub, b"%d" % i) for i in range(n)]
    got: List[Any] = []
    waiter = threading.Thread(target=lambda: got.extend(f.result(timeout=10).seq for f in futures), daemon=True)
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        waiter.start()
        parse(pub, [reply(b"%d" % i, b'{"stream":"S","seq":%d}' % i) for i in range(n)], use_c, monkeypatch)
        waiter.join(20)
    finally:
        sys.setswitchinterval(old_interval)
    assert not waiter.is_alive() and got == list(range(n))


@pytest.mark.skipif(SPEEDUPS is None, reason="the C accelerator is not built here")
def test_a_publisher_and_its_router_are_collected_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """The router holds its publisher and the publisher's subscription holds
    the router: the collector must see through that cycle (tp_traverse)."""
    import gc
    import weakref

    pub = new_publisher(True, monkeypatch)
    pub._handler = pub._reply_handler()  # type: ignore[attr-defined]  # the cycle, as a subscription makes it
    assert type(pub._handler).__name__ == "PubAckRouter"  # type: ignore[attr-defined]
    gone = weakref.ref(pub)
    del pub
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("use_c", [True, False], ids=["c", "python"])
def test_kept_resolved_futures_cost_the_collector_one_object_each(use_c: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller that keeps its futures (to read their PubAcks later) makes
    every full collection traverse them: a resolved future must not bring a
    second tracked object (a PubAck) along, and each result is a PubAck."""
    import gc

    if use_c and SPEEDUPS is None:
        pytest.skip("the C accelerator is not built here")
    pub = new_publisher(use_c, monkeypatch)
    n = 5000
    futures = [track(pub, b"%d" % i) for i in range(n)]
    gc.collect()
    before = len(gc.get_objects())
    parse(pub, b"".join(reply(b"%d" % i, b'{"stream":"S","seq":%d}' % i) for i in range(n)), use_c, monkeypatch)
    gc.collect()  # a pass untracks what cannot be part of a cycle
    assert len(gc.get_objects()) - before < n // 10
    assert [f.result(0) for f in futures] == [_publisher.PubAck("S", i) for i in range(n)]
    assert futures[0].result(0) == futures[0].result(0) and isinstance(futures[0].result(0), _publisher.PubAck)
    assert "returned PubAck" in repr(futures[0])


def test_compact_acks_keep_each_stream_name_from_many_threads_and_beyond_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compact form of a PubAck gives back its stream and sequence, for
    names added by several loop threads at once and past the name table's size."""
    monkeypatch.setattr(_publisher, "_STREAMS", [])
    monkeypatch.setattr(_publisher, "_STREAM_INDEX", {})
    names = [f"S{i}" for i in range(_publisher._MAX_STREAMS + 50)]
    made: Dict[str, List[Any]] = {}
    start = threading.Barrier(4)

    def add(part: List[str]) -> None:
        start.wait(10)
        for name in part:
            made[name] = [_publisher.compact_ack(name, seq) for seq in (1, 2**70)]

    threads = [threading.Thread(target=add, args=(names[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    for name, acks in made.items():
        assert [_publisher._as_puback(a) for a in acks] == [_publisher.PubAck(name, 1), _publisher.PubAck(name, 2**70)]
    assert len(made) == len(names) and sum(type(a[0]) is tuple for a in made.values()) == 50
