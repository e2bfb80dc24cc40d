"""The transition matrix: every public method (tests/transition_table.py) in
every state of the connection, from every kind of caller.

One test per state. A client with one of everything is made while
connected; for every caller, each row prepares what its call needs. The
handler and loop callers are then set running (each blocked inside its
handler or asyncio task), the state changes, and every caller makes every
call of the table at once. Each cell asserts the documented outcome (a
result, or the error class with a message naming the state) within the time
the call may wait plus ``BOUND``. Afterwards: every publish a call was told
is stored is in its stream, and no thread is left once the client closed.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest

import jetstream_sync as jss
from jetstream_sync.testing import NatsServer

from ..helpers import wait_until
from ..transition_table import (
    OK,
    RECONNECTING_WORDS,
    ROWS,
    STATE_WORDS,
    T,
    T_RECONNECTING,
    Caller,
    Row,
    State,
    World,
    retried,
)

pytestmark = pytest.mark.timeout(600)

BOUND = 3.0  # seconds a cell may take beyond what its call may wait (a loaded CI machine)
ARMED = 120.0  # how long a handler or loop caller waits to be let go
IMMEDIATE = (jss.ConnectionClosedError, jss.ForkedProcessError, jss.DeadlockError)  # raised before any wait


def callers(state: State) -> Tuple[Caller, ...]:
    if state is State.FORKED:
        return (Caller.MAIN, Caller.NEW)  # a forked child has only the thread that forked, and those it starts
    if state is State.CLOSED:
        return tuple(c for c in Caller if c is not Caller.LOOP)  # a closed client has no loop thread
    return tuple(Caller)


CELLS = sum(len(ROWS) * len(callers(s)) for s in State)


@dataclass
class Result:
    target: str
    ok: bool
    value: Any
    error: Optional[BaseException]
    seconds: float


def call_row(world: World, row: Row, prepared: Any) -> Result:
    start = time.monotonic()
    try:
        value = row.call(world, prepared)
    except BaseException as exc:  # noqa: BLE001 - every outcome is recorded
        if isinstance(exc, KeyboardInterrupt):
            raise
        return Result(row.target, False, None, exc, time.monotonic() - start)
    return Result(row.target, True, value, None, time.monotonic() - start)


def judge(world: World, row: Row, res: Result, state: State, caller: Caller) -> Optional[str]:
    """What is wrong with this cell's outcome, or None."""
    allowed = row.expected(state, caller)
    cell = f"{row.target} [{state.value}, {caller.value}]"
    exc = res.error
    bound = BOUND if isinstance(exc, IMMEDIATE) else row.wait(world) + BOUND
    if res.seconds > bound:
        return f"{cell}: took {res.seconds:.2f}s (bound {bound:.1f}s); " + (f"raised {exc!r}" if exc else "returned")
    if exc is None:
        return None if OK in allowed else f"{cell}: returned {short(res.value)}; expected {names(allowed)}"
    if not any(isinstance(exc, cls) for cls in allowed if isinstance(cls, type)):
        return f"{cell}: raised {type(exc).__name__}({exc}); expected {names(allowed)}"
    words: Sequence[str] = ()
    for cls, w in STATE_WORDS.items():
        if isinstance(exc, cls):
            words = w
    if state is State.RECONNECTING and isinstance(exc, jss.TimeoutError):
        words = RECONNECTING_WORDS
    if words and not any(word in str(exc).lower() for word in words):
        return f"{cell}: {type(exc).__name__}({exc}) does not name the state (any of {list(words)})"
    return None


def names(allowed: Sequence[Any]) -> str:
    return " or ".join(a if isinstance(a, str) else a.__name__ for a in allowed)


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


# -- callers ----------------------------------------------------------------------------------------


