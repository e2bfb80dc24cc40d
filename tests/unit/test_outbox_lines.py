"""The outbox's wire work: the C accelerator's batch of acks and core
publishes is exactly what the Python code makes, and the outbox sends it."""

import collections
import json
import sys
from typing import Any, List, Tuple

import pytest

from jetstream_sync._core import outbox as _outbox
from jetstream_sync._core.outbox import AckOutbox
from jetstream_sync._core.writer import pub_line
from jetstream_sync._core.wire import load_speedups

SPEEDUPS = load_speedups()
needs_c = pytest.mark.skipif(SPEEDUPS is None, reason="the C accelerator is not built here")
BUILDERS = [pytest.param(lambda: SPEEDUPS.ack_batch, marks=needs_c, id="c"), pytest.param(lambda: _outbox.ack_batch, id="python")]


def items() -> List[Tuple[Any, Any]]:
    """Acks as the messages queue them (bytes replies, str ones, every payload
    kind) between core publishes formatted by their callers."""
    out: List[Tuple[Any, Any]] = []
    payloads = [b"+ACK", b"-NAK", b"+WPI", b"+TERM", b"+TERM poison message", b"-NAK " + json.dumps({"delay": 5 * 10**9}).encode(), b""]
    for i in range(200):
        reply = b"$JS.ACK.ORDERS.worker.1.%d.%d.1764472000000000000.%d" % (i, i, 200 - i)
        if i % 5 == 4:
            command = pub_line(b"orders.new.%d" % i, b"" if i % 2 else b"_INBOX.r", b"" if i % 3 else b"NATS/1.0\r\nA: b\r\n\r\n", b"x" * (i % 40))
            out.append((command, len(command) - 40 + i % 40))
        elif i % 7 == 3:
            out.append(("$JS.ACK.zählung.ü.1.%d.%d.1.0" % (i, i), payloads[i % len(payloads)]))
        else:
            out.append((reply, payloads[i % len(payloads)]))
    return out


def expected(queued: List[Tuple[Any, Any]]) -> Tuple[bytes, int, int, int, Any]:
    """The batch by hand: what the server must read, and the counts."""
    parts, size, published, last = [], 0, 0, None
    for subject, payload in queued:
        if type(payload) is int:
            parts.append(subject)
            size += payload
            published += len(subject)
        else:
            encoded = subject if isinstance(subject, bytes) else subject.encode()
            parts.append(b"PUB %s %d\r\n%s\r\n" % (encoded, len(payload), payload))
            size += len(payload)
            last = (subject, payload)
    return b"".join(parts), len(parts), size, published, last


@pytest.mark.parametrize("build", BUILDERS)
def test_a_batch_is_every_queued_ack_and_publish_in_order(build):
    queued = items()
    queue = collections.deque(queued)
    commands, count, size, published, last = build()(queue)
    want = expected(queued)
    assert (commands, count, size, published, last) == want  # last: the last ack, as queued
    assert not queue


@pytest.mark.parametrize("build", BUILDERS)
def test_an_empty_queue_makes_nothing(build):
    assert build()(collections.deque()) == (b"", 0, 0, 0, None)


@needs_c
def test_the_c_batch_keeps_the_last_ack_alive_and_leaks_nothing():
    item = (b"$JS.ACK.S.C.1.1.1.1.0", b"+ACK")
    before = sys.getrefcount(item)
    for _ in range(1000):
        _, _, _, _, last = SPEEDUPS.ack_batch(collections.deque([item]))
        assert last is item
        del last
    assert sys.getrefcount(item) == before


@pytest.mark.parametrize("build", BUILDERS)
@pytest.mark.parametrize("bad", [(b"s", bytearray(b"+ACK")), (b"s", None), (7, b"+ACK"), ("b\udc80ad", b"+ACK"), ("cmd", 12)])
def test_an_item_of_another_shape_raises(build, bad):
    """Only the outbox queues items, so none of these reaches it; a mistake
    there must still raise rather than send something else."""
    good = (b"$JS.ACK.S.C.1.1.1.1.0", b"+ACK")
    with pytest.raises((TypeError, AttributeError, UnicodeEncodeError)):
        build()(collections.deque([good, bad, good]))


class _Conn:
    """What AckOutbox touches of its connection to send."""

    in_child = False
    fast = True
    direct: Any = None
    nc: Any = None
    loop_thread: Any = None

    def __init__(self) -> None:
        self.sent: List[Tuple[bytes, int, int]] = []

    def check_fork(self) -> None:
        pass

    def send_commands(self, data: bytes, msgs: int, size: int) -> bool:
        self.sent.append((data, msgs, size))
        return True

    def spawn(self, coro: Any) -> None:
        coro.close()


@pytest.mark.parametrize("speedups", [pytest.param(True, marks=needs_c, id="c"), pytest.param(False, id="python")])
def test_the_outbox_sends_the_batch_and_remembers_the_last_ack(monkeypatch, speedups):
    if not speedups:
        monkeypatch.setattr(_outbox, "load_speedups", lambda: None)
    conn = _Conn()
    box = AckOutbox(conn)  # type: ignore[arg-type]
    assert box._ack_batch is (SPEEDUPS.ack_batch if speedups else _outbox.ack_batch)
    queued = [item for item in items() if type(item[1]) is not int]  # acks alone: no publish bytes to release
    box._send(collections.deque(queued))
    want = expected(queued)
    assert conn.sent == [(want[0], want[1], want[2])]
    assert box.last_sent == queued[-1]
