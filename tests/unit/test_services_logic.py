"""The pure parts of services and request_many, without a server: ADR-32's
name, version and subject rules, the discovery JSON, the handler pool, and
the end conditions of Replies over a scripted inbox."""

from __future__ import annotations

import datetime
import threading
from typing import List, Optional

import pytest
from freezegun import freeze_time

import jetstream_sync as jss
from jetstream_sync import options
from jetstream_sync._core.message import Msg
from jetstream_sync.replies import Replies
from jetstream_sync.services.model import (
    EndpointInfo, EndpointStats, ServiceInfo, ServiceStats, control_subjects, started_text,
)  # fmt: skip
from jetstream_sync.services.pool import WorkerPool

pytestmark = pytest.mark.timeout(20)


# -- ADR-32's rules ---------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.0.1", "1.2.3", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0+build.1",
                                     "1.0.0-rc.1+build.5", "1.0.0-x-y-z.--"])  # fmt: skip
def test_semver_versions_pass(version):
    assert options.service_options("svc", version, "", None, None, 1).version == version


@pytest.mark.parametrize("version", ["1", "1.0", "01.0.0", "1.0.0-", "1.0.0-01", "v1.0.0", " 1.0.0", "1.0.0\n", "", 1])
def test_other_versions_are_refused(version):
    with pytest.raises(jss.InvalidOptionError, match="SemVer"):
        options.service_options("svc", version, "", None, None, 1)


@pytest.mark.parametrize("name", ["a", "A-b_9", "calc"])
def test_names_of_the_adr_alphabet_pass(name):
    assert options.service_options(name, "1.0.0", "", None, None, 1).name == name
    assert options.endpoint_name(name) == name


@pytest.mark.parametrize("name", ["", "a.b", "a b", "a*", "a>", "é", "a/b", None, 3])
def test_other_names_are_refused(name):
    with pytest.raises(jss.InvalidOptionError):
        options.service_options(name, "1.0.0", "", None, None, 1)
    with pytest.raises(jss.InvalidOptionError):
        options.endpoint_name(name)


def test_service_defaults():
    opts = options.service_options("svc", "1.0.0", "", None, None, options.DEFAULT_SERVICE_WORKERS)
    assert (opts.queue_group, opts.metadata, opts.workers) == ("q", {}, 4)


def test_endpoint_subjects_join_the_group_prefix_and_may_hold_wildcards():
    assert options.endpoint_subject("", "add") == "add"
    assert options.endpoint_subject("calc.v1", "add") == "calc.v1.add"
    assert options.endpoint_subject("calc", "*.sum") == "calc.*.sum"
    assert options.endpoint_subject("calc", ">") == "calc.>"
    for bad in ("", "a..b", "a.>.b", "a b", None):
        with pytest.raises(jss.InvalidOptionError):
            options.endpoint_subject("calc", bad)


def test_group_prefixes_nest_and_refuse_the_full_wildcard():
    assert options.group_prefix("", "calc") == "calc"
    assert options.group_prefix("calc", "v1.*") == "calc.v1.*"
    for bad in (">", "a.>", "", "a..b"):
        with pytest.raises(jss.InvalidOptionError):
            options.group_prefix("calc", bad)


def test_queue_groups_default_to_the_parents():
    assert options.queue_group(None, "q") == "q"
    assert options.queue_group("fast", "q") == "fast"
    for bad in ("", "a b", 5):
        with pytest.raises(jss.InvalidOptionError):
            options.queue_group(bad, "q")


def test_service_errors_become_header_values():
    assert options.service_error(404, "not found") == ("404", "not found")
    assert options.service_error("503", "busy") == ("503", "busy")
    for code, desc in ((None, "x"), ("", "x"), (True, "x"), (500, ""), (500, None), ("5\n0", "x"), (500, "a\r\nb")):
        with pytest.raises(jss.InvalidOptionError):
            options.service_error(code, desc)


