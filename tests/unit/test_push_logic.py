"""Push consumers without a server: options, ack-subject sequences, the
engine's flow-control and gap bookkeeping fed by hand."""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest

import jetstream_sync as jss
from jetstream_sync._engines.push import PushEngine, PushTarget, _FlowControl
from jetstream_sync._engines.receiver import Receiver
from jetstream_sync._core.message import WireMsg, consumer_sequence
from jetstream_sync.options import PushOptions, push_options

# -- options ---------------------------------------------------------------------


def test_push_options_default_alarm_is_three_heartbeats():
    assert push_options(2.0, {}) == PushOptions(6.0)
    assert push_options(None, {}).heartbeat_alarm == 0.0  # no heartbeats: no watchdog
    assert push_options(1.0, {"heartbeat_alarm": 10}).heartbeat_alarm == 10.0


@pytest.mark.parametrize(
    "hb, given, text",
    [
        (1.0, {"max_messages": 10}, "max_messages"),
        (1.0, {"expires": 5}, "max_ack_pending"),  # the hint names the consumer config
        (None, {"heartbeat_alarm": 3}, "needs a consumer with idle_heartbeat"),
        (2.0, {"heartbeat_alarm": 1}, "at least 2s"),
        (2.0, {"heartbeat_alarm": "3"}, "number of seconds"),
    ],
)
def test_push_options_refused(hb, given, text):
    with pytest.raises(jss.InvalidOptionError, match=text):
        push_options(hb, given)


# -- ack subjects ------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply, seq",
    [
        (b"$JS.ACK.S.C.1.10.7.1700000000000000000.3", 7),  # v1
        (b"$JS.ACK.dom.HASH.S.C.2.10.8.1700000000000000000.3.rand", 8),  # v2 with a trailing token
        (b"$JS.ACK._.HASH.S.C.2.10.9.1700000000000000000.3", 9),  # v2, no domain
        (b"_INBOX.abc", 0),
        (b"$JS.ACK.S.C.1.10.x.1.3", 0),
        (b"", 0),
    ],
)
def test_consumer_sequence(reply, seq):
    assert consumer_sequence(reply) == seq


def test_sequence_mismatch_error():
    err = jss.ConsumerSequenceMismatchError(5, 9)
    assert isinstance(err, jss.JetStreamError)
    assert (err.expected, err.received, err.missed) == (5, 9, 4)
    assert str(err) == "consumer sequence mismatch: expected 5, got 9"


# -- the engine, fed by hand ----------------------------------------------------------


class _Outbox:
    def put_many(self, items: List[Tuple[bytes, bytes]]) -> None:
        pass


class _Conn:
    """What the engine touches of the connection in these paths."""

    closed = closing = forked = in_child = False

    def __init__(self) -> None:
        self.sent: List[str] = []
        self.soon: List[Any] = []
        self.outbox = _Outbox()

    def send_pub(self, subject: str, reply: str, payload: bytes) -> bool:
        self.sent.append(subject)
        return True

    def call_soon(self, fn: Any, *args: Any) -> None:
        self.soon.append((fn, args))


def _engine(group: str = "") -> Tuple[PushEngine, Receiver, _Conn, List[BaseException]]:
    conn = _Conn()
    receiver = Receiver(conn)  # type: ignore[arg-type]
    target = PushTarget("S", "C", "$JS.API.CONSUMER.INFO.S.C", 30.0, 5.0, "deliver", group, 1.0)
    engine = PushEngine(conn, receiver, target, PushOptions(3.0))  # type: ignore[arg-type]
    reports: List[BaseException] = []
    engine._report = reports.append  # type: ignore[method-assign]
    engine._accept = lambda msgs: None  # type: ignore[method-assign]  # no loop: keep nothing
    return engine, receiver, conn, reports


def _msg(cseq: int) -> WireMsg:
    return WireMsg(b"s", b"$JS.ACK.S.C.1.%d.%d.0.0" % (cseq, cseq), b"x", None, None)


def test_make_marks_flow_control_requests_only():
    engine, *_ = _engine()
    fc = engine.make(b"deliver", b"$JS.FC.S.C.1", b"", None, b"NATS/1.0 100 FlowControl Request\r\n\r\n")
    assert isinstance(fc, _FlowControl) and fc.reply == b"$JS.FC.S.C.1"
    plain = engine.make(b"s", b"$JS.ACK.S.C.1.1.1.0.0", b"", None, b"NATS/1.0\r\nA: b\r\n\r\n")
    assert isinstance(plain, WireMsg)


def test_flow_control_waits_for_the_messages_before_it():
    engine, receiver, conn, _ = _engine()
    engine._recv_msgs = 0
    engine._flow_control("$JS.FC.1")  # nothing came before it: answered at once
    assert conn.sent == ["$JS.FC.1"] and engine._push_stats.flow_control_replies == 1
    engine._recv_msgs = 5  # five arrived, none taken
    engine._flow_control("$JS.FC.2")
    assert conn.sent == ["$JS.FC.1"] and receiver.refill_at == 4  # the 5th take asks
    engine.want_more()
    assert not conn.soon  # not due yet


def test_a_stalled_heartbeat_is_answered_at_once_and_clears_the_request():
    engine, receiver, conn, _ = _engine()
    engine._recv_msgs = 5
    engine._flow_control("$JS.FC.2")
    engine._on_status("100", "Idle Heartbeat", {"Nats-Consumer-Stalled": "$JS.FC.2"})
    assert conn.sent == ["$JS.FC.2"] and engine._push_stats.stalled_replies == 1
    assert receiver.refill_at == 1 << 62  # nothing pending any more


def test_gaps_in_runs_and_heartbeats():
    engine, _, _, reports = _engine()
    engine.on_msgs([_msg(1), _msg(2), _msg(3)])
    engine.on_msgs([_msg(4)])
    assert not reports
    engine.on_msgs([_msg(5), _msg(7), _msg(8)])  # 6 lost inside a run
    engine.on_msgs([_msg(10)])  # 9 lost between runs
    engine._on_status("100", "Idle Heartbeat", {"Nats-Last-Consumer": "12"})  # 11, 12 lost at the end
    assert [(e.expected, e.received) for e in reports] == [(6, 7), (9, 10), (11, 13)]  # type: ignore[attr-defined]
    engine._on_status("100", "Idle Heartbeat", {"Nats-Last-Consumer": "12"})
    assert len(reports) == 3


def test_no_gap_checks_in_a_deliver_group():
    engine, _, _, reports = _engine(group="workers")
    engine.on_msgs([_msg(1), _msg(5)])
    engine._on_status("100", "Idle Heartbeat", {"Nats-Last-Consumer": "9"})
    assert not reports
