"""Durations: every public parameter in seconds goes through the one check
(options.duration), so inf, -inf and NaN are refused with InvalidOptionError
in the calling thread before anything is sent, where None means "no limit"
as much as where it does not."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace

import pytest

import jetstream_sync as jss
from jetstream_sync.models import StreamConsumerLimits

from ..helpers import Bounded, stream_messages, wait_until

pytestmark = pytest.mark.timeout(60)

NON_FINITE = (math.inf, -math.inf, math.nan)


@pytest.fixture(scope="module")
def h(server):
    """Handles of every kind, made once: a client whose traffic is watched
    (``nc``) and one for the contexts that pull in the background (``bg``)."""
    nc = jss.connect(server.url, name="durations")
    bg = jss.connect(server.url, name="durations-bg")
    js, bjs = nc.jetstream(), bg.jetstream()
    stream = js.create_stream(name="DUR", subjects=["dur.>"])
    for i in range(3):
        js.publish("dur.x", str(i).encode())
    pull = stream.create_consumer(durable_name="pull", ack_policy="explicit", ack_wait=60)
    bpull = bjs.consumer("DUR", "pull")
    push = bjs.create_push_consumer("DUR", durable_name="push", deliver_subject="dur-deliver", idle_heartbeat=1.0)
    kv = js.create_key_value(bucket="DURKV", limit_marker_ttl=5)
    kv.put("k", b"v")
    obj = js.create_object_store("DUROBJ")
    obj.put("o", b"data")
    ns = SimpleNamespace(
        nc=nc, js=js, server=server, pull=pull, push=push, kv=kv, obj=obj,
        msg=list(pull.fetch(1, expires=5))[0],
        future=js.publish_async("dur.x", b"f"),
        sub=nc.subscribe("dur.core"),
        ctx=bpull.messages(),
        consume=bpull.consume(lambda m: m.ack()),
        ordered=bjs.ordered_consumer("DUR"),
        psub=bjs.subscribe("dur.x", manual_ack=True),
        pullsub=bjs.pull_subscribe("dur.x", durable="pullsub"),
        kv_watch=bg.jetstream().key_value("DURKV").watch(),
        obj_watch=bg.jetstream().object_store("DUROBJ").watch(),
    )  # fmt: skip
    ns.future.result(timeout=5)
    yield ns
    for ctx in (ns.ctx, ns.consume, ns.kv_watch, ns.obj_watch):
        ctx.stop()
    ns.psub.unsubscribe()
    ns.pullsub.unsubscribe()
    bg.close()
    for name in js.stream_names():
        js.delete_stream(name)
    nc.close()


def _fresh_client(h, **options):
    return jss.connect(h.server.url, **options)


def _closed_after(h, call):
    """``call(client)`` on a client of its own, closed whatever happens."""
    client = _fresh_client(h)
    try:
        return call(client)
    finally:
        client.close()


def _worker(h, **options):
    return jss.Worker(lambda m: None, stream="DUR", consumer="pull", servers=h.server.url, **options)


CASES = {
    # connect(): nats-py's own durations, passed through
    "connect(connect_timeout)": lambda h, v: _fresh_client(h, connect_timeout=v),
    "connect(reconnect_time_wait)": lambda h, v: _fresh_client(h, reconnect_time_wait=v),
    "connect(ping_interval)": lambda h, v: _fresh_client(h, ping_interval=v),
    "connect(drain_timeout)": lambda h, v: _fresh_client(h, drain_timeout=v),
    "connect(flush_timeout)": lambda h, v: _fresh_client(h, flush_timeout=v),
    # Client and core subscriptions
    "Client.request(timeout)": lambda h, v: h.nc.request("dur.svc", b"", timeout=v),
    "Client.flush(timeout)": lambda h, v: h.nc.flush(timeout=v),
    "Client.run_async(timeout)": lambda h, v: h.nc.run_async(lambda c: asyncio.sleep(0), timeout=v),
    "Client.jetstream(timeout)": lambda h, v: h.nc.jetstream(timeout=v),
    "Client.drain(timeout)": lambda h, v: _closed_after(h, lambda c: c.drain(timeout=v)),
    "Client.close(timeout)": lambda h, v: _closed_after(h, lambda c: c.close(timeout=v)),
    "Subscription.next_msg(timeout)": lambda h, v: h.sub.next_msg(timeout=v),
    "Subscription.drain(timeout)": lambda h, v: h.sub.drain(timeout=v),
    # messages
    "Msg.nak(delay)": lambda h, v: h.msg.nak(delay=v),
    "Msg.ack_sync(timeout)": lambda h, v: h.msg.ack_sync(timeout=v),
    # publishing
    "JetStream.publish(timeout)": lambda h, v: h.js.publish("dur.x", b"", timeout=v),
    "JetStream.publish(msg_ttl)": lambda h, v: h.js.publish("dur.x", b"", msg_ttl=v),
    "JetStream.publish_async(timeout)": lambda h, v: h.js.publish_async("dur.x", b"", timeout=v),
    "JetStream.publish_async(msg_ttl)": lambda h, v: h.js.publish_async("dur.x", b"", msg_ttl=v),
    "JetStream.publish_batch(timeout)": lambda h, v: h.js.publish_batch([("dur.x", b"")], timeout=v),
    "JetStream.counter_add(timeout)": lambda h, v: h.js.counter_add("dur.x", 1, timeout=v),
    "JetStream.publish_async_complete(timeout)": lambda h, v: h.js.publish_async_complete(timeout=v),
    "PubAckFuture.result(timeout)": lambda h, v: h.future.result(timeout=v),
    "PubAckFuture.exception(timeout)": lambda h, v: h.future.exception(timeout=v),
    # pull consumers and their contexts
    "Consumer.fetch(expires)": lambda h, v: h.pull.fetch(1, expires=v),
    "Consumer.fetch(idle_heartbeat)": lambda h, v: h.pull.fetch(1, expires=30, idle_heartbeat=v),
    "Consumer.next(timeout)": lambda h, v: h.pull.next(timeout=v),
    "Consumer.messages(expires)": lambda h, v: h.pull.messages(expires=v),
    "Consumer.messages(idle_heartbeat)": lambda h, v: h.pull.messages(idle_heartbeat=v),
    "Consumer.consume(expires)": lambda h, v: h.pull.consume(lambda m: None, expires=v),
    "Consumer.pause(until)": lambda h, v: h.pull.pause(v),
    "MessagesContext.next(timeout)": lambda h, v: h.ctx.next(timeout=v),
    "MessagesContext.wait_closed(timeout)": lambda h, v: h.ctx.wait_closed(timeout=v),
    "ConsumeContext.wait(timeout)": lambda h, v: h.consume.wait(timeout=v),
    "PushConsumer.messages(heartbeat_alarm)": lambda h, v: h.push.messages(heartbeat_alarm=v),
    # ordered consumers
    "JetStream.ordered_consumer(inactive_threshold)": lambda h, v: h.js.ordered_consumer("DUR", inactive_threshold=v),
    "OrderedConsumer.next(timeout)": lambda h, v: h.ordered.next(timeout=v),
    "OrderedConsumer.fetch(expires)": lambda h, v: h.ordered.fetch(1, expires=v),
    # stream and consumer configs
    "StreamConfig.max_age": lambda h, v: h.js.create_stream(name="DURX", subjects=["durx.>"], max_age=v),
    "StreamConfig.duplicate_window": lambda h, v: h.js.create_stream(name="DURX", subjects=["durx.>"], duplicate_window=v),
    "StreamConfig.subject_delete_marker_ttl": lambda h, v: h.js.create_stream(
        name="DURX", subjects=["durx.>"], allow_msg_ttl=True, subject_delete_marker_ttl=v
    ),
    "StreamConfig.consumer_limits.inactive_threshold": lambda h, v: h.js.create_stream(
        name="DURX", subjects=["durx.>"], consumer_limits=StreamConsumerLimits(inactive_threshold=v)
    ),
    "ConsumerConfig.ack_wait": lambda h, v: h.js.create_consumer("DUR", ack_wait=v),
    "ConsumerConfig.idle_heartbeat": lambda h, v: h.js.create_consumer("DUR", idle_heartbeat=v),
    "ConsumerConfig.inactive_threshold": lambda h, v: h.js.create_consumer("DUR", inactive_threshold=v),
    "ConsumerConfig.backoff": lambda h, v: h.js.create_consumer("DUR", max_deliver=5, backoff=[1.0, v]),
    "ConsumerConfig.max_expires": lambda h, v: h.js.create_consumer("DUR", max_expires=v),
    "ConsumerConfig.priority_timeout": lambda h, v: h.js.create_consumer(
        "DUR", priority_policy="pinned_client", priority_groups=["g"], priority_timeout=v
    ),
    # the subscribe workflow
    "JetStream.subscribe(idle_heartbeat)": lambda h, v: h.js.subscribe("dur.x", idle_heartbeat=v),
    "JetStream.subscribe(inactive_threshold)": lambda h, v: h.js.subscribe("dur.x", inactive_threshold=v),
    "PullSubscription.fetch(timeout)": lambda h, v: h.pullsub.fetch(1, timeout=v),
    "PullSubscription.fetch(heartbeat)": lambda h, v: h.pullsub.fetch(1, timeout=30, heartbeat=v),
    "PushSubscription.next_msg(timeout)": lambda h, v: h.psub.next_msg(timeout=v),
    "PushSubscription.drain(timeout)": lambda h, v: h.psub.drain(timeout=v),
    # key-value
    "KeyValueConfig.ttl": lambda h, v: h.js.create_key_value(bucket="DURKV2", ttl=v),
    "KeyValueConfig.limit_marker_ttl": lambda h, v: h.js.create_key_value(bucket="DURKV2", limit_marker_ttl=v),
    "KeyValue.create(ttl)": lambda h, v: h.kv.create("new", b"", ttl=v),
    "KeyValue.purge(ttl)": lambda h, v: h.kv.purge("k", ttl=v),
    "KeyValue.purge_deletes(older_than)": lambda h, v: h.kv.purge_deletes(older_than=v),
    "KeyWatcher.next(timeout)": lambda h, v: h.kv_watch.next(timeout=v),
    "KeyWatcher.updates(timeout)": lambda h, v: h.kv_watch.updates(timeout=v),
    # object store
    "ObjectStoreConfig.ttl": lambda h, v: h.js.create_object_store("DUROBJ2", ttl=v),
    "ObjectStore.get(timeout)": lambda h, v: h.obj.get("o", timeout=v),
    "ObjectWatcher.next(timeout)": lambda h, v: h.obj_watch.next(timeout=v),
    "ObjectWatcher.updates(timeout)": lambda h, v: h.obj_watch.updates(timeout=v),
    # workers and process-wide helpers
    "Worker(shutdown_timeout)": lambda h, v: _worker(h, shutdown_timeout=v),
    "Worker(stats_interval)": lambda h, v: _worker(h, stats_interval=v),
    "Worker(nak_delay)": lambda h, v: _worker(h, nak_delay=v),
    "Worker(expires)": lambda h, v: _worker(h, expires=v),
    "install_signal_handlers(timeout)": lambda h, v: jss.install_signal_handlers(timeout=v),
    "close_shared_clients(timeout)": lambda h, v: jss.close_shared_clients(timeout=v),
}


# Where None means "no limit" (or "never"), the message says to use it.
NONE_IS_NO_LIMIT = {
    "connect(flush_timeout)",
    "Client.run_async(timeout)",
    "Subscription.next_msg(timeout)",
    "JetStream.publish_async_complete(timeout)",
    "PubAckFuture.result(timeout)",
    "PubAckFuture.exception(timeout)",
    "MessagesContext.next(timeout)",
    "MessagesContext.wait_closed(timeout)",
    "ConsumeContext.wait(timeout)",
    "PushSubscription.next_msg(timeout)",
    "StreamConfig.max_age",
    "KeyValueConfig.ttl",
    "KeyWatcher.next(timeout)",
    "KeyWatcher.updates(timeout)",
    "ObjectStoreConfig.ttl",
    "ObjectWatcher.next(timeout)",
    "ObjectWatcher.updates(timeout)",
    "Worker(stats_interval)",
}


NAN = float("nan")
INF = float("inf")


# Kept before the tests on the module's handles ``h``: the ``nc`` fixture
# deletes every stream of the server when it ends, theirs included.
@pytest.mark.timeout(60)
def test_nan_and_infinite_durations_are_rejected_before_sending(nc, js, stream, subj, cons):
    ctx = cons.messages()
    calls = [
        ("cons.next(timeout=nan)", lambda: cons.next(timeout=NAN)),
        ("ctx.next(timeout=nan)", lambda: ctx.next(timeout=NAN)),
        ("js.publish_async(timeout=nan)", lambda: js.publish_async(subj, b"nan", timeout=NAN)),
        ("cons.messages(expires=inf)", lambda: cons.messages(expires=INF)),
        ("cons.fetch(1, expires=inf)", lambda: cons.fetch(1, expires=INF)),
        ("nc.request(timeout=inf)", lambda: nc.request("nobody.listens.here", b"?", timeout=INF)),
        ("js.publish(timeout=nan)", lambda: js.publish(subj, b"nan", timeout=NAN)),
    ]
    failures = []
    for label, call in calls:
        run = Bounded(call, label).join(3)
        if not run.finished:
            failures.append(f"{label}: still running after 3s")
        elif not isinstance(run.error, jss.InvalidOptionError):
            outcome = f"raised {run.error!r}" if run.error is not None else f"returned {run.result!r}"
            failures.append(f"{label}: {outcome}")
            for end in ("stop", "close"):  # do not leave a context running
                if hasattr(run.result, end):
                    getattr(run.result, end)()
    ctx.stop()
    assert not failures, "not rejected with InvalidOptionError:\n" + "\n".join(failures)
    assert stream_messages(stream) == 0, "a publish with a NaN timeout reached the stream"


@pytest.mark.parametrize("parameter", sorted(CASES))
def test_a_non_finite_duration_is_refused_before_anything_is_sent(h, parameter):
    call = CASES[parameter]
    for value in NON_FINITE:
        before = dict(h.nc.stats)
        try:
            with pytest.raises(jss.InvalidOptionError, match="finite") as refused:
                result = call(h, value)
                if isinstance(result, jss.Client):  # accepted: do not leak it
                    result.close()
        except BaseException as exc:
            raise AssertionError(f"{parameter} = {value!r}: {exc!r}") from exc
        after = dict(h.nc.stats)
        sent = {k: after[k] - before[k] for k in ("out_msgs", "out_bytes")}
        assert sent == {"out_msgs": 0, "out_bytes": 0}, f"{parameter} = {value!r} sent {sent}"
        if parameter in NONE_IS_NO_LIMIT:
            assert "use None for" in str(refused.value), f"{parameter}: {refused.value}"
    assert h.nc.is_connected
    wait_until(lambda: not h.ctx.closed and not h.consume.closed, timeout=1)  # the contexts live on