def test_metadata_maps_str_to_str():
    assert options.service_metadata("m", {"a": "b"}) == {"a": "b"}
    assert options.service_metadata("m", None) == {}
    for bad in ({"a": 1}, {1: "a"}, ["a"]):
        with pytest.raises(jss.InvalidOptionError):
            options.service_metadata("m", bad)


# -- the discovery JSON ---------------------------------------------------------------------


def test_control_subjects_are_all_by_name_and_by_instance():
    assert control_subjects("PING", "calc", "ID1") == ("$SRV.PING", "$SRV.PING.calc", "$SRV.PING.calc.ID1")


def test_the_answers_carry_the_adr_fields_and_types():
    info = ServiceInfo("calc", "ID1", "1.0.0", {"k": "v"}, "desc", [EndpointInfo("add", "calc.add", "q", {"m": "1"})])
    assert info.ping_dict() == {"type": "io.nats.micro.v1.ping_response", "name": "calc", "id": "ID1",
                                "version": "1.0.0", "metadata": {"k": "v"}}  # fmt: skip
    assert info.as_dict() == {
        "type": "io.nats.micro.v1.info_response", "name": "calc", "id": "ID1", "version": "1.0.0",
        "metadata": {"k": "v"}, "description": "desc",
        "endpoints": [{"name": "add", "subject": "calc.add", "queue_group": "q", "metadata": {"m": "1"}}],
    }  # fmt: skip
    started = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=datetime.timezone.utc)
    stats = ServiceStats("calc", "ID1", "1.0.0", {}, started, [EndpointStats("add", "calc.add", "q", 2, 1, "500:x", 30, 15)])
    assert stats.as_dict() == {
        "type": "io.nats.micro.v1.stats_response", "name": "calc", "id": "ID1", "version": "1.0.0", "metadata": {},
        "started": "2024-05-06T07:08:09.123456Z",
        "endpoints": [{"name": "add", "subject": "calc.add", "queue_group": "q", "num_requests": 2, "num_errors": 1,
                       "last_error": "500:x", "processing_time": 30, "average_processing_time": 15, "data": None}],
    }  # fmt: skip


def test_started_is_utc_whatever_the_zone_given():
    cet = datetime.timezone(datetime.timedelta(hours=1))
    assert started_text(datetime.datetime(2024, 1, 1, 1, 0, tzinfo=cet)) == "2024-01-01T00:00:00.000000Z"


# -- the handler pool -------------------------------------------------------------------------


def test_the_pool_runs_every_item_and_join_waits_for_them_after_close():
    done: List[int] = []
    lock = threading.Lock()

    def run(item: int) -> None:
        with lock:
            done.append(item)

    pool: WorkerPool[int] = WorkerPool(run, 3, "t", limit=100)
    assert all(pool.put(i) for i in range(50))
    assert not pool.join(0.01)  # not closed: never "done"
    pool.close()
    assert pool.join(5)
    assert sorted(done) == list(range(50))
    assert not pool.put(99)


def test_cancel_hands_back_what_did_not_start():
    release = threading.Event()
    started = threading.Event()

    def run(item: int) -> None:
        started.set()
        release.wait(5)

    pool: WorkerPool[int] = WorkerPool(run, 1, "t", limit=100)
    for i in range(5):
        pool.put(i)
    assert started.wait(5)
    left = pool.cancel()
    assert sorted(left) == [1, 2, 3, 4] and pool.queued == 0
    assert not pool.join(0.01)  # the item in hand still runs
    release.set()
    assert pool.join(5)


def test_a_full_pool_refuses_more():
    release = threading.Event()
    pool: WorkerPool[int] = WorkerPool(lambda i: release.wait(5), 1, "t", limit=2)
    results = [pool.put(i) for i in range(4)]  # one may be running already, two wait
    assert results.count(False) >= 1
    release.set()
    pool.close()
    assert pool.join(5)


# -- Replies over a scripted inbox ------------------------------------------------------------


