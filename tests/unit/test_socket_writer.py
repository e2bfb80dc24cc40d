"""SocketWriter: a user thread's direct write and the loop's writes reach the
socket in the order they were made, also when the direct send is partial."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from types import SimpleNamespace
from typing import Any, List

import pytest

from jetstream_sync._core.loop import LoopThread
from jetstream_sync._core.writer import SocketWriter

pytestmark = pytest.mark.timeout(30)


class _Quiet(asyncio.Protocol):
    pass


def _setup(lt: LoopThread, sndbuf: int) -> Any:
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, sndbuf)
    ours.setblocking(False)

    async def make() -> Any:
        transport, _ = await asyncio.get_running_loop().connect_accepted_socket(_Quiet, ours)
        return transport

    transport = lt.run(make(), 5)
    # What SocketWriter reads of nats-py's client: its transport wrapper and buffer.
    nc = SimpleNamespace(_transport=SimpleNamespace(_io_writer=SimpleNamespace(transport=transport)),
                         _pending=[], is_connected=True, stats={"out_msgs": 0, "out_bytes": 0})
    return nc, transport, theirs


@pytest.fixture
def wired(request: Any) -> Any:
    """A loop thread, a SocketWriter attached to a socket pair's transport
    (send buffer ``request.param`` bytes, 4096 by default) and the far end."""
    lt = LoopThread("test-socket-writer")
    nc, transport, theirs = _setup(lt, getattr(request, "param", 4096))
    writer = SocketWriter(lt)
    lt.run(_call(writer.attach, nc), 5)
    yield SimpleNamespace(lt=lt, nc=nc, transport=transport, theirs=theirs, writer=writer)
    lt.run(_call(transport.close), 5)
    theirs.close()
    lt.stop()


def _read_all(sock: socket.socket, size: int) -> bytes:
    sock.settimeout(10)
    got = bytearray()
    while len(got) < size:
        chunk = sock.recv(1 << 20)
        assert chunk, "the socket closed early"
        got += chunk
    return bytes(got)


def test_a_partial_direct_send_is_completed_before_the_loops_next_write(wired: Any) -> None:
    w = wired
    assert w.writer.usable
    big = b"A" * 2_000_000  # far more than the socket buffer: the send is partial
    # The loop's next write is already scheduled (as nats-py's flusher may be) and runs
    # after the partial send, before the loop's own completion of it: its bytes must
    # still come after all of the A's.
    held, release = threading.Event(), threading.Event()
    w.lt.call_soon(lambda: (held.set(), release.wait(10)))
    assert held.wait(5)
    w.lt.call_soon(w.transport.write, b"B" * 1000)
    with w.writer.lock:
        assert w.writer.try_send(w.nc, big, len(big))
    release.set()
    assert _read_all(w.theirs, len(big) + 1000) == big + b"B" * 1000


def test_no_direct_send_while_the_transport_holds_unwritten_bytes(wired: Any) -> None:
    w = wired
    w.lt.run(_call(w.transport.write, b"A" * 2_000_000), 5)  # the loop's write: most stays buffered
    assert w.transport.get_write_buffer_size() > 0
    with w.writer.lock:
        assert not w.writer.try_send(w.nc, b"C", len(b"C"))
    w.nc._pending.append(b"x")  # nats-py holds something unsent: not either
    _read_all(w.theirs, 2_000_000)
    deadline = time.monotonic() + 10
    while w.transport.get_write_buffer_size() and time.monotonic() < deadline:
        time.sleep(0.01)
    with w.writer.lock:
        assert not w.writer.try_send(w.nc, b"C", len(b"C"))
    w.nc._pending.clear()
    with w.writer.lock:
        assert w.writer.try_send(w.nc, b"C", len(b"C"))
    assert _read_all(w.theirs, 1) == b"C"


@pytest.mark.parametrize("wired", [65536], indirect=True)
def test_threads_writing_directly_and_the_loop_writing_never_interleave_inside_a_line(wired: Any) -> None:
    w = wired
    lines_per_thread, threads = 2000, 4

    def line(tag: str, i: int) -> bytes:
        return f"<{tag}:{i}:{'x' * (i % 300)}>\n".encode()

    def user(k: int) -> None:
        for i in range(lines_per_thread):
            data = line(f"u{k}", i)
            with w.writer.lock:
                sent = w.writer.try_send(w.nc, data, len(data))
            if not sent:  # the loop writes it, before this thread's next line
                w.lt.run(_call(w.transport.write, data), 5)
            if i % 100 == 0:
                w.lt.call_soon(w.transport.writelines, [line(f"l{k}", i)])

    sizes: List[int] = []
    for k in range(threads):
        for i in range(lines_per_thread):
            sizes.append(len(line(f"u{k}", i)))
            if i % 100 == 0:
                sizes.append(len(line(f"l{k}", i)))
    got = bytearray()
    reader = threading.Thread(target=lambda: got.extend(_read_all(w.theirs, sum(sizes))))
    reader.start()
    workers = [threading.Thread(target=user, args=(k,)) for k in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(20)
    reader.join(20)
    records = bytes(got).decode().splitlines()
    assert len(records) == len(sizes)
    last: dict = {}
    for rec in records:  # each line whole, and each tag's lines in order
        assert rec.startswith("<") and rec.endswith(">"), rec[:60]
        tag, i, _ = rec[1:-1].split(":")
        assert last.get(tag, -1) < int(i)
        last[tag] = int(i)


async def _call(fn: Any, *args: Any) -> Any:
    return fn(*args)
