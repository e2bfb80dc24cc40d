"""The service API (ADR-32 "micro") against a real server: endpoints,
groups, discovery JSON, stats, errors, queue groups, stop and drain, and
discovery both ways with a nats-py ``nats.micro`` service."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import datetime
import itertools
import json
import logging
import threading
import time

import pytest

import jetstream_sync as jss

from ..helpers import config_server, wait_until

pytestmark = pytest.mark.timeout(60)

_names = itertools.count(1)
SEMVER_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"  # what nats-py's ServiceStats.from_dict parses


@pytest.fixture
def name():
    return f"svc{next(_names)}"


def echo(req):
    req.respond(req.data)


def ask(nc, subject, verb_data=b"", timeout=2.0):
    return json.loads(nc.request(subject, verb_data, timeout=timeout).data)


# -- endpoints and groups -------------------------------------------------------------


def test_endpoints_groups_and_the_decorator_answer_on_their_subjects(nc, name):
    svc = nc.add_service(name, "1.0.0", description="a calculator", metadata={"team": "x"})

    @svc.endpoint("add", subject=f"{name}.add")
    def add(req):
        a, b = json.loads(req.data)
        req.respond_json(a + b)

    v1 = svc.add_group(name).add_group("v1", queue_group="fast")
    v1.add_endpoint("echo", echo, metadata={"kind": "echo"})
    v1.add_endpoint("any", lambda req: req.respond(req.subject.encode()), subject="any.*")

    assert nc.request(f"{name}.add", b"[2, 3]").data == b"5"
    assert nc.request(f"{name}.v1.echo", b"hi").data == b"hi"
    assert nc.request(f"{name}.v1.any.thing", b"").data == f"{name}.v1.any.thing".encode()
    assert svc.endpoint("same", subject=f"{name}.same")(echo) is echo  # the decorator returns the function

    info = svc.info()
    assert [(e.name, e.subject, e.queue_group, e.metadata) for e in info.endpoints] == [
        ("add", f"{name}.add", "q", {}),
        ("echo", f"{name}.v1.echo", "fast", {"kind": "echo"}),
        ("any", f"{name}.v1.any.*", "fast", {}),
        ("same", f"{name}.same", "q", {}),
    ]
    svc.stop()


def test_a_request_has_data_headers_subject_and_reply(nc, name):
    seen = {}

    def handler(req):
        seen.update(data=req.data, headers=req.headers, subject=req.subject, reply=req.reply)
        req.respond(b"ok", headers={"X-Answer": "yes"})

    svc = nc.add_service(name, "1.0.0")
    svc.add_endpoint("h", handler, subject=f"{name}.h")
    reply = nc.request(f"{name}.h", b"body", headers={"X-Q": "1"})
    assert reply.data == b"ok" and reply.headers == {"X-Answer": "yes"}
    assert seen["data"] == b"body" and seen["headers"] == {"X-Q": "1"}
    assert seen["subject"] == f"{name}.h" and seen["reply"].startswith("_INBOX.")
    svc.stop()


# -- discovery -------------------------------------------------------------------------


def test_discovery_answers_ping_info_and_stats_on_all_three_subjects(nc, name):
    svc = nc.add_service(name, "2.1.0-rc.1+build.5", description="desc", metadata={"region": "eu"})
    svc.add_endpoint("echo", echo, subject=f"{name}.echo", metadata={"m": "1"})
    identity = {"name": name, "id": svc.id, "version": "2.1.0-rc.1+build.5", "metadata": {"region": "eu"}}
    for verb in ("PING", "INFO", "STATS"):
        for subject in (f"$SRV.{verb}", f"$SRV.{verb}.{name}", f"$SRV.{verb}.{name}.{svc.id}"):
            answers = [json.loads(m.data) for m in nc.request_many(subject, max_wait=1.0, stall=0.3)]
            ours = [a for a in answers if a["id"] == svc.id]
            assert len(ours) == 1, subject
            doc = ours[0]
            assert {k: doc[k] for k in identity} == identity
            assert doc["type"] == f"io.nats.micro.v1.{verb.lower()}_response"
            if verb == "PING":
                assert set(doc) == {"type", "name", "id", "version", "metadata"}
            elif verb == "INFO":
                assert set(doc) == {"type", "name", "id", "version", "metadata", "description", "endpoints"}
                assert doc["description"] == "desc"
                assert doc["endpoints"] == [{"name": "echo", "subject": f"{name}.echo", "queue_group": "q", "metadata": {"m": "1"}}]
            else:
                assert set(doc) == {"type", "name", "id", "version", "metadata", "started", "endpoints"}
                datetime.datetime.strptime(doc["started"], SEMVER_TIME)
                assert set(doc["endpoints"][0]) == {
                    "name", "subject", "queue_group", "num_requests", "num_errors", "last_error",
                    "processing_time", "average_processing_time", "data",
                }  # fmt: skip
    svc.stop()


def test_stats_count_requests_errors_and_nanoseconds_and_reset_zeroes_them(nc, name):
    svc = nc.add_service(name, "1.0.0")
    svc.add_endpoint("ok", echo, subject=f"{name}.ok")
    svc.add_endpoint("bad", lambda req: req.respond_error(404, "no such thing"), subject=f"{name}.bad")
    for _ in range(3):
        nc.request(f"{name}.ok", b"x")
    reply = nc.request(f"{name}.bad", b"")
    assert reply.headers == {"Nats-Service-Error": "no such thing", "Nats-Service-Error-Code": "404"}

    def counted():
        return {e["name"]: e for e in ask(nc, f"$SRV.STATS.{name}.{svc.id}")["endpoints"]}

    eps = wait_until(lambda: (lambda e: e if e["ok"]["num_requests"] == 3 and e["bad"]["num_requests"] == 1 else None)(counted()))
    ok, bad = eps["ok"], eps["bad"]
    assert (ok["num_errors"], ok["last_error"]) == (0, "")
    assert (bad["num_errors"], bad["last_error"]) == (1, "404:no such thing")
    assert ok["processing_time"] > 0 and isinstance(ok["processing_time"], int)
    assert ok["average_processing_time"] == ok["processing_time"] // 3
    started = svc.stats().started

    svc.reset()
    after = svc.stats()
    assert all((e.num_requests, e.num_errors, e.last_error, e.processing_time, e.average_processing_time) == (0, 0, "", 0, 0)
               for e in after.endpoints)  # fmt: skip
    assert after.started >= started
    svc.stop()


# -- errors ----------------------------------------------------------------------------


def test_a_raising_handler_answers_500_and_is_logged_with_its_traceback(nc, name, caplog):
    def broken(req):
        raise KeyError("missing")

    svc = nc.add_service(name, "1.0.0")
    svc.add_endpoint("broken", broken, subject=f"{name}.broken")
    with caplog.at_level(logging.ERROR, logger="jetstream_sync.services"):
        reply = nc.request(f"{name}.broken", b"")
        wait_until(lambda: any(r.exc_info for r in caplog.records))
    assert reply.headers["Nats-Service-Error-Code"] == "500"
    assert "KeyError" in reply.headers["Nats-Service-Error"]
    record = next(r for r in caplog.records if r.exc_info)
    assert record.exc_info[0] is KeyError and "broken" in record.getMessage()
    stats = wait_until(lambda: (lambda e: e if e.num_errors == 1 else None)(svc.stats().endpoints[0]))
    assert stats.last_error.startswith("500:KeyError")
    svc.stop()


def test_a_service_error_raised_in_a_handler_is_the_answer(nc, name):
    def refuse(req):
        raise jss.ServiceError(400, "bad input", b'{"field": "a"}')

    svc = nc.add_service(name, "1.0.0")
    svc.add_endpoint("refuse", refuse, subject=f"{name}.refuse")
    reply = nc.request(f"{name}.refuse", b"")
    assert reply.headers == {"Nats-Service-Error": "bad input", "Nats-Service-Error-Code": "400"}
    assert reply.data == b'{"field": "a"}'
    svc.stop()


def test_a_handler_that_answered_then_raised_is_not_answered_twice(nc, name):
    def answer_then_fail(req):
        req.respond(b"the answer")
        raise RuntimeError("after the answer")

    svc = nc.add_service(name, "1.0.0")
    svc.add_endpoint("late", answer_then_fail, subject=f"{name}.late")
    assert [m.data for m in nc.request_many(f"{name}.late", max_wait=1.0, stall=0.3)] == [b"the answer"]
    stats = wait_until(lambda: (lambda e: e if e.num_requests == 1 else None)(svc.stats().endpoints[0]))
    assert (stats.num_errors, stats.last_error) == (1, "500:RuntimeError: after the answer")
    svc.stop()


# -- queue groups ------------------------------------------------------------------------


def test_1000_requests_over_3_instances_in_one_queue_group_are_each_answered_once(server, name):
    clients = [jss.connect(server.url, name=f"instance-{i}") for i in range(3)]
    handled = collections.Counter()
    by_instance = collections.Counter()
    lock = threading.Lock()
    services = []
    for i, c in enumerate(clients):
        svc = c.add_service(name, "1.0.0", workers=2)

        def handler(req, i=i):
            with lock:
                handled[req.data] += 1
                by_instance[i] += 1
            req.respond(req.data)

        svc.add_endpoint("work", handler, subject=f"{name}.work")
        services.append(svc)
    with jss.connect(server.url) as nc:
        payloads = [b"%d" % n for n in range(1000)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda p: nc.request(f"{name}.work", p, timeout=5.0).data, payloads))
        assert replies == payloads
        assert handled == collections.Counter({p: 1 for p in payloads})
        assert sorted(by_instance) == [0, 1, 2]  # every instance took a share
        stats = [s.stats().endpoints[0].num_requests for s in services]
        assert sum(stats) == 1000 and stats == [by_instance[i] for i in range(3)]
    for c in clients:
        c.close()


def test_without_a_shared_queue_group_every_instance_answers(nc, name):
    a = nc.add_service(name, "1.0.0", queue_group="a")
    b = nc.add_service(name, "1.0.0", queue_group="b")
    a.add_endpoint("e", lambda req: req.respond(b"a"), subject=f"{name}.e")
    b.add_endpoint("e", lambda req: req.respond(b"b"), subject=f"{name}.e")
    got = sorted(m.data for m in nc.request_many(f"{name}.e", max_messages=2, max_wait=2.0))
    assert got == [b"a", b"b"]
    a.stop()
    b.stop()


# -- stop and drain -----------------------------------------------------------------------


@pytest.mark.parametrize("end", ["stop", "drain"])
def test_a_service_is_gone_from_discovery_when_stop_and_drain_return(nc, server, name, end):
    """Right after stop() or drain() returns, a PING from another client meets
    no responders: the server has taken in the unsubscribes by then (a PING
    that overtook them was routed here and left unanswered until its
    timeout). Several rounds: the PING has to overtake the UNSUB."""
    with jss.connect(server.url) as other:
        for round_ in range(20):
            svc = nc.add_service(f"{name}r{round_}", "1.0.0")
            svc.add_endpoint("e", echo, subject=f"{name}.r{round_}")
            nc.flush()
            getattr(svc, end)()
            with pytest.raises(jss.NoRespondersError):
                other.request(f"$SRV.PING.{name}r{round_}.{svc.id}", b"", timeout=5)
            with pytest.raises(jss.NoRespondersError):
                other.request(f"{name}.r{round_}", b"", timeout=5)


def test_drain_finishes_the_requests_in_flight_then_ends_discovery(nc, server, name):
    release = threading.Event()
    started = []

    def slow(req):
        started.append(req.data)
        release.wait(10)
        req.respond(b"done " + req.data)

    svc = nc.add_service(name, "1.0.0", workers=2)
    svc.add_endpoint("slow", slow, subject=f"{name}.slow")
    received = nc.stats["in_msgs"]
    with jss.connect(server.url) as requester, concurrent.futures.ThreadPoolExecutor(5) as pool:  # 4 requests, 1 drain
        futures = [pool.submit(requester.request, f"{name}.slow", b"%d" % i, timeout=10.0) for i in range(4)]
        wait_until(lambda: len(started) == 2 and nc.stats["in_msgs"] == received + 4)  # two running, two queued
        drained = pool.submit(svc.drain, 10.0)
        wait_until(lambda: svc.stopped)
        release.set()
        assert drained.result(timeout=15) is True
        assert sorted(f.result(timeout=15).data for f in futures) == [b"done %d" % i for i in range(4)]
        with pytest.raises(jss.NoRespondersError):
            requester.request(f"$SRV.PING.{name}.{svc.id}", b"")
        with pytest.raises(jss.NoRespondersError):
            requester.request(f"{name}.slow", b"")
    assert svc.wait(1.0)


def test_stop_answers_queued_requests_with_503_and_takes_no_more(nc, server, name):
    release = threading.Event()
    running = threading.Event()

    def slow(req):
        running.set()
        release.wait(10)
        req.respond(b"done")

    svc = nc.add_service(name, "1.0.0", workers=1)
    svc.add_endpoint("slow", slow, subject=f"{name}.slow")
    with jss.connect(server.url) as requester, concurrent.futures.ThreadPoolExecutor(3) as pool:
        first = pool.submit(requester.request, f"{name}.slow", b"1", timeout=10.0)
        assert running.wait(5)
        received = nc.stats["in_msgs"]
        queued = pool.submit(requester.request, f"{name}.slow", b"2", timeout=10.0)
        wait_until(lambda: nc.stats["in_msgs"] == received + 1)  # in the service's queue
        svc.stop()
        assert queued.result(timeout=5).headers == {"Nats-Service-Error": "service stopped", "Nats-Service-Error-Code": "503"}
        release.set()
        assert first.result(timeout=5).data == b"done"  # the handler in hand finished
        with pytest.raises(jss.NoRespondersError):
            requester.request(f"{name}.slow", b"")
    assert svc.wait(5)
    svc.stop()  # idempotent
    assert svc.drain(1.0)


def test_a_handler_may_stop_its_own_service(nc, name):
    svc = nc.add_service(name, "1.0.0")

    def last(req):
        req.respond(b"bye")
        svc.drain(5.0)

    svc.add_endpoint("last", last, subject=f"{name}.last")
    assert nc.request(f"{name}.last", b"").data == b"bye"
    assert svc.wait(5)


def test_closing_the_client_ends_its_services(server, name):
    c = jss.connect(server.url)
    svc = c.add_service(name, "1.0.0")
    svc.add_endpoint("e", echo, subject=f"{name}.e")
    c.close()
    assert svc.stopped and svc.wait(5)


# -- the client's drain ------------------------------------------------------------------


def _requests(requester, subject, count, timeout=5.0):
    """``count`` requests to ``subject`` in flight at once, from threads: their futures."""
    pool = concurrent.futures.ThreadPoolExecutor(count)
    futures = [pool.submit(requester.request, subject, b"%d" % i, timeout=timeout) for i in range(count)]
    pool.shutdown(wait=False)
    return futures


def test_a_client_drain_lets_its_services_answer_every_request_received(server, name):
    answered = []

    def slow(req):
        time.sleep(0.2)
        req.respond(b"done " + req.data)
        answered.append(req.data)

    sc = jss.connect(server.url)
    svc = sc.add_service(name, "1.0.0", workers=2)
    svc.add_endpoint("slow", slow, subject=f"{name}.slow")
    received = sc.stats["in_msgs"]
    with jss.connect(server.url) as requester:
        futures = _requests(requester, f"{name}.slow", 6)
        wait_until(lambda: sc.stats["in_msgs"] == received + 6)  # two running, four queued
        start = time.monotonic()
        sc.drain(timeout=10)
        took = time.monotonic() - start
        assert len(answered) == 6, f"drain returned after {took:.3f}s with {len(answered)} of 6 requests answered"
        assert took < 10
        assert sorted(f.result(timeout=5).data for f in futures) == [b"done %d" % i for i in range(6)]
    assert sc.is_closed and svc.stopped and svc.wait(1.0)


def test_a_client_drain_from_a_handler_waits_for_the_others_not_for_itself(server, name):
    sc = jss.connect(server.url)
    svc = sc.add_service(name, "1.0.0", workers=2)
    slow_running = threading.Event()
    drained_in = []

    def slow(req):
        slow_running.set()
        time.sleep(0.3)
        req.respond(b"slow done")

    def last(req):
        req.respond(b"bye")
        start = time.monotonic()
        sc.drain(timeout=5)
        drained_in.append(time.monotonic() - start)

    svc.add_endpoint("slow", slow, subject=f"{name}.slow")
    svc.add_endpoint("last", last, subject=f"{name}.last")
    with jss.connect(server.url) as requester:
        [slow_reply] = _requests(requester, f"{name}.slow", 1)
        assert slow_running.wait(5)
        assert requester.request(f"{name}.last", b"", timeout=5).data == b"bye"
        assert slow_reply.result(timeout=5).data == b"slow done"
    wait_until(lambda: drained_in, timeout=5)
    assert drained_in[0] < 2.0, f"drain() from a handler took {drained_in[0]:.1f}s: it waited for itself"
    assert sc.is_closed and svc.stopped


def _held(server, name, answer=b"done"):
    """A client with a one-worker service whose handler on ``<name>.held`` sets
    ``running``, waits for ``release``, then answers ``answer`` (None: never)."""
    release, running = threading.Event(), threading.Event()

    def held(req):
        running.set()
        release.wait(10)
        if answer is not None:
            req.respond(answer)

    sc = jss.connect(server.url)
    svc = sc.add_service(name, "1.0.0", workers=1)
    svc.add_endpoint("held", held, subject=f"{name}.held")
    return sc, svc, release, running


def test_a_client_drain_shorter_than_the_handlers_answers_the_queued_requests_with_503(server, name):
    sc, svc, release, running = _held(server, name, answer=None)
    try:
        with jss.connect(server.url) as requester:
            [in_hand] = _requests(requester, f"{name}.held", 1, timeout=1.0)
            assert running.wait(5)
            received = sc.stats["in_msgs"]
            queued = _requests(requester, f"{name}.held", 2)
            wait_until(lambda: sc.stats["in_msgs"] == received + 2)
            start = time.monotonic()
            sc.drain(timeout=0.5)
            took = time.monotonic() - start
            assert took < 5.0, f"drain(timeout=0.5) took {took:.2f}s"  # not until the handler's 10 s
            stopped = {"Nats-Service-Error": "service stopped", "Nats-Service-Error-Code": "503"}
            assert [f.result(timeout=5).headers for f in queued] == [stopped, stopped]
            with pytest.raises(jss.TimeoutError):  # the handler in hand outlived the connection
                in_hand.result(timeout=5)
    finally:
        release.set()
    assert sc.is_closed and svc.stopped


def test_a_client_drain_waits_for_the_handlers_of_a_stopped_service(server, name):
    sc, svc, release, running = _held(server, name)
    with jss.connect(server.url) as requester, concurrent.futures.ThreadPoolExecutor(1) as pool:
        [reply] = _requests(requester, f"{name}.held", 1)
        assert running.wait(5)
        svc.stop()  # the handler in hand goes on
        drained = pool.submit(sc.drain, 10)
        release.set()
        assert reply.result(timeout=5).data == b"done"
        drained.result(timeout=10)
    assert sc.is_closed


def test_handlers_may_request_and_publish_while_the_client_drains(server, js, stream, subj, name):
    release = threading.Event()
    running = threading.Event()
    sc = jss.connect(server.url)
    sjs = sc.jetstream()

    def calls_back(req):
        running.set()
        release.wait(10)
        echoed = sc.request(f"{name}.echo", b"ping", timeout=5).data
        ack = sjs.publish(subj, b"from the handler")
        req.respond(echoed + b" %d" % ack.seq)

    svc = sc.add_service(name, "1.0.0", workers=1)
    svc.add_endpoint("calls", calls_back, subject=f"{name}.calls")
    with jss.connect(server.url) as requester, concurrent.futures.ThreadPoolExecutor(1) as pool:
        requester.subscribe(f"{name}.echo", cb=lambda msg: msg.respond(msg.data))
        requester.flush()
        [reply] = _requests(requester, f"{name}.calls", 1)
        assert running.wait(5)
        drained = pool.submit(sc.drain, 10)
        wait_until(lambda: svc.stopped)  # the drain has begun
        release.set()
        assert reply.result(timeout=5).data == b"ping 1"
        drained.result(timeout=10)
    assert js.get_msg(stream.name, seq=1).data == b"from the handler"
    assert sc.is_closed


def test_with_drains_the_service_at_the_end(nc, name):
    with nc.add_service(name, "1.0.0") as svc:
        svc.add_endpoint("e", echo, subject=f"{name}.e")
        assert nc.request(f"{name}.e", b"x").data == b"x"
    assert svc.stopped and svc.wait(5)
    with pytest.raises(jss.ConnectionClosedError):
        svc.add_endpoint("late", echo)


_PERMISSIONS_CONF = """
listen: 127.0.0.1:{port}
authorization {
  users = [
    {user: u, password: p, permissions: {subscribe: {allow: ["$SRV.>", "_INBOX.>", "ok.>"]}}}
  ]
}
"""


def test_an_endpoint_the_server_refuses_is_logged_and_counted(tmp_path, caplog):
    srv = config_server(tmp_path, "svcperm", _PERMISSIONS_CONF)
    try:
        with jss.connect(f"nats://127.0.0.1:{srv.port}", user="u", password="p") as nc:
            svc = nc.add_service("perm", "1.0.0")
            svc.add_endpoint("fine", echo, subject="ok.fine")
            with caplog.at_level(logging.ERROR, logger="jetstream_sync.services"):
                svc.add_endpoint("refused", echo, subject="secret.refused")
                refused = wait_until(lambda: next((e for e in svc.stats().endpoints if e.num_errors), None))
            assert refused.name == "refused" and "ermission" in refused.last_error
            assert any("refused the subscription" in r.getMessage() for r in caplog.records)
            assert nc.request("ok.fine", b"still served").data == b"still served"
            svc.stop()
    finally:
        srv.cleanup()


# -- checks ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("bad.name", "1.0.0"), {}), (("bad name", "1.0.0"), {}), (("", "1.0.0"), {}), ((None, "1.0.0"), {}),
        (("ok", "1.0"), {}), (("ok", "v1.0.0"), {}), (("ok", "01.0.0"), {}), (("ok", None), {}),
        (("ok", "1.0.0"), {"metadata": {"a": 1}}), (("ok", "1.0.0"), {"metadata": ["a"]}),
        (("ok", "1.0.0"), {"queue_group": "a b"}), (("ok", "1.0.0"), {"workers": 0}),
        (("ok", "1.0.0"), {"workers": 1.5}), (("ok", "1.0.0"), {"description": 5}),
    ],
)
def test_bad_service_arguments_are_refused(nc, args, kwargs):
    with pytest.raises(jss.InvalidOptionError):
        nc.add_service(*args, **kwargs)


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("bad.name", echo), {}), (("ok", "not callable"), {}), (("ok", echo), {"subject": "a..b"}),
        (("ok", echo), {"subject": "a.>.b"}), (("ok", echo), {"subject": ""}), (("ok", echo), {"queue_group": ""}),
        (("ok", echo), {"metadata": {"k": None}}),
    ],
)
def test_bad_endpoint_arguments_are_refused_before_subscribing(nc, name, args, kwargs):
    svc = nc.add_service(name, "1.0.0")
    with pytest.raises(jss.InvalidOptionError):
        svc.add_endpoint(*args, **kwargs)
    with pytest.raises(jss.InvalidOptionError):
        svc.add_group("a.>")
    assert svc.info().endpoints == []
    svc.stop()


def test_async_handlers_are_refused(nc, name):
    async def handler(req):
        pass

    svc = nc.add_service(name, "1.0.0")
    with pytest.raises(jss.InvalidOptionError):
        svc.add_endpoint("a", handler)
    svc.stop()


def test_a_bad_error_code_is_refused_in_the_handler(nc, name):
    outcome = []

    def handler(req):
        for code, desc in ((None, "x"), ("", "x"), (500, ""), ("5\r\n00", "x")):
            try:
                req.respond_error(code, desc)
            except jss.InvalidOptionError:
                outcome.append("refused")
        req.respond(b"fine")

    svc = nc.add_service(name, "1.0.0")
    svc.add_endpoint("h", handler, subject=f"{name}.h")
    assert nc.request(f"{name}.h", b"").data == b"fine"
    assert outcome == ["refused"] * 4
    svc.stop()


# -- nats-py's nats.micro ---------------------------------------------------------------


class NatsPyService:
    """A nats-py ``nats.micro`` service on its own asyncio loop thread."""

    def __init__(self, url: str, name: str) -> None:
        import nats
        import nats.micro

        self._nats, self._micro = nats, nats.micro
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="nats-py-micro", daemon=True)
        self.thread.start()
        self.svc, self.nc = self.run(self._start(url, name))

    def run(self, coro, timeout=10.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self, url, name):
        nc = await self._nats.connect(url)
        svc = await self._micro.add_service(nc, name=name, version="3.0.0", description="nats-py side")

        async def upper(req):
            await req.respond(req.data.upper())

        await svc.add_endpoint(name="upper", subject=f"{name}.upper", handler=upper)
        return svc, nc

    async def request(self, subject, data):
        return (await self.nc.request(subject, data, timeout=2)).data

    def close(self):
        async def stop():
            await self.svc.stop()
            await self.nc.close()

        self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def test_a_nats_py_micro_service_and_ours_discover_and_reach_each_other(nc, server, name):
    from nats.micro.service import ServiceInfo as PyInfo
    from nats.micro.service import ServiceStats as PyStats

    theirs = NatsPyService(server.url, f"{name}py")
    try:
        ours = nc.add_service(name, "1.2.3", metadata={"lang": "python-sync"})
        ours.add_endpoint("double", lambda req: req.respond(req.data * 2), subject=f"{name}.double")

        pings = [json.loads(m.data) for m in nc.request_many("$SRV.PING", max_wait=1.0, stall=0.3)]
        assert {(p["name"], p["id"]) for p in pings} >= {(name, ours.id), (f"{name}py", theirs.svc.id)}

        # Our request() reaches theirs; their client reaches ours.
        assert nc.request(f"{name}py.upper", b"abc").data == b"ABC"
        assert theirs.run(theirs.request(f"{name}.double", b"xy")) == b"xyxy"

        # Each side reads the other's INFO and STATS with its own models.
        their_info = ask(nc, f"$SRV.INFO.{name}py.{theirs.svc.id}")
        assert their_info["type"] == "io.nats.micro.v1.info_response"
        assert [e["subject"] for e in their_info["endpoints"]] == [f"{name}py.upper"]
        their_stats = ask(nc, f"$SRV.STATS.{name}py")
        assert their_stats["endpoints"][0]["num_requests"] == 1
        our_info = PyInfo.from_dict(json.loads(theirs.run(theirs.request(f"$SRV.INFO.{name}.{ours.id}", b""))))
        assert (our_info.name, our_info.version, our_info.metadata) == (name, "1.2.3", {"lang": "python-sync"})
        assert [(e.name, e.subject, e.queue_group) for e in our_info.endpoints] == [("double", f"{name}.double", "q")]
        our_stats = PyStats.from_dict(json.loads(theirs.run(theirs.request(f"$SRV.STATS.{name}", b""))))
        assert our_stats.id == ours.id and our_stats.endpoints[0].num_requests == 1
        ours.stop()
    finally:
        theirs.close()