class ScriptedInbox:
    """Hands out ``msgs`` in order, then times out as a quiet inbox does."""

    def __init__(self, msgs: List[Msg]) -> None:
        self.msgs = list(msgs)
        self.unsubscribed = 0
        self.waits: List[Optional[float]] = []

    def next_msg(self, timeout: Optional[float] = 1.0) -> Msg:
        self.waits.append(timeout)
        if self.msgs:
            return self.msgs.pop(0)
        raise jss.TimeoutError("quiet")

    def unsubscribe(self) -> None:
        self.unsubscribed += 1


def msgs(*bodies: bytes) -> List[Msg]:
    return [Msg("_INBOX.x", "", b) for b in bodies]


def opts(**kw):
    base = dict(max_messages=None, max_wait=5.0, stall=None, sentinel=None)
    base.update(kw)
    return options.request_many_options(**base)


def test_max_messages_stops_without_another_wait():
    inbox = ScriptedInbox(msgs(b"a", b"b", b"c"))
    replies = Replies(inbox, opts(max_messages=2), "s")
    assert [m.data for m in replies] == [b"a", b"b"]
    assert len(inbox.waits) == 2 and inbox.unsubscribed == 1


def test_the_stall_gap_bounds_every_wait_after_the_first():
    inbox = ScriptedInbox(msgs(b"a", b"b"))
    assert [m.data for m in Replies(inbox, opts(stall=0.25), "s")] == [b"a", b"b"]
    first, *rest = inbox.waits
    assert 4.5 < first <= 5.0 and rest and all(w <= 0.25 for w in rest)


def test_max_wait_bounds_every_wait():
    inbox = ScriptedInbox(msgs(b"a"))
    replies = Replies(inbox, opts(max_wait=0.5), "s")
    assert [m.data for m in replies] == [b"a"]
    assert all(w is not None and w <= 0.5 for w in inbox.waits)


def test_sentinels_end_without_being_handed_out():
    assert [m.data for m in Replies(ScriptedInbox(msgs(b"a", b"", b"b")), opts(sentinel=True), "s")] == [b"a"]
    stop_at_x = opts(sentinel=lambda m: m.data == b"x")
    assert [m.data for m in Replies(ScriptedInbox(msgs(b"a", b"", b"x", b"b")), stop_at_x, "s")] == [b"a", b""]


def test_a_no_responders_status_raises_and_closes():
    status = Msg("_INBOX.x", "", b"", hdr_raw=b"NATS/1.0 503\r\n\r\n")
    inbox = ScriptedInbox([status])
    replies = Replies(inbox, opts(), "svc.x")
    with pytest.raises(jss.NoRespondersError, match="svc.x"):
        next(replies)
    assert inbox.unsubscribed == 1 and replies.closed


def test_a_raising_sentinel_closes_the_inbox():
    def sentinel(m):
        raise RuntimeError("bad predicate")

    inbox = ScriptedInbox(msgs(b"a"))
    with pytest.raises(RuntimeError):
        next(Replies(inbox, opts(sentinel=sentinel), "s"))
    assert inbox.unsubscribed == 1


def test_close_is_idempotent_and_dropping_the_iterator_closes_it():
    inbox = ScriptedInbox(msgs(b"a", b"b"))
    replies = Replies(inbox, opts(), "s")
    next(replies)
    replies.close()
    replies.close()
    assert list(replies) == [] and inbox.unsubscribed == 1
    other = ScriptedInbox(msgs(b"a"))
    for _ in Replies(other, opts(), "s"):
        break
    assert other.unsubscribed == 1


def test_an_exhausted_deadline_hands_out_what_came_and_ends_without_waiting():
    inbox = ScriptedInbox(msgs(b"a"))
    with freeze_time("2026-01-01", tick=False) as clock:
        replies = Replies(inbox, opts(max_wait=0.5), "s")
        clock.tick(0.6)
        assert [m.data for m in replies] == [b"a"]  # received before the end was read: handed out
        assert inbox.waits and not any(inbox.waits)  # only looks, never waits
