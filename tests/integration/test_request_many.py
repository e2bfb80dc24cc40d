"""nc.request_many(): one request, many replies, ending at the first bound
reached (max_messages, max_wait, stall, sentinel) as orbit.go's natsext
RequestMany does; arguments checked before anything is sent; the reply
inbox unsubscribed however iteration ends."""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.request

import pytest

import jetstream_sync as jss

from ..helpers import wait_until

pytestmark = pytest.mark.timeout(60)

_names = itertools.count(1)


@pytest.fixture
def subject():
    return f"rm.{next(_names)}"


def streaming(nc, subject, replies, release=None, stall_after=None):
    """A responder that answers each request with ``replies`` in order,
    waiting for ``release`` after the first ``stall_after`` of them."""

    def answer(msg):
        for i, body in enumerate(replies):
            if release is not None and i == stall_after:
                release.wait(10)
            nc.publish(msg.reply, body)

    return nc.subscribe(subject, cb=answer)


def test_max_messages_ends_after_that_many_replies(nc, subject):
    for i in range(5):
        nc.subscribe(subject, cb=lambda m, i=i: m.respond(b"r%d" % i))
    nc.flush()
    start = time.monotonic()
    got = list(nc.request_many(subject, b"q", max_messages=3, max_wait=30.0))
    assert len(got) == 3
    assert time.monotonic() - start < 10.0  # ended by the count, not by max_wait


def test_max_wait_ends_the_replies_and_has_a_default(nc, subject):
    streaming(nc, subject, [b"a", b"b"])
    nc.flush()
    start = time.monotonic()
    got = [m.data for m in nc.request_many(subject, max_wait=0.5)]
    elapsed = time.monotonic() - start
    assert got == [b"a", b"b"]
    assert 0.45 <= elapsed < 3.0
    start = time.monotonic()
    assert len(list(nc.request_many(subject))) == 2  # the default: 2 s, finite
    assert 1.9 <= time.monotonic() - start < 5.0


def test_replies_received_within_max_wait_are_handed_out_when_read_after_it(server, nc, subject):
    answered = threading.Event()
    peer = jss.connect(server.url)
    try:
        peer.subscribe(subject, cb=lambda m: (m.respond(b"a"), m.respond(b"b"), answered.set()))
        peer.flush()
        replies = nc.request_many(subject, max_wait=0.3)
        assert answered.wait(5)
        peer.flush()  # the server has both replies ...
        nc.flush()  # ... and sent them before its PONG: they are here
        time.sleep(0.4)  # the condition under test, not a wait for an event: max_wait is over
        assert [m.data for m in replies] == [b"a", b"b"]
    finally:
        peer.close()


def test_a_stalled_responder_ends_the_replies_after_the_stall_gap(nc, subject):
    release = threading.Event()
    streaming(nc, subject, [b"1", b"2", b"late"], release=release, stall_after=2)
    nc.flush()
    start = time.monotonic()
    got = [m.data for m in nc.request_many(subject, stall=0.3, max_wait=10.0)]
    elapsed = time.monotonic() - start
    release.set()
    assert got == [b"1", b"2"]
    assert elapsed < 5.0  # the stall gap ended it, long before max_wait


def test_the_stall_gap_counts_only_after_the_first_reply(nc, subject):
    release = threading.Event()
    streaming(nc, subject, [b"slow first"], release=release, stall_after=0)
    nc.flush()
    replies = nc.request_many(subject, stall=0.2, max_wait=10.0)
    timer = threading.Timer(0.5, release.set)  # the first reply comes after more than one stall gap
    timer.start()
    try:
        assert [m.data for m in replies] == [b"slow first"]
    finally:
        timer.cancel()


def test_an_empty_reply_is_the_sentinel_and_is_not_handed_out(nc, subject):
    streaming(nc, subject, [b"a", b"b", b"", b"after"])
    nc.flush()
    start = time.monotonic()
    assert [m.data for m in nc.request_many(subject, sentinel=True, max_wait=30.0)] == [b"a", b"b"]
    assert time.monotonic() - start < 10.0  # ended by the sentinel, not by max_wait


def test_a_sentinel_function_ends_the_replies(nc, subject):
    streaming(nc, subject, [b'{"n": 1}', b'{"n": 2}', b'{"done": true}', b'{"n": 3}'])
    nc.flush()
    done = lambda m: json.loads(m.data).get("done", False)  # noqa: E731
    assert [json.loads(m.data)["n"] for m in nc.request_many(subject, sentinel=done)] == [1, 2]


def test_headers_reach_the_responder(nc, subject):
    nc.subscribe(subject, cb=lambda m: m.respond(m.headers["X-Id"].encode()))
    nc.flush()
    with nc.request_many(subject, headers={"X-Id": "42"}, max_messages=1) as replies:
        assert [m.data for m in replies] == [b"42"]


def test_no_responders_raises(nc, subject):
    replies = nc.request_many(subject, max_wait=5.0)
    with pytest.raises(jss.NoRespondersError):
        next(replies)
    assert replies.closed


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_messages": 0}, {"max_messages": -1}, {"max_messages": True}, {"max_messages": "3"},
        {"max_wait": 0}, {"max_wait": -1.0}, {"max_wait": None}, {"max_wait": float("inf")},
        {"stall": 0}, {"stall": -0.5}, {"stall": "1"},
        {"sentinel": 5}, {"sentinel": "empty"},
        {"headers": {"bad key": "x"}},
    ],
    ids=lambda kw: "-".join(f"{k}={v!r}" for k, v in kw.items()),
)
def test_bad_arguments_are_refused_before_anything_is_sent(nc, subject, kwargs):
    seen = nc.subscribe(subject)
    nc.flush()
    with pytest.raises(jss.InvalidOptionError):
        nc.request_many(subject, b"x", **kwargs)
    nc.flush()
    assert seen.pending() == 0


def test_an_async_sentinel_is_refused(nc, subject):
    async def sentinel(msg):
        return True

    with pytest.raises(jss.InvalidOptionError):
        nc.request_many(subject, sentinel=sentinel)


def _subscriptions(server, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{server.monitor_port}/connz?subs=1", timeout=5) as r:
        conns = json.load(r)["connections"]
    return next(c.get("subscriptions_list", []) for c in conns if c.get("name") == name)


@pytest.mark.parametrize("how", ["break", "close", "with", "exhausted"])
def test_the_reply_inbox_is_unsubscribed_however_iteration_ends(server, subject, how):
    name = f"rm-inbox-{how}"
    with jss.connect(server.url, name=name) as nc:
        streaming(nc, subject, [b"a", b"b", b"c"])
        nc.flush()
        before = len(_subscriptions(server, name))
        if how == "break":
            for _ in nc.request_many(subject, max_wait=5.0):
                nc.flush()
                wait_until(lambda: len(_subscriptions(server, name)) == before + 1)  # the inbox, while iterating
                break
        elif how == "close":
            replies = nc.request_many(subject, max_wait=5.0)
            next(replies)
            replies.close()
            assert list(replies) == []
        elif how == "with":
            with nc.request_many(subject, max_wait=5.0) as replies:
                next(replies)
        else:
            assert len(list(nc.request_many(subject, max_messages=3))) == 3
        nc.flush()
        wait_until(lambda: len(_subscriptions(server, name)) == before)
