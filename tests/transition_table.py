"""The transition matrix's table: every public method of the client's
handles, what it does in each state of the connection, from each caller.

A row names one public method (``Class.method``), how to call it on a
:class:`World` and its kind; the kind gives the documented outcome in every
state, a row overrides it where that method's contract says otherwise.
tests/unit/test_transition_table.py checks that every public method of the
package's classes has a row (or a reason in ``NOT_IN_THE_MATRIX``);
tests/integration/test_transitions.py runs the cells.

Outcomes: ``OK`` (the call returns) or an exception class; a cell may allow
several (a ``messages()`` context that buffered a message before the server
went away hands it out, else its ``next()`` times out).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import enum
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, List, Mapping, Optional, Tuple, Union

import jetstream_sync as jss

T = 5.0  # seconds: the timeout the calls of the table are given (their context's too)
T_RECONNECTING = 0.25  # the same while the server is away: every call that needs it times out
WAIT_T = 0.2  # seconds a wait()/wait_closed() row waits

OK = "ok"
Outcome = Union[str, type]


class State(str, enum.Enum):
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"  # the server stopped; the client keeps trying
    DRAINING = "draining"  # Client.drain() in progress, held by a service handler still working
    CLOSED = "closed"
    FORKED = "forked"  # a child of os.fork(), before it made a client of its own
    RESTARTED = "restarted"  # the server restarted with the same store, the client reconnected


class Caller(str, enum.Enum):
    MAIN = "main"  # the thread that connected
    NEW = "new-thread"  # a thread started after the state change
    CONSUME = "consume-handler"  # the worker thread of a consume() handler
    SERVICE = "service-handler"  # a service endpoint's handler thread
    SUBSCRIPTION = "subscription-callback"  # the callback thread of nc.subscribe(cb=)
    LOOP = "loop"  # the client's event-loop thread (an asyncio task)


HANDLERS = (Caller.CONSUME, Caller.SERVICE, Caller.SUBSCRIPTION)

# The words a message must carry to name the state it was refused in.
STATE_WORDS: Mapping[type, Tuple[str, ...]] = {
    jss.ConnectionClosedError: ("closed", "drain"),
    jss.ForkedProcessError: ("fork",),
    jss.DeadlockError: ("event-loop thread",),
}
RECONNECTING_WORDS = ("reconnecting", "not connected", "disconnected")


@dataclass(frozen=True)
class Kind:
    """What a method does in each state (its caller a user thread) and on the loop thread."""

    name: str
    outcomes: Mapping[State, Tuple[Outcome, ...]]
    on_loop: Tuple[Outcome, ...]
    waits: str  # how long a call of this kind may wait: "call" (w.t), "wait" (WAIT_T) or "none"


def _kind(name: str, connected: Tuple[Outcome, ...], reconnecting: Tuple[Outcome, ...], draining: Tuple[Outcome, ...],
          closed: Tuple[Outcome, ...], forked: Tuple[Outcome, ...], on_loop: Tuple[Outcome, ...], waits: str) -> Kind:  # fmt: skip
    return Kind(
        name,
        {
            State.CONNECTED: connected,
            State.RECONNECTING: reconnecting,
            State.DRAINING: draining,
            State.CLOSED: closed,
            State.FORKED: forked,
            State.RESTARTED: connected,
        },
        on_loop,
        waits,
    )


CLOSED, FORKED, DEADLOCK, TIMEOUT = jss.ConnectionClosedError, jss.ForkedProcessError, jss.DeadlockError, jss.TimeoutError

# A round trip to the server (a request, an API call, a blocking publish).
CALL = _kind("call", (OK,), (TIMEOUT,), (OK,), (CLOSED,), (FORKED,), (DEADLOCK,), "call")
# Starts interest (a subscription, a context, a watcher, a pull): refused once a drain began;
# while reconnecting a subscription is made (the server gets it on reconnect), a pull may time out.
OPEN = _kind("open", (OK,), (OK, TIMEOUT), (CLOSED,), (CLOSED,), (FORKED,), (DEADLOCK,), "call")
# Queued, never blocks: an ack, a core publish, publish_async.
SEND = _kind("send", (OK,), (OK,), (OK,), (CLOSED,), (FORKED,), (OK,), "none")
# Takes what was received (a buffered message, a reply); may wait for it.
# On the loop thread what is at hand may be returned; a wait raises at once.
READ = _kind("read", (OK,), (OK, TIMEOUT), (OK, CLOSED, jss.ConsumerStoppedError), (CLOSED,), (FORKED,), (OK, DEADLOCK), "call")
# Ends a handle at once; idempotent, from any thread, in every state (in a forked
# child it touches nothing: cleanup code and `with` blocks run there too).
END = _kind("end", (OK,), (OK,), (OK,), (OK,), (OK,), (OK,), "none")
# Ends a handle and waits until it has (or asks the server to delete what it made).
END_WAIT = _kind("end-wait", (OK,), (OK,), (OK,), (OK,), (OK,), (OK, DEADLOCK), "wait")
END_CALL = _kind("end-call", (OK,), (TIMEOUT,), (OK,), (OK,), (OK,), (DEADLOCK,), "call")
# Waits for something to end or resolve; returns within its timeout.
WAIT = _kind("wait", (OK,), (OK,), (OK,), (OK,), (FORKED,), (DEADLOCK,), "wait")
# Makes a handle without I/O but refuses a closed or inherited client.
HANDLE = _kind("handle", (OK,), (OK,), (OK,), (CLOSED,), (FORKED,), (OK,), "none")
# No I/O at all: the same in every state.
LOCAL = _kind("local", (OK,), (OK,), (OK,), (OK,), (OK,), (OK,), "none")


@dataclass(frozen=True)
class Row:
    """One public method in the matrix.

    ``call(world, prepared)`` makes the call; ``prepare(world)`` (run while
    connected, before the state change) makes what the call needs, so that
    no row depends on another; ``cleanup(result)`` releases what a call
    returned (a context, a subscription). ``extra``: seconds the call may
    take beyond the world's call timeout ``w.t`` (a fetch's client-side
    margin, a close's own timeout). ``last``: the row ends the world's
    client and runs after the others.
    """

    target: str
    kind: Kind
    call: Callable[["World", Any], Any]
    prepare: Optional[Callable[["World"], Any]] = None
    cleanup: Optional[Callable[[Any], Any]] = None
    extra: float = 0.0
    last: bool = False
    late: bool = False  # prepared last, just before the state change (the server forgets a fast batch idle for 10 s)
    override: Mapping[Union[State, Caller], Tuple[Outcome, ...]] = field(default_factory=dict)

    def wait(self, world: "World") -> float:
        """Seconds this call may wait by design (before ``BOUND`` for a loaded machine)."""
        base = {"call": world.t, "wait": WAIT_T, "none": 0.0}[self.kind.waits]
        return base + self.extra

    def expected(self, state: State, caller: Caller) -> Tuple[Outcome, ...]:
        in_state = self.override.get(state, self.kind.outcomes[state])
        if caller is Caller.LOOP:
            on_loop = self.override.get(Caller.LOOP, self.kind.on_loop)
            if state is State.DRAINING and self.kind is WAIT:
                # The drain may already have ended what the call waits for:
                # nothing to wait for, so it answers instead of refusing.
                on_loop += (OK,)
            # A refusal the state makes at once (draining: nothing new) may come before the loop check.
            return on_loop + tuple(o for o in in_state if o is CLOSED)
        return in_state


# Public methods outside the matrix, each with the reason.
NOT_IN_THE_MATRIX: Mapping[str, str] = {
    **{
        f"SystemClient.{m}": "needs a system-account user; its calls are requests like Client.request (test_system_client.py)"
        for m in ("accountz", "connz", "gatewayz", "healthz", "jsz", "leafz", "request", "routez", "statsz", "subsz", "varz")
    },
    "Worker.run": "owns its own Client made from a URL when it starts; its shutdown is test_worker.py's",
    "Worker.stop": "owns its own Client made from a URL when it starts; its shutdown is test_worker.py's",
    "Subscription.connection_closing": "the connection's hook (Resource), not a user call",
    "Subscription.connection_shutdown": "the connection's hook (Resource), not a user call",
    "Subscription.drain_for_shutdown": "the connection's hook (Resource), not a user call",
}

# Returned by the public API without a public name; the methods a user calls.
UNNAMED_CLASSES: Mapping[str, Tuple[str, ...]] = {"PubAckFuture": ("result", "exception", "add_done_callback")}

# Exported base classes: their methods are rows of each subclass.
BASE_CLASSES = ("BaseConsumer",)

# Classes whose public methods never touch a connection: values, configs, stats.
VALUE_CLASSES = (
    "AccountInfo", "ConsumerConfig", "ConsumerInfo", "ElasticGroupConfig", "EndpointInfo", "EndpointStats",
    "NatsContext", "ObjectInfo", "ObjectLink", "ObjectMetaOptions", "ObjectStoreConfig", "PubAck", "PullStats",
    "PushStats", "ServiceInfo", "ServiceStats", "StaticGroupConfig", "StreamConfig", "StreamInfo", "WorkerStats",
)  # fmt: skip


# -- the world: a client with one of everything ------------------------------------------------------

_tags = itertools.count(1)


def retried(fn: Callable[[], Any], attempts: int = 10) -> Any:
    """``fn()`` again after a TimeoutError: a world with short timeouts is
    made while connected, on a machine that may be loaded."""
    for _ in range(attempts - 1):
        try:
            return fn()
        except jss.TimeoutError:
            continue
    return fn()


class World:
    """A client of ``url`` and, made on it while connected, what the rows
    call: a stream with messages, consumers, a bucket, an object store, a
    service. ``peer`` is another client of the same server: it answers
    requests and checks the outcome afterwards."""

    def __init__(self, url: str, peer: jss.Client, t: float = T) -> None:
        n = next(_tags)
        self.tag = f"m{n}"
        self.url = url
        self.peer = peer
        self.t = t  # the calls' timeout, and their JetStream context's
        self.nc = jss.connect(url, name=f"matrix-{n}", max_reconnect_attempts=-1, reconnect_time_wait=0.1)
        self.js = self.nc.jetstream(timeout=t)
        self.subj = f"{self.tag}.s.x"
        self.stream = retried(lambda: self.js.create_stream(name=f"M{n}S", subjects=[f"{self.tag}.s.>"], allow_direct=True))
        for i in range(60):
            retried(lambda: self.js.publish(self.subj, b"m%d" % i, msg_id=f"m{i}"))
        self._acks = retried(lambda: self.stream.create_consumer(durable_name="acks", ack_policy="explicit", max_ack_pending=1000))
        self._names = itertools.count(1)
        self.acked: List[Tuple[str, int]] = []  # (stream, seq) the calls were told is stored
        self.futures: List[Any] = []  # publish_async futures the calls made
        self.echo = f"{self.tag}.echo"
        self.echoed = 0  # requests the peer answered (its callback thread only writes it)
        self._echo = peer.subscribe(self.echo, cb=self._answer)
        self.held: List[Any] = []  # requests held unanswered, for the respond rows
        self._hold = self.nc.subscribe(f"{self.tag}.hold", cb=self.held.append)
        self.svc = self.nc.add_service(f"M{n}svc", "1.0.0", workers=2)
        self.svc.add_endpoint("echo", lambda req: req.respond(req.data), subject=f"{self.tag}.svc.echo")
        self.kv = retried(lambda: self.js.create_key_value(f"M{n}KV", history=5))
        retried(lambda: self.kv.put("k", b"v"))
        self.obs = retried(lambda: self.js.create_object_store(f"M{n}OB"))
        retried(lambda: self.obs.put("o", b"object data"))
        self.nc.request(self.echo, b"warm", timeout=5)  # the shared reply inbox exists before any state change
        peer.flush()
        self.nc.flush()

    def _answer(self, msg: jss.Msg) -> None:
        msg.respond(msg.data)
        self.echoed += 1

    def name(self, prefix: str = "X") -> str:
        return f"{prefix}{self.tag.upper()}{next(self._names)}"

    # -- things a row prepares ------------------------------------------------------------

    def new_stream(self, fill: bool = True, **config: Any) -> jss.Stream:
        """A stream of its own, with three messages unless ``fill`` is false."""
        name = self.name("S")
        subjects = config.pop("subjects", [f"{name.lower()}.>"])
        stream = self.js.create_stream(name=name, subjects=subjects, **config)
        for i in range(3 if fill else 0):
            self.js.publish(subjects[0].replace(">", "x").replace("*", "x"), b"%d" % i)
        return stream

    def new_consumer(self, **config: Any) -> jss.Consumer:
        config.setdefault("ack_policy", "explicit")
        return self.stream.create_consumer(durable_name=self.name("C"), **config)

    def unacked(self) -> jss.Msg:
        """A message of the stream delivered to this client and not yet acknowledged."""
        return self._acks.next(timeout=5)

    def held_request(self, subject: str) -> Any:
        """A core request received by this client and not answered yet."""
        before = len(self.held)
        self.peer.publish(f"{self.tag}.hold", b"q", reply=f"_INBOX.{self.tag}.{next(self._names)}")
        self.peer.flush()
        jss.testing.wait_until(lambda: len(self.held) > before, timeout=5)
        return self.held[before]

    def service_request(self) -> Any:
        """A ServiceRequest a handler kept without answering."""
        box: List[Any] = []
        got = threading.Event()

        def keep(req: Any) -> None:
            box.append(req)
            got.set()

        name = self.name("ep").lower()
        self.svc.add_endpoint(name, keep, subject=f"{self.tag}.svc.{name}")
        self.nc.flush()  # the server has the subscription before the request comes
        self.peer.publish(f"{self.tag}.svc.{name}", b"q", reply=f"_INBOX.{self.tag}.{name}")
        assert got.wait(5), "the service never got the request"
        return box[0]

    def record(self, result: Any) -> Any:
        """Note what a call said is stored, to check afterwards that it is."""
        if isinstance(result, jss.PubAck):
            self.acked.append((result.stream, result.seq))
        elif isinstance(result, concurrent.futures.Future):
            self.futures.append(result)
        return result


def _ctx_end(ctx: Any) -> None:
    ctx.stop()


def _unsub(sub: Any) -> None:
    sub.unsubscribe()


def _close(obj: Any) -> None:
    obj.close()


def _partitioned(w: World) -> Tuple[str, Any]:
    """A static group "g" (members a and b) on a partitioned stream with a message for each."""
    name = w.name("P")
    w.js.create_stream(name=name, subjects=[f"{name.lower()}.*"], subject_transform=jss.partition_transform(2, f"{name.lower()}.*", [1]))
    for key in range(4):
        w.js.publish(f"{name.lower()}.k{key}", b"p")
    group = w.js.create_static_group(name, "g", 2, members=["a", "b"])
    return name, group


def _member_pulling(w: World, group: Any) -> Any:
    """A group whose member "a" has an instance pulling (its consumer exists)."""
    ctx = group.join("a")
    ctx.next(timeout=5)
    return group


def _elastic(w: World) -> Tuple[str, Any]:
    name = w.name("E")
    w.js.create_stream(name=name, subjects=[f"{name.lower()}.*"])
    group = w.js.create_elastic_group(name, "g", 2, partitioning_filters=[(f"{name.lower()}.*", [1])])
    group.add_members(["a"])
    return name, group


def _elastic_pulling(w: World) -> Any:
    """An elastic group whose member "a" has an instance consuming."""
    name, group = _elastic(w)
    w.js.publish(f"{name.lower()}.k", b"e")
    got = threading.Event()
    group.join("a", lambda m: (m.ack(), got.set()))
    assert got.wait(10), "the elastic member never got its message"
    return group


def _fetched(w: World) -> Any:
    return w.new_consumer().fetch(2, expires=2)


def _pinned(w: World) -> jss.Consumer:
    return w.new_consumer(priority_policy="pinned_client", priority_groups=["g"], priority_timeout=60)


def _counter_stream(w: World) -> str:
    name = w.new_stream(fill=False, allow_msg_counter=True).name.lower()
    w.js.counter_add(name + ".x", 1)
    return name


def _schedules_stream(w: World) -> jss.Stream:
    return w.new_stream(fill=False, allow_msg_schedules=True)


def _batch_stream(w: World) -> str:
    return w.new_stream(fill=False, allow_atomic=True, allow_batched=True).name.lower()


def _later() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)


# -- the rows ---------------------------------------------------------------------------------------

R = Row
_TIMEOUT_OR_OK = {State.RECONNECTING: (OK, TIMEOUT)}

ROWS: List[Row] = [
    # Client (core NATS)
    R("Client.publish", SEND, lambda w, o: w.nc.publish(w.subj, b"core")),
    R("Client.request", CALL, lambda w, o: w.nc.request(w.echo, b"r", timeout=w.t)),
    R("Client.request_many", OPEN, lambda w, o: list(w.nc.request_many(w.echo, b"r", max_wait=w.t, max_messages=1)),
      override={State.RECONNECTING: (OK,)}),  # it gathers what came within max_wait: nothing
    R("Client.subscribe", OPEN, lambda w, o: w.nc.subscribe(f"{w.tag}.sub"), cleanup=_unsub),
    R("Client.add_service", OPEN, lambda w, o: w.nc.add_service(w.name("svc"), "1.0.0"), cleanup=lambda s: s.stop()),
    R("Client.flush", CALL, lambda w, o: w.nc.flush(timeout=w.t)),
    R("Client.run_async", CALL, lambda w, o: w.nc.run_async(lambda c: asyncio.sleep(0), timeout=w.t),
      override={State.RECONNECTING: (OK,)}),  # the coroutine needs no server
    R("Client.new_inbox", LOCAL, lambda w, o: w.nc.new_inbox()),
    R("Client.jetstream", LOCAL, lambda w, o: w.nc.jetstream()),
    R("Client.system", HANDLE, lambda w, o: w.nc.system()),
    R("Client.drain", END, lambda w, o: w.nc.drain(timeout=5), last=True, extra=5),
    R("Client.close", END, lambda w, o: w.nc.close(timeout=5), last=True, extra=5),
    # JetStream: publishing
    R("JetStream.publish", CALL, lambda w, o: w.record(w.js.publish(w.subj, b"p"))),
    R("JetStream.publish_async", SEND, lambda w, o: w.record(w.js.publish_async(w.subj, b"pa"))),
    R("PubAckFuture.result", WAIT, lambda w, o: o.result(w.t), prepare=lambda w: w.record(w.js.publish_async(w.subj, b"f")),
      override={State.FORKED: (OK,), Caller.LOOP: (OK, DEADLOCK)}),  # a future is a value: a resolved one answers anywhere
    R("PubAckFuture.exception", WAIT, lambda w, o: o.exception(w.t), prepare=lambda w: w.record(w.js.publish_async(w.subj, b"f")),
      override={State.FORKED: (OK,), Caller.LOOP: (OK, DEADLOCK)}),
    R("PubAckFuture.add_done_callback", LOCAL, lambda w, o: o.add_done_callback(lambda f: None),
      prepare=lambda w: w.record(w.js.publish_async(w.subj, b"f"))),
    R("JetStream.publish_async_complete", WAIT, lambda w, o: w.js.publish_async_complete(timeout=WAIT_T)),
    R("JetStream.set_publish_async_max_pending", LOCAL, lambda w, o: w.js.set_publish_async_max_pending(4000)),
    R("JetStream.publish_batch", CALL, lambda w, o: w.record(w.js.publish_batch([(o + ".x", b"1"), (o + ".x", b"2")])), prepare=_batch_stream),
    R("JetStream.publish_fast_batch", CALL, lambda w, o: w.record(w.js.publish_fast_batch([(o + ".x", b"1"), (o + ".x", b"2")])),
      prepare=_batch_stream, override={State.RECONNECTING: (jss.FastBatchError,)}),  # it says how many were stored
    R("JetStream.fast_batch", HANDLE, lambda w, o: w.js.fast_batch(), cleanup=_close),
    # A batch begun before the state change: add() waits only when flow acks are due; the server
    # forgets a batch in progress when it restarts; FastBatchError says how many were stored
    # (after a close too: its cause is the ConnectionClosedError).
    R("FastBatch.add", CALL, lambda w, o: o[0].add(o[1], b"a"), prepare=lambda w: _fast_batch_started(w), late=True,
      override={State.RECONNECTING: (OK, jss.FastBatchError), State.RESTARTED: (OK, jss.FastBatchError),
                State.CLOSED: (jss.FastBatchError,)}),
    R("FastBatch.commit", CALL, lambda w, o: w.record(o[0].commit(o[1], b"c")), prepare=lambda w: _fast_batch_started(w), late=True,
      override={State.RECONNECTING: (jss.FastBatchError,), State.RESTARTED: (jss.FastBatchError,), State.CLOSED: (jss.FastBatchError,)}),
    R("FastBatch.close", CALL, lambda w, o: w.record(o[0].close()), prepare=lambda w: _fast_batch_started(w), late=True,
      override={State.RECONNECTING: (jss.FastBatchError,), State.RESTARTED: (jss.FastBatchError,), State.CLOSED: (jss.FastBatchError,)}),
    R("JetStream.counter_add", CALL, lambda w, o: w.js.counter_add(o + ".x", 2), prepare=_counter_stream),
    R("JetStream.counter_get", CALL, lambda w, o: w.js.counter_get(o.upper(), o + ".x"), prepare=_counter_stream),
    R("JetStream.publish_schedule", CALL, lambda w, o: w.record(w.js.publish_schedule(
        o.name.lower() + ".sched", b"s", schedule=_later(), target=o.name.lower() + ".x")), prepare=_schedules_stream),
    R("JetStream.schedules", CALL, lambda w, o: w.js.schedules(o.name), prepare=_schedules_stream),
    R("JetStream.cancel_schedule", CALL, lambda w, o: w.js.cancel_schedule(o.name, o.name.lower() + ".sched"), prepare=_schedules_stream),
    # JetStream: streams and messages
    R("JetStream.account_info", CALL, lambda w, o: w.js.account_info()),
    R("JetStream.create_stream", CALL, lambda w, o: w.js.create_stream(name=w.name("N"), subjects=[w.name("n").lower()])),
    R("JetStream.create_or_update_stream", CALL, lambda w, o: w.js.create_or_update_stream(name=w.name("N"), subjects=[w.name("n").lower()])),
    R("JetStream.update_stream", CALL, lambda w, o: w.js.update_stream(name=o.name, subjects=[o.name.lower() + ".>"], max_msgs=100),
      prepare=lambda w: w.new_stream()),
    R("JetStream.stream", CALL, lambda w, o: w.js.stream(w.stream.name)),
    R("JetStream.stream_info", CALL, lambda w, o: w.js.stream_info(w.stream.name)),
    R("JetStream.stream_names", CALL, lambda w, o: w.js.stream_names()),
    R("JetStream.streams", CALL, lambda w, o: w.js.streams()),
    R("JetStream.delete_stream", CALL, lambda w, o: w.js.delete_stream(o.name), prepare=lambda w: w.new_stream()),
    R("JetStream.purge_stream", CALL, lambda w, o: w.js.purge_stream(o.name), prepare=lambda w: w.new_stream()),
    R("JetStream.get_msg", CALL, lambda w, o: w.js.get_msg(w.stream.name, 1)),
    R("JetStream.get_msgs", CALL, lambda w, o: w.js.get_msgs(w.stream.name, seq=1, batch=2)),
    R("JetStream.get_last_msgs", CALL, lambda w, o: w.js.get_last_msgs(w.stream.name, [w.subj])),
    R("JetStream.delete_msg", CALL, lambda w, o: w.js.delete_msg(o.name, 1), prepare=lambda w: w.new_stream()),
    # JetStream: consumers
    R("JetStream.create_consumer", CALL, lambda w, o: w.js.create_consumer(w.stream.name, durable_name=w.name("C"))),
    R("JetStream.create_or_update_consumer", CALL, lambda w, o: w.js.create_or_update_consumer(w.stream.name, durable_name=w.name("C"))),
    R("JetStream.update_consumer", CALL, lambda w, o: w.js.update_consumer(w.stream.name, durable_name=o.name, max_deliver=5),
      prepare=lambda w: w.new_consumer()),
    R("JetStream.create_push_consumer", CALL, lambda w, o: w.js.create_push_consumer(
        w.stream.name, durable_name=w.name("P"), deliver_subject=w.name("d").lower())),
    R("JetStream.create_or_update_push_consumer", CALL, lambda w, o: w.js.create_or_update_push_consumer(
        w.stream.name, durable_name=w.name("P"), deliver_subject=w.name("d").lower())),
    R("JetStream.update_push_consumer", CALL, lambda w, o: w.js.update_push_consumer(
        w.stream.name, durable_name=o.name, deliver_subject=o.cached_info.config.deliver_subject, max_deliver=5),
      prepare=lambda w: _push(w)),
    R("JetStream.consumer", CALL, lambda w, o: w.js.consumer(w.stream.name, "acks")),
    R("JetStream.push_consumer", CALL, lambda w, o: w.js.push_consumer(w.stream.name, o.name), prepare=lambda w: _push(w)),
    R("JetStream.consumer_info", CALL, lambda w, o: w.js.consumer_info(w.stream.name, "acks")),
    R("JetStream.consumer_names", CALL, lambda w, o: w.js.consumer_names(w.stream.name)),
    R("JetStream.consumers", CALL, lambda w, o: w.js.consumers(w.stream.name)),
    R("JetStream.delete_consumer", CALL, lambda w, o: w.js.delete_consumer(w.stream.name, o.name), prepare=lambda w: w.new_consumer()),
    R("JetStream.pause_consumer", CALL, lambda w, o: w.js.pause_consumer(w.stream.name, o.name, 60), prepare=lambda w: w.new_consumer()),
    R("JetStream.resume_consumer", CALL, lambda w, o: w.js.resume_consumer(w.stream.name, o.name), prepare=lambda w: w.new_consumer()),
    R("JetStream.reset_consumer", CALL, lambda w, o: w.js.reset_consumer(w.stream.name, o.name), prepare=lambda w: w.new_consumer()),
    R("JetStream.unpin_consumer", CALL, lambda w, o: w.js.unpin_consumer(w.stream.name, o.name, "g"), prepare=_pinned),
    R("JetStream.ordered_consumer", CALL, lambda w, o: w.js.ordered_consumer(w.stream.name), cleanup=_close),
    R("JetStream.pull_subscribe", CALL, lambda w, o: w.js.pull_subscribe(w.subj, durable=w.name("Q")), cleanup=_unsub),
    R("JetStream.pull_subscribe_bind", CALL, lambda w, o: w.js.pull_subscribe_bind(o.name, w.stream.name),
      prepare=lambda w: w.new_consumer(), cleanup=_unsub),
    R("JetStream.subscribe", OPEN, lambda w, o: w.js.subscribe(w.subj, durable=w.name("Q")), cleanup=_unsub),
    R("JetStream.subscribe_bind", OPEN, lambda w, o: w.js.subscribe_bind(w.stream.name, consumer=o.name),
      prepare=lambda w: _push(w), cleanup=_unsub),
    # JetStream: buckets and groups
    R("JetStream.create_key_value", CALL, lambda w, o: w.js.create_key_value(w.name("K"))),
    R("JetStream.create_or_update_key_value", CALL, lambda w, o: w.js.create_or_update_key_value(w.name("K"))),
    R("JetStream.update_key_value", CALL, lambda w, o: w.js.update_key_value(o, history=3), prepare=lambda w: _kv(w)),
    R("JetStream.key_value", CALL, lambda w, o: w.js.key_value(w.kv.bucket)),
    R("JetStream.key_value_names", CALL, lambda w, o: w.js.key_value_names()),
    R("JetStream.key_value_buckets", CALL, lambda w, o: w.js.key_value_buckets()),
    R("JetStream.delete_key_value", CALL, lambda w, o: w.js.delete_key_value(o), prepare=lambda w: _kv(w)),
    R("JetStream.create_object_store", CALL, lambda w, o: w.js.create_object_store(w.name("O"))),
    R("JetStream.create_or_update_object_store", CALL, lambda w, o: w.js.create_or_update_object_store(w.name("O"))),
    R("JetStream.update_object_store", CALL, lambda w, o: w.js.update_object_store(o, description="d"), prepare=lambda w: _obs(w)),
    R("JetStream.object_store", CALL, lambda w, o: w.js.object_store(w.obs.bucket)),
    R("JetStream.object_store_names", CALL, lambda w, o: w.js.object_store_names()),
    R("JetStream.object_stores", CALL, lambda w, o: w.js.object_stores()),
    R("JetStream.delete_object_store", CALL, lambda w, o: w.js.delete_object_store(o), prepare=lambda w: _obs(w)),
    R("JetStream.create_static_group", CALL, lambda w, o: w.js.create_static_group(o[0], "h", 2, members=["a"]), prepare=_partitioned),
    R("JetStream.static_group", CALL, lambda w, o: w.js.static_group(o[0], "g"), prepare=_partitioned),
    R("JetStream.static_groups", OPEN, lambda w, o: w.js.static_groups(o[0]), prepare=_partitioned),
    R("JetStream.delete_static_group", CALL, lambda w, o: w.js.delete_static_group(o[0], "g"), prepare=_partitioned),
    R("JetStream.join_static_group", OPEN, lambda w, o: w.js.join_static_group(o[0], "g", "a"), prepare=_partitioned, cleanup=_ctx_end),
    R("JetStream.create_elastic_group", CALL, lambda w, o: w.js.create_elastic_group(
        o, "g", 2, partitioning_filters=[(f"{o.lower()}.*", [1])]), prepare=lambda w: w.new_stream(subjects=[w.name("e").lower() + ".*"]).name),
    R("JetStream.elastic_group", CALL, lambda w, o: w.js.elastic_group(o[0], "g"), prepare=_elastic),
    R("JetStream.elastic_groups", OPEN, lambda w, o: w.js.elastic_groups(o[0]), prepare=_elastic),
    R("JetStream.delete_elastic_group", CALL, lambda w, o: w.js.delete_elastic_group(o[0], "g"), prepare=_elastic),
    # Stream
    R("Stream.info", CALL, lambda w, o: w.stream.info()),
    R("Stream.purge", CALL, lambda w, o: o.purge(), prepare=lambda w: w.new_stream()),
    R("Stream.delete", CALL, lambda w, o: o.delete(), prepare=lambda w: w.new_stream()),
    R("Stream.get_msg", CALL, lambda w, o: w.stream.get_msg(2)),
    R("Stream.get_msgs", CALL, lambda w, o: w.stream.get_msgs(seq=1, batch=2)),
    R("Stream.get_last_msgs", CALL, lambda w, o: w.stream.get_last_msgs([w.subj])),
    R("Stream.delete_msg", CALL, lambda w, o: o.delete_msg(2), prepare=lambda w: w.new_stream()),
    R("Stream.create_consumer", CALL, lambda w, o: w.stream.create_consumer(durable_name=w.name("C"))),
    R("Stream.create_or_update_consumer", CALL, lambda w, o: w.stream.create_or_update_consumer(durable_name=w.name("C"))),
    R("Stream.update_consumer", CALL, lambda w, o: w.stream.update_consumer(durable_name=o.name, max_deliver=5), prepare=lambda w: w.new_consumer()),
    R("Stream.create_push_consumer", CALL, lambda w, o: w.stream.create_push_consumer(durable_name=w.name("P"), deliver_subject=w.name("d").lower())),
    R("Stream.create_or_update_push_consumer", CALL, lambda w, o: w.stream.create_or_update_push_consumer(
        durable_name=w.name("P"), deliver_subject=w.name("d").lower())),
    R("Stream.update_push_consumer", CALL, lambda w, o: w.stream.update_push_consumer(
        durable_name=o.name, deliver_subject=o.cached_info.config.deliver_subject, max_deliver=5), prepare=lambda w: _push(w)),
    R("Stream.consumer", CALL, lambda w, o: w.stream.consumer("acks")),
    R("Stream.push_consumer", CALL, lambda w, o: w.stream.push_consumer(o.name), prepare=lambda w: _push(w)),
    R("Stream.consumer_info", CALL, lambda w, o: w.stream.consumer_info("acks")),
    R("Stream.consumer_names", CALL, lambda w, o: w.stream.consumer_names()),
    R("Stream.consumers", CALL, lambda w, o: w.stream.consumers()),
    R("Stream.delete_consumer", CALL, lambda w, o: w.stream.delete_consumer(o.name), prepare=lambda w: w.new_consumer()),
    R("Stream.ordered_consumer", HANDLE, lambda w, o: w.stream.ordered_consumer(), cleanup=_close),
    # Consumer (pull)
    R("Consumer.info", CALL, lambda w, o: o.info(), prepare=lambda w: w.new_consumer()),
    R("Consumer.delete", CALL, lambda w, o: o.delete(), prepare=lambda w: w.new_consumer()),
    R("Consumer.pause", CALL, lambda w, o: o.pause(60), prepare=lambda w: w.new_consumer()),
    R("Consumer.resume", CALL, lambda w, o: o.resume(), prepare=lambda w: w.new_consumer()),
    R("Consumer.reset", CALL, lambda w, o: o.reset(), prepare=lambda w: w.new_consumer()),
    R("Consumer.unpin", CALL, lambda w, o: o.unpin("g"), prepare=_pinned),
    R("Consumer.fetch", OPEN, lambda w, o: list(o.fetch(2, expires=w.t)), prepare=lambda w: w.new_consumer(), extra=1.0),
    R("Consumer.fetch_no_wait", OPEN, lambda w, o: list(o.fetch_no_wait(2, expires=w.t)), prepare=lambda w: w.new_consumer()),
    R("Consumer.next", OPEN, lambda w, o: o.next(timeout=w.t), prepare=lambda w: w.new_consumer()),
    R("Consumer.messages", OPEN, lambda w, o: o.messages(), prepare=lambda w: w.new_consumer(), cleanup=_ctx_end),
    R("Consumer.consume", OPEN, lambda w, o: o.consume(lambda m: m.ack()), prepare=lambda w: w.new_consumer(), cleanup=_ctx_end),
    # PushConsumer
    R("PushConsumer.info", CALL, lambda w, o: o.info(), prepare=lambda w: _push(w)),
    R("PushConsumer.delete", CALL, lambda w, o: o.delete(), prepare=lambda w: _push(w)),
    R("PushConsumer.pause", CALL, lambda w, o: o.pause(60), prepare=lambda w: _push(w)),
    R("PushConsumer.resume", CALL, lambda w, o: o.resume(), prepare=lambda w: _push(w)),
    R("PushConsumer.reset", CALL, lambda w, o: o.reset(), prepare=lambda w: _push(w)),
    R("PushConsumer.messages", OPEN, lambda w, o: o.messages(), prepare=lambda w: _push(w), cleanup=_ctx_end),
    R("PushConsumer.consume", OPEN, lambda w, o: o.consume(lambda m: m.ack()), prepare=lambda w: _push(w), cleanup=_ctx_end),
    *[
        R(f"PushConsumer.{m}", LOCAL, lambda w, o, m=m: getattr(o, m)(), prepare=lambda w: _push(w),
          override={s: (jss.ConsumerPushBasedError,) for s in State} | {Caller.LOOP: (jss.ConsumerPushBasedError,)})
        for m in ("fetch", "fetch_no_wait", "next")
    ],  # a push consumer has no pulls, whatever the state
    # OrderedConsumer
    # Its consumer (memory storage) does not outlive a server restart; the next pull makes another.
    R("OrderedConsumer.info", CALL, lambda w, o: o.info(), prepare=lambda w: _ordered_started(w),
      override={State.RESTARTED: (OK, jss.ConsumerNotFoundError)}),
    R("OrderedConsumer.fetch", OPEN, lambda w, o: list(o.fetch(2, expires=w.t)), extra=1.0, prepare=lambda w: w.js.ordered_consumer(w.stream.name)),
    R("OrderedConsumer.fetch_no_wait", OPEN, lambda w, o: list(o.fetch_no_wait(2)), prepare=lambda w: w.js.ordered_consumer(w.stream.name)),
    R("OrderedConsumer.next", OPEN, lambda w, o: o.next(timeout=w.t), prepare=lambda w: w.js.ordered_consumer(w.stream.name)),
    R("OrderedConsumer.messages", OPEN, lambda w, o: o.messages(), prepare=lambda w: w.js.ordered_consumer(w.stream.name), cleanup=_ctx_end),
    R("OrderedConsumer.consume", OPEN, lambda w, o: o.consume(lambda m: None), prepare=lambda w: w.js.ordered_consumer(w.stream.name),
      cleanup=_ctx_end),
    R("OrderedConsumer.close", END_CALL, lambda w, o: o.close(), prepare=lambda w: _ordered_started(w)),
    # the iteration contexts
    R("MessagesContext.next", READ, lambda w, o: o.next(timeout=w.t), prepare=lambda w: _buffering(w), cleanup=None),
    R("MessagesContext.__next__", READ, lambda w, o: next(o), prepare=lambda w: _buffering(w)),
    R("MessagesContext.prefetch", HANDLE, lambda w, o: o.prefetch(), prepare=lambda w: w.new_consumer().messages(),
      override={State.CLOSED: (OK,)}),  # a context the close ended has nothing to pull
    R("MessagesContext.stop", END, lambda w, o: o.stop(), prepare=lambda w: _buffering(w)),
    R("MessagesContext.drain", END, lambda w, o: o.drain(), prepare=lambda w: _buffering(w)),
    R("MessagesContext.wait_closed", WAIT, lambda w, o: o.wait_closed(WAIT_T), prepare=lambda w: _buffering(w)),
    R("ConsumeContext.stop", END, lambda w, o: o.stop(), prepare=lambda w: w.new_consumer().consume(lambda m: m.ack())),
    R("ConsumeContext.drain", END, lambda w, o: o.drain(), prepare=lambda w: w.new_consumer().consume(lambda m: m.ack())),
    R("ConsumeContext.wait", WAIT, lambda w, o: o.wait(WAIT_T), prepare=lambda w: w.new_consumer().consume(lambda m: m.ack())),
    R("FetchResult.__iter__", READ, lambda w, o: list(o), prepare=_fetched),
    # What was received, without waiting: a close gave it back (NAK'd).
    R("FetchResult.ready", HANDLE, lambda w, o: o.ready(), prepare=_fetched),
    R("FetchResult.close", END, lambda w, o: o.close(), prepare=_fetched),
    # Msg
    R("Msg.ack", SEND, lambda w, o: o.ack(), prepare=lambda w: w.unacked()),
    R("Msg.nak", SEND, lambda w, o: o.nak(), prepare=lambda w: w.unacked()),
    R("Msg.in_progress", SEND, lambda w, o: o.in_progress(), prepare=lambda w: w.unacked()),
    R("Msg.term", SEND, lambda w, o: o.term(), prepare=lambda w: w.unacked()),
    R("Msg.ack_sync", CALL, lambda w, o: o.ack_sync(timeout=w.t), prepare=lambda w: w.unacked()),
    R("Msg.respond", SEND, lambda w, o: o.respond(b"answer"), prepare=lambda w: w.held_request("hold")),
    # KeyValue
    R("KeyValue.put", CALL, lambda w, o: w.kv.put("k", b"p")),
    R("KeyValue.create", CALL, lambda w, o: w.kv.create(w.name("k").lower(), b"c")),
    R("KeyValue.update", CALL, lambda w, o: _kv_update(w, o), prepare=lambda w: _kv_key(w)),
    R("KeyValue.get", CALL, lambda w, o: w.kv.get("k")),
    R("KeyValue.delete", CALL, lambda w, o: w.kv.delete(o[0]), prepare=lambda w: _kv_key(w)),
    R("KeyValue.purge", CALL, lambda w, o: w.kv.purge(o[0]), prepare=lambda w: _kv_key(w)),
    R("KeyValue.purge_deletes", OPEN, lambda w, o: w.kv.purge_deletes()),
    R("KeyValue.history", OPEN, lambda w, o: w.kv.history("k")),
    R("KeyValue.keys", OPEN, lambda w, o: w.kv.keys()),
    R("KeyValue.status", CALL, lambda w, o: w.kv.status()),
    R("KeyValue.watch", OPEN, lambda w, o: w.kv.watch("k"), cleanup=_ctx_end),
    R("KeyValue.watch_all", OPEN, lambda w, o: w.kv.watch_all(), cleanup=_ctx_end),
    R("KeyValue.watchall", OPEN, lambda w, o: w.kv.watchall(), cleanup=_ctx_end),
    R("KeyValue.with_codecs", LOCAL, lambda w, o: w.kv.with_codecs()),
    R("KeyWatcher.next", READ, lambda w, o: o.next(timeout=w.t), prepare=lambda w: w.kv.watch("k")),
    R("KeyWatcher.updates", READ, lambda w, o: o.updates(timeout=w.t), prepare=lambda w: w.kv.watch("k")),
    R("KeyWatcher.stop", END, lambda w, o: o.stop(), prepare=lambda w: w.kv.watch("k")),
    # ObjectStore
    R("ObjectStore.put", CALL, lambda w, o: w.obs.put(w.name("o"), b"data")),
    R("ObjectStore.get", OPEN, lambda w, o: w.obs.get("o", timeout=w.t).read(), cleanup=None),
    R("ObjectStore.get_bytes", OPEN, lambda w, o: w.obs.get_bytes("o")),
    R("ObjectStore.get_info", CALL, lambda w, o: w.obs.get_info("o")),
    R("ObjectStore.list", OPEN, lambda w, o: w.obs.list()),
    R("ObjectStore.delete", CALL, lambda w, o: w.obs.delete(o), prepare=lambda w: _object(w)),
    R("ObjectStore.update_meta", CALL, lambda w, o: w.obs.update_meta(o, _meta(o)), prepare=lambda w: _object(w)),
    R("ObjectStore.add_link", CALL, lambda w, o: w.obs.add_link(w.name("l"), o), prepare=lambda w: w.obs.get_info("o")),
    R("ObjectStore.add_bucket_link", CALL, lambda w, o: w.obs.add_bucket_link(w.name("l"), w.obs)),
    R("ObjectStore.status", CALL, lambda w, o: w.obs.status()),
    R("ObjectStore.seal", CALL, lambda w, o: o.seal(), prepare=lambda w: w.js.create_object_store(w.name("O"))),
    R("ObjectStore.watch", OPEN, lambda w, o: w.obs.watch(), cleanup=_ctx_end),
    R("ObjectWatcher.next", READ, lambda w, o: o.next(timeout=w.t), prepare=lambda w: w.obs.watch(include_history=True)),
    R("ObjectWatcher.updates", READ, lambda w, o: o.updates(timeout=w.t), prepare=lambda w: w.obs.watch(include_history=True)),
    R("ObjectWatcher.stop", END, lambda w, o: o.stop(), prepare=lambda w: w.obs.watch()),
    R("ObjectResult.read", READ, lambda w, o: o.read(), prepare=lambda w: w.obs.get("o", timeout=w.t)),
    R("ObjectResult.readall", READ, lambda w, o: o.readall(), prepare=lambda w: w.obs.get("o", timeout=w.t)),
    R("ObjectResult.readinto", READ, lambda w, o: o.readinto(bytearray(64)), prepare=lambda w: w.obs.get("o", timeout=w.t)),
    R("ObjectResult.readable", LOCAL, lambda w, o: o.readable(), prepare=lambda w: w.obs.get("o", timeout=w.t)),
    R("ObjectResult.close", END, lambda w, o: o.close(), prepare=lambda w: w.obs.get("o", timeout=w.t)),
    # Service
    R("Service.add_endpoint", OPEN, lambda w, o: w.svc.add_endpoint(w.name("ep").lower(), lambda r: r.respond(b"")),
      ),
    R("Service.endpoint", OPEN, lambda w, o: w.svc.endpoint(w.name("ep").lower())(lambda r: r.respond(b""))),
    R("Service.add_group", LOCAL, lambda w, o: w.svc.add_group(w.name("g").lower())),
    R("ServiceGroup.add_endpoint", OPEN, lambda w, o: o.add_endpoint(w.name("ep").lower(), lambda r: r.respond(b"")),
      prepare=lambda w: w.svc.add_group(w.name("g").lower())),
    R("ServiceGroup.endpoint", OPEN, lambda w, o: o.endpoint(w.name("ep").lower())(lambda r: r.respond(b"")),
      prepare=lambda w: w.svc.add_group(w.name("g").lower())),
    R("ServiceGroup.add_group", LOCAL, lambda w, o: o.add_group(w.name("g").lower()), prepare=lambda w: w.svc.add_group(w.name("g").lower())),
    R("Service.info", LOCAL, lambda w, o: w.svc.info()),
    R("Service.stats", LOCAL, lambda w, o: w.svc.stats()),
    R("Service.reset", LOCAL, lambda w, o: w.svc.reset()),
    R("Service.stop", END, lambda w, o: o.stop(), prepare=lambda w: _service(w)),
    R("Service.drain", END_WAIT, lambda w, o: o.drain(timeout=WAIT_T), prepare=lambda w: _service(w)),
    R("Service.wait", WAIT, lambda w, o: o.wait(WAIT_T), prepare=lambda w: _service(w)),
    R("ServiceRequest.respond", SEND, lambda w, o: o.respond(b"a"), prepare=lambda w: w.service_request()),
    R("ServiceRequest.respond_json", SEND, lambda w, o: o.respond_json({"a": 1}), prepare=lambda w: w.service_request()),
    R("ServiceRequest.respond_error", SEND, lambda w, o: o.respond_error(500, "no"), prepare=lambda w: w.service_request()),
    # core subscriptions and replies
    # What a core subscription received stays readable after a close (no acks to lose), then it raises.
    R("Subscription.next_msg", READ, lambda w, o: o.next_msg(timeout=w.t), prepare=lambda w: _core_sub(w),
      override={State.CLOSED: (OK, CLOSED)}),
    R("Subscription.pending", LOCAL, lambda w, o: o.pending(), prepare=lambda w: _core_sub(w)),
    R("Subscription.unsubscribe", END, lambda w, o: o.unsubscribe(), prepare=lambda w: _core_sub(w)),
    R("Subscription.drain", END_WAIT, lambda w, o: o.drain(timeout=WAIT_T), prepare=lambda w: _core_sub(w)),
    R("Replies.__next__", READ, lambda w, o: next(o), prepare=lambda w: _replies(w), override={State.CLOSED: (OK, CLOSED)}),
    R("Replies.close", END, lambda w, o: o.close(), prepare=lambda w: _replies(w)),
    # nats-py style JetStream subscriptions
    R("PullSubscription.fetch", OPEN, lambda w, o: o.fetch(1, timeout=w.t), prepare=lambda w: w.js.pull_subscribe(w.subj, durable=w.name("Q"))),
    R("PullSubscription.consumer_info", CALL, lambda w, o: o.consumer_info(), prepare=lambda w: w.js.pull_subscribe(w.subj, durable=w.name("Q"))),
    R("PullSubscription.unsubscribe", END_CALL, lambda w, o: o.unsubscribe(), prepare=lambda w: w.js.pull_subscribe(w.subj, durable=w.name("Q"))),
    R("PullSubscription.drain", END_CALL, lambda w, o: o.drain(), prepare=lambda w: w.js.pull_subscribe(w.subj, durable=w.name("Q"))),
    R("PushSubscription.next_msg", READ, lambda w, o: o.next_msg(timeout=w.t), prepare=lambda w: _push_sub(w)),
    R("PushSubscription.consumer_info", CALL, lambda w, o: o.consumer_info(), prepare=lambda w: _push_sub(w)),
    R("PushSubscription.unsubscribe", END_CALL, lambda w, o: o.unsubscribe(), prepare=lambda w: _push_sub(w)),
    R("PushSubscription.drain", END_CALL, lambda w, o: o.drain(timeout=WAIT_T), prepare=lambda w: _push_sub(w)),
    # partitioned groups
    R("StaticGroup.join", OPEN, lambda w, o: o[1].join("a"), prepare=_partitioned, cleanup=_ctx_end),
    R("StaticGroup.active_members", CALL, lambda w, o: o[1].active_members(), prepare=_partitioned),
    R("StaticGroup.step_down", CALL, lambda w, o: o.step_down("a"), prepare=lambda w: _member_pulling(w, _partitioned(w)[1])),
    R("StaticGroup.delete", CALL, lambda w, o: o[1].delete(), prepare=_partitioned),
    R("StaticGroup.consumer_name", LOCAL, lambda w, o: o[1].consumer_name("a"), prepare=_partitioned),
    R("GroupMessagesContext.next", READ, lambda w, o: o.next(timeout=w.t), prepare=lambda w: _partitioned(w)[1].join("a")),
    R("GroupMessagesContext.stop", END, lambda w, o: o.stop(), prepare=lambda w: _partitioned(w)[1].join("a")),
    R("GroupMessagesContext.drain", END, lambda w, o: o.drain(), prepare=lambda w: _partitioned(w)[1].join("a")),
    R("GroupMessagesContext.wait_closed", WAIT, lambda w, o: o.wait_closed(WAIT_T), prepare=lambda w: _partitioned(w)[1].join("a")),
    R("GroupMessagesContext.subject", LOCAL, lambda w, o: o[0].subject(o[1]), prepare=lambda w: (_partitioned(w)[1].join("a"), w.unacked())),
    R("GroupConsumeContext.stop", END, lambda w, o: o.stop(), prepare=lambda w: _partitioned(w)[1].join("a", lambda m: m.ack())),
    R("GroupConsumeContext.drain", END, lambda w, o: o.drain(), prepare=lambda w: _partitioned(w)[1].join("a", lambda m: m.ack())),
    R("GroupConsumeContext.wait", WAIT, lambda w, o: o.wait(WAIT_T), prepare=lambda w: _partitioned(w)[1].join("a", lambda m: m.ack())),
    R("GroupConsumeContext.subject", LOCAL, lambda w, o: o[0].subject(o[1]),
      prepare=lambda w: (_partitioned(w)[1].join("a", lambda m: m.ack()), w.unacked())),
    R("ElasticGroup.join", OPEN, lambda w, o: o[1].join("a", lambda m: m.ack()), prepare=_elastic, cleanup=_ctx_end),
    R("ElasticGroup.refresh", CALL, lambda w, o: o[1].refresh(), prepare=_elastic),
    R("ElasticGroup.add_members", CALL, lambda w, o: o[1].add_members(["b"]), prepare=_elastic),
    R("ElasticGroup.delete_members", CALL, lambda w, o: o[1].delete_members(["a"]), prepare=_elastic),
    R("ElasticGroup.set_member_mappings", CALL, lambda w, o: o[1].set_member_mappings({"a": [0], "b": [1]}), prepare=_elastic),
    R("ElasticGroup.delete_member_mappings", CALL, lambda w, o: o[1].delete_member_mappings(), prepare=_elastic),
    R("ElasticGroup.active_members", CALL, lambda w, o: o[1].active_members(), prepare=_elastic),
    R("ElasticGroup.step_down", CALL, lambda w, o: o.step_down("a"), prepare=lambda w: _elastic_pulling(w)),
    R("ElasticGroup.delete", CALL, lambda w, o: o[1].delete(), prepare=_elastic),
    R("ElasticMember.stop", END, lambda w, o: o.stop(), prepare=lambda w: _elastic(w)[1].join("a", lambda m: m.ack())),
    R("ElasticMember.wait", WAIT, lambda w, o: o.wait(WAIT_T), prepare=lambda w: _elastic(w)[1].join("a", lambda m: m.ack())),
]


def _push(w: World) -> jss.PushConsumer:
    return w.stream.create_push_consumer(durable_name=w.name("P"), deliver_subject=w.name("d").lower())


def _kv(w: World) -> str:
    return w.js.create_key_value(w.name("K")).bucket


def _obs(w: World) -> str:
    return w.js.create_object_store(w.name("O")).bucket


def _fast_batch_started(w: World) -> Tuple[Any, str]:
    """A fast batch that sent its first message, and its subject."""
    subject = _batch_stream(w) + ".x"
    batch = w.js.fast_batch()
    batch.add(subject, b"first")
    return batch, subject


def _ordered_started(w: World) -> jss.OrderedConsumer:
    oc = w.js.ordered_consumer(w.stream.name)
    oc.next(timeout=5)  # its consumer exists on the server
    return oc


def _buffering(w: World) -> jss.MessagesContext:
    """A messages() context that has messages buffered."""
    ctx = w.new_consumer().messages(max_messages=10)
    ctx.next(timeout=5)
    return ctx


def _kv_key(w: World) -> Tuple[str, int]:
    key = w.name("k").lower()
    return key, w.kv.put(key, b"1")


def _kv_update(w: World, o: Tuple[str, int]) -> int:
    return w.kv.update(o[0], b"2", last=o[1])


def _object(w: World) -> str:
    name = w.name("o")
    w.obs.put(name, b"x")
    return name


def _meta(name: str) -> jss.ObjectMeta:
    return jss.ObjectMeta(name=name, description="described")


def _service(w: World) -> Any:
    svc = w.nc.add_service(w.name("svc"), "1.0.0")
    svc.add_endpoint("e", lambda r: r.respond(b""), subject=f"{w.tag}.{w.name('e').lower()}")
    return svc


def _core_sub(w: World) -> Any:
    subject = f"{w.tag}.{w.name('c').lower()}"
    sub = w.nc.subscribe(subject)
    w.nc.flush()
    w.peer.publish(subject, b"1")
    w.peer.flush()
    jss.testing.wait_until(lambda: sub.pending() >= 1, timeout=5)
    return sub


def _replies(w: World) -> Any:
    """A request_many whose first reply has arrived and was not read yet."""
    before = w.echoed
    replies = w.nc.request_many(w.echo, b"x", max_wait=30, max_messages=2)
    jss.testing.wait_until(lambda: w.echoed > before, timeout=5)
    w.peer.flush()  # the server has the reply ...
    w.nc.flush()  # ... and sent it before its PONG to this client
    return replies


def _push_sub(w: World) -> Any:
    return w.js.subscribe(w.subj, durable=w.name("Q"))