class Runner:
    """Makes every call of the table as one kind of caller, on objects of its own.

    Two phases: the calls (every caller at once), then, caller after caller,
    the client-ending ones (``Row.last``), each from the caller's own thread.
    """

    def __init__(self, caller: Caller, world: World, rows: List[Row]) -> None:
        self.caller, self.world, self.rows = caller, world, rows
        self.prepared: Dict[str, Any] = {
            r.target: retried(lambda r=r: r.prepare(world)) for r in rows if r.prepare and not r.late
        }
        self.results: List[Result] = []
        self.go, self.done = threading.Event(), threading.Event()
        self.last_go, self.last_done = threading.Event(), threading.Event()
        self.current = ""  # the row being called: named if the caller hangs

    @property
    def first_rows(self) -> List[Row]:
        return [r for r in self.rows if not r.last]

    @property
    def last_rows(self) -> List[Row]:
        return [r for r in self.rows if r.last]

    def prepare_late(self) -> None:
        """Just before the state change: what must not wait long (a fast batch begun)."""
        for r in self.rows:
            if r.prepare and r.late:
                self.prepared[r.target] = retried(lambda r=r: r.prepare(self.world))

    def arm(self) -> None:
        """Before the state change: a handler or the loop task starts and waits."""

    def start(self) -> None:
        """After the state change: let the calls begin (not waiting for them)."""
        self.go.set()

    def finish(self) -> None:
        """Wait for the calls."""
        self._wait(self.done, self.first_rows)

    def last(self) -> None:
        """Let the client-ending calls go and wait for them."""
        self.last_go.set()
        self._wait(self.last_done, self.last_rows)

    def _wait(self, event: threading.Event, rows: List[Row]) -> None:
        budget = sum(r.wait(self.world) + BOUND for r in rows) + 30
        assert event.wait(budget), f"the {self.caller.value} caller hung in {self.current or 'nothing'}"

    def each(self, rows: List[Row]) -> None:
        for row in rows:
            self.current = row.target
            self.results.append(call_row(self.world, row, self.prepared.get(row.target)))
        self.current = ""

    def body(self) -> None:
        """A handler's side: wait to be let go for each phase, make its calls."""
        for go, rows, done in ((self.go, self.first_rows, self.done), (self.last_go, self.last_rows, self.last_done)):
            if not go.wait(ARMED):
                return
            try:
                self.each(rows)
            finally:
                done.set()


class MainRunner(Runner):
    """The thread that connected: the test's own."""

    def finish(self) -> None:
        self.each(self.first_rows)

    def last(self) -> None:
        self.each(self.last_rows)


class NewThreadRunner(Runner):
    """Each call on a thread of its own, started after the state change,
    several at once (the client is shared by threads)."""

    def start(self) -> None:
        threading.Thread(target=self._run, args=(self.first_rows, 16, self.done), name="matrix-new", daemon=True).start()

    def last(self) -> None:
        threading.Thread(target=self._run, args=(self.last_rows, 1, self.last_done), name="matrix-new", daemon=True).start()
        self._wait(self.last_done, self.last_rows)

    def _run(self, rows: List[Row], width: int, done: threading.Event) -> None:
        lock = threading.Lock()
        try:
            for i in range(0, len(rows), width):
                threads = []
                for row in rows[i : i + width]:

                    def one(row: Row = row) -> None:
                        res = call_row(self.world, row, self.prepared.get(row.target))
                        with lock:
                            self.results.append(res)

                    t = threading.Thread(target=one, name=f"matrix-{row.target}", daemon=True)
                    t.start()
                    threads.append((row, t))
                for row, t in threads:
                    self.current = row.target
                    t.join(row.wait(self.world) + BOUND + 10)
                    if t.is_alive():
                        with lock:
                            self.results.append(Result(row.target, False, None, RuntimeError("never returned"), 1e9))
        finally:
            done.set()


class HandlerRunner(Runner):
    """The calls made from inside a handler that was running when the state changed."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.started = threading.Event()
        self._claimed = threading.Lock()

    def handler(self, msg: Any) -> None:
        if self._claimed.acquire(blocking=False):
            self.started.set()
            self.body()
        if self.caller is Caller.CONSUME:
            try:
                msg.ack()
            except jss.JetStreamError:
                pass  # the client may be closed by now

    def arm(self) -> None:
        w = self.world
        subject = f"{w.tag}.run.{self.caller.value}"
        if self.caller is Caller.CONSUME:
            w.new_consumer().consume(self.handler, max_messages=1)
        elif self.caller is Caller.SERVICE:
            w.svc.add_endpoint(f"run-{self.caller.value}", self.handler, subject=subject)
            w.nc.flush()
            w.peer.publish(subject, b"go", reply=f"_INBOX.{w.tag}.run")
        else:
            w.nc.subscribe(subject, cb=self.handler)
            w.nc.flush()
            w.peer.publish(subject, b"go")
        assert self.started.wait(10), f"the {self.caller.value} never started"


class LoopRunner(Runner):
    """The calls made from an asyncio task on the client's loop thread: each
    phase runs synchronously there, as an asyncio callback would."""

    def arm(self) -> None:
        started = threading.Event()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._phases: List[asyncio.Event] = []

        async def task() -> None:
            for go, rows, done in zip(self._phases, (self.first_rows, self.last_rows), (self.done, self.last_done)):
                await go.wait()
                try:
                    self.each(rows)
                finally:
                    done.set()

        async def spawn(_client: Any) -> None:
            self._loop = asyncio.get_running_loop()
            self._phases = [asyncio.Event(), asyncio.Event()]
            self._loop.create_task(task())
            started.set()

        self.world.nc.run_async(spawn, timeout=10)
        assert started.wait(10), "the loop task never started"

    def start(self) -> None:
        super().start()
        self._let_go(0)

    def last(self) -> None:
        self._let_go(1)
        super().last()

    def _let_go(self, phase: int) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._phases[phase].set)


def make_runner(caller: Caller, world: World, rows: List[Row]) -> Runner:
    if caller is Caller.MAIN:
        return MainRunner(caller, world, rows)
    if caller is Caller.NEW:
        return NewThreadRunner(caller, world, rows)
    if caller is Caller.LOOP:
        return LoopRunner(caller, world, rows)
    return HandlerRunner(caller, world, rows)


# -- states ------------------------------------------------------------------------------------------


class Transition:
    """Brings a world into ``state`` and, afterwards, back to a server that answers."""

    def __init__(self, state: State, world: World, server: NatsServer) -> None:
        self.state, self.world, self.server = state, world, server
        self._release = threading.Event()
        self._drainer: Optional[threading.Thread] = None

    def enter(self) -> None:
        w = self.world
        if self.state is State.RECONNECTING:
            self.server.stop()
            wait_until(lambda: w.nc.is_reconnecting, timeout=10)
        elif self.state is State.DRAINING:
            held = threading.Event()

            def hold(req: Any) -> None:
                held.set()
                self._release.wait(ARMED)
                req.respond(b"held")

            w.svc.add_endpoint("hold", hold, subject=f"{w.tag}.holder")
            w.nc.flush()
            w.peer.publish(f"{w.tag}.holder", b"", reply=f"_INBOX.{w.tag}.holder")
            assert held.wait(10), "the holding handler never started"
            self._drainer = threading.Thread(target=w.nc.drain, kwargs={"timeout": ARMED}, name="matrix-drain", daemon=True)
            self._drainer.start()
            wait_until(lambda: w.nc.is_draining, timeout=10)
        elif self.state is State.CLOSED:
            w.nc.close()
        elif self.state is State.RESTARTED:
            self.server.restart()
            wait_until(lambda: w.nc.is_connected, timeout=20)
            wait_until(lambda: _answers(w.peer, w.stream.name), timeout=20)

    def leave(self) -> None:
        if self.state is State.RECONNECTING:
            self.server.start()
            wait_until(lambda: self.world.peer.is_connected, timeout=20)
            wait_until(lambda: _answers(self.world.peer, self.world.stream.name), timeout=20)
        elif self.state is State.DRAINING:
            self._release.set()
            if self._drainer is not None:
                self._drainer.join(ARMED + 10)
                assert not self._drainer.is_alive(), "Client.drain() never returned"


def _answers(client: jss.Client, stream: str) -> bool:
    try:
        client.jetstream(timeout=1).stream_info(stream)
        return True
    except jss.JetStreamError:
        return False


# -- after the calls ---------------------------------------------------------------------------------


def lost_acknowledged(world: World, url: str) -> List[str]:
    """Publishes the calls were told are stored that are not in their stream."""
    acked = list(world.acked)
    for fut in world.futures:
        try:
            ack = fut.result(10)
        except BaseException:  # noqa: BLE001 - a failed publish_async is not a stored one
            continue
        acked.append((ack.stream, ack.seq))
    lost = []
    with jss.connect(url, name="matrix-check") as checker:
        js = checker.jetstream()
        for stream, seq in acked:
            try:
                js.get_msg(stream, seq)
            except jss.MsgNotFoundError:
                lost.append(f"{stream}:{seq} was acknowledged but is not in the stream")
            except jss.StreamNotFoundError:
                pass  # a row deleted that stream
    return lost


def release(runner: Runner) -> None:
    """Stop what the calls made (contexts, subscriptions)."""
    by_target = {r.target: r for r in runner.rows}
    for res in runner.results:
        row = by_target[res.target]
        if res.ok and row.cleanup is not None:
            try:
                row.cleanup(res.value)
            except jss.JetStreamError:
                pass


def threads_left(before: set) -> List[str]:
    def extra() -> List[str]:
        return sorted(t.name for t in threading.enumerate() if t not in before and t.is_alive())

    try:
        wait_until(lambda: not extra(), timeout=15)
    except AssertionError:
        return extra()
    return []


# -- the cells ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", list(State), ids=[s.value for s in State])
def test_every_call_from_every_caller(state: State, nats_server: NatsServer) -> None:
    before = set(threading.enumerate())
    peer = jss.connect(nats_server.url, name="matrix-peer", max_reconnect_attempts=-1, reconnect_time_wait=0.1)
    world = World(nats_server.url, peer, T_RECONNECTING if state is State.RECONNECTING else T)
    rows = list(ROWS)
    runners = [make_runner(c, world, rows) for c in callers(state)]
    failures: List[str] = []
    try:
        for runner in runners:
            runner.prepare_late()
        if state is State.FORKED:
            failures += in_forked_child(world, runners)
        else:
            for runner in runners:
                runner.arm()
            transition = Transition(state, world, nats_server)
            transition.enter()
            try:
                for runner in runners:
                    runner.start()
                for runner in runners:
                    runner.finish()  # MAIN makes its calls here, the others' are under way
                # The client-ending calls, one caller after another; the loop
                # caller first: once another closed the client it has no loop.
                for runner in sorted(runners, key=lambda r: r.caller is not Caller.LOOP):
                    runner.last()
            finally:
                transition.leave()
            for runner in runners:
                failures += judged(state, runner)
        for runner in runners:
            release(runner)
        failures += lost_acknowledged(world, nats_server.url)
    finally:
        world.nc.close()
        peer.close()
    left = threads_left(before)
    if left:
        failures.append(f"threads left behind after close: {left}")
    cells = len(rows) * len(runners)
    assert not failures, f"{len(failures)} of {cells} cells failed:\n" + "\n".join(failures)


def judged(state: State, runner: Runner) -> List[str]:
    by_target = {r.target: r for r in runner.rows}
    out = [f for f in (judge(runner.world, by_target[res.target], res, state, runner.caller) for res in runner.results) if f]
    missing = set(by_target) - {res.target for res in runner.results}
    out += [f"{t} [{state.value}, {runner.caller.value}]: never called" for t in sorted(missing)]
    return out


# -- a forked child ----------------------------------------------------------------------------------


def in_forked_child(world: World, runners: List[Runner]) -> List[str]:
    """Fork; the child makes every call (from its main thread, then from new
    threads) and reports the failed cells. The parent then checks that
    nothing the child did reached the server."""
    js = world.peer.jetstream()
    last_seq = js.stream_info(world.stream.name).state.last_seq
    pending = js.consumer_info(world.stream.name, "acks").num_ack_pending
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery; report through the pipe and leave
        try:
            signal.alarm(int(ARMED))
            failures: List[str] = []
            for runner in runners:
                runner.start()
                runner.finish()
                runner.last()
                failures += judged(State.FORKED, runner)
            os.write(w, json.dumps(failures).encode())
        except BaseException:  # noqa: BLE001
            os.write(w, json.dumps([traceback.format_exc()]).encode())
        finally:
            os._exit(0)
    os.close(w)
    deadline = time.monotonic() + ARMED + 30
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return ["the forked child hung"]
        time.sleep(0.05)
    with os.fdopen(r, "rb") as pipe:
        data = pipe.read()
    failures = json.loads(data) if data else ["the forked child reported nothing"]
    world.nc.flush()
    after = js.stream_info(world.stream.name).state.last_seq
    if after != last_seq:
        failures.append(f"the child's publishes reached the stream: last seq {last_seq} -> {after}")
    now_pending = js.consumer_info(world.stream.name, "acks").num_ack_pending
    if now_pending != pending:
        failures.append(f"the child's acks reached the server: {pending} pending -> {now_pending}")
    return failures

