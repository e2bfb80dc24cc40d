"""The reading side of the object store: :class:`ObjectResult`, an object
streamed chunk by chunk with its size and digest checked, and
:class:`ObjectWatcher`, the changes of a bucket's object infos. Both read
through an ordered consumer: in order, exactly once, across consumer loss
and reconnects, with a bounded buffer.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import io
import json
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Deque, Optional

from . import model as obj
from .. import errors, options
from .._core.jsapi import JsApi
from .model import ObjectInfo, bucket_errors
from ..kv.watch import initial_done
from ..ordered import OrderedConsumer

_PROBE_AFTER = 2.0  # seconds without a chunk before checking the object is still the one being read

if TYPE_CHECKING:  # pragma: no cover
    from ..contexts import MessagesContext
    from .._core.message import Msg

__all__ = ["ObjectResult", "ObjectWatcher"]

GET_BUFFER_BYTES = 4 * 1024 * 1024  # chunk bytes a reader lets its consumer buffer
DEFAULT_CHUNK_TIMEOUT = 30.0  # seconds a reader waits for each chunk


# -- reading an object ----------------------------------------------------------------------


def _as_bytes(view: memoryview) -> bytes:
    """The chunk itself when the view covers all of it (no copy)."""
    whole = view.obj
    return whole if isinstance(whole, bytes) and len(view) == len(whole) else bytes(view)


def _window(chunk_size: Optional[int], budget: int) -> int:
    return max(1, min(obj.MAX_WINDOW, budget // (chunk_size or obj.DEFAULT_CHUNK_SIZE)))


class ObjectResult(io.RawIOBase):
    """An object being read: a binary, read-only, unseekable stream.

    ``read(n)`` / ``readinto(b)`` / ``readall()`` as any raw stream (so
    ``shutil.copyfileobj`` works); iterating yields chunks (bytes), not
    lines. Chunks come from an ordered consumer that buffers at most ~4 MiB.
    When the last chunk arrives, size and SHA-256 are checked against
    :attr:`info` before it is handed out: DigestMismatchError otherwise (and
    on every later read). ``close()`` (or leaving ``with``) stops the
    consumer. One reader at a time is expected; a lock keeps it consistent.
    """

    def __init__(self, js: JsApi, bucket: str, info: ObjectInfo, timeout: float) -> None:
        super().__init__()
        self._info = info
        self._timeout = timeout
        self._js, self._bucket = js, bucket
        self._lock = threading.RLock()
        self._sha = hashlib.sha256()
        self._received = 0
        self._buf = memoryview(b"")
        self._error: Optional[BaseException] = None
        self._ctx: Optional["MessagesContext"] = None
        self._left = 0  # chunks still to come
        if info.size or info.chunks:
            # The bucket read, not info.bucket: a mirror keeps the source's infos.
            subject = obj.chunk_subject(bucket, info.nuid)
            oc = OrderedConsumer(js, obj.stream_name(bucket), filter_subjects=[subject])
            chunk = info.options.max_chunk_size if info.options else None
            with bucket_errors(bucket):
                self._ctx = oc.messages(max_messages=_window(chunk, GET_BUFFER_BYTES))
            self._left = oc.cached_info.num_pending or 0  # what is stored now: extra chunks count too
        if not self._left:
            with contextlib.suppress(errors.JetStreamError):
                self._finish()  # an empty object, or every chunk lost: the first read raises

    @property
    def info(self) -> ObjectInfo:
        return self._info

    def readable(self) -> bool:
        return True

    def _finish(self) -> None:
        """Stop the consumer and check size and digest (raises on mismatch)."""
        ctx, self._ctx = self._ctx, None
        if ctx is not None:
            ctx.stop()
        self._error = self._check()
        if self._error is not None:
            raise self._error

    def _check(self) -> Optional[errors.JetStreamError]:
        info = self._info
        if not info.digest and not info.size:
            return None  # nats.go checks no digest for an empty object either
        if self._received != info.size:
            return errors.DigestMismatchError(
                f"object {info.name!r}: read {self._received} bytes, its info says {info.size}",
                info.size, self._received,
            )  # fmt: skip
        try:
            expected = obj.decode_digest(info.digest)
        except errors.BadObjectMetaError as exc:
            return exc
        if expected != self._sha.digest():
            actual = obj.digest_value(self._sha)
            return errors.DigestMismatchError(
                f"object {info.name!r}: digest {actual} does not match {info.digest}", info.digest, actual
            )
        return None

    def _next_chunk(self) -> Optional[bytes]:
        """The next chunk, None at the (checked) end. Holds the lock."""
        if self._error is not None:
            raise self._error
        if self._ctx is None:
            return None
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                with bucket_errors(self._bucket):  # deleted under the read: say which bucket
                    msg: "Msg" = self._ctx.next(timeout=min(_PROBE_AFTER, max(deadline - time.monotonic(), 0.001)))
                break
            except errors.TimeoutError:
                self._probe()  # chunks stopped: deleted or replaced meanwhile?
                if time.monotonic() >= deadline:
                    raise self._js.connection.timed_out(f"no chunk of object {self._info.name!r} within {self._timeout}s") from None
            except errors.ConsumerStoppedError:
                if self.closed:
                    raise ValueError("I/O operation on closed ObjectResult") from None
                raise errors.ConnectionClosedError(  # ended under the reader: the client drains or closed
                    f"object {self._info.name!r}: the client was drained or closed before the read reached its end"
                ) from None
        data = msg.data
        self._left -= 1
        self._received += len(data)
        self._sha.update(data)
        if self._left <= 0 or self._received > self._info.size:
            self._finish()
        return data

    def _probe(self) -> None:
        """Raise at once if the object being read was deleted or replaced
        (its chunks are purged: they will never come)."""
        name = self._info.name
        gone: Optional[errors.JetStreamError] = None
        try:
            with bucket_errors(self._bucket):
                msg = self._js.get_msg(obj.stream_name(self._bucket), last_by_subject=obj.meta_subject(self._bucket, name))
            now = ObjectInfo.from_wire(json.loads(msg.data))
        except errors.MsgNotFoundError:
            now = None
        except errors.ObjectStoreNotFoundError as exc:  # the bucket itself was deleted: no chunk will come
            gone, now = exc, None
        except (errors.JetStreamError, ValueError):
            return  # cannot tell (server busy, bad meta): keep waiting within the bound
        if gone is not None:
            self._error = gone
        elif now is None or now.deleted:
            self._error = errors.ObjectDeletedError(404, 0, f"object {name!r} was deleted while being read")
        elif now.nuid != self._info.nuid:
            self._error = errors.ObjectChangedError(f"object {name!r} was replaced while being read; get() it again")
        else:
            return
        ctx, self._ctx = self._ctx, None
        if ctx is not None:
            ctx.stop()
        raise self._error

    def _take(self, limit: int) -> Optional[memoryview]:
        """Up to ``limit`` bytes of the current chunk (the next chunk once it
        is used up); None at the end. Holds the lock."""
        if self.closed:
            raise ValueError("I/O operation on closed ObjectResult")
        if not self._buf:
            chunk = self._next_chunk()
            if chunk is None:
                return None
            self._buf = memoryview(chunk)
        part, self._buf = self._buf[:limit], self._buf[limit:]
        return part

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        with self._lock:
            part = self._take(len(view))
            if part is None:
                return 0
            view[: len(part)] = part
            return len(part)

    def read(self, size: Optional[int] = -1) -> bytes:
        """Up to ``size`` bytes (fewer at a chunk's end); all that is left when
        ``size`` is -1 or None; b"" at the end."""
        if size is None or size < 0:
            return self.readall()
        with self._lock:
            part = self._take(size)
        return b"" if part is None else _as_bytes(part)

    def readall(self) -> bytes:
        return b"".join(self)

    def __iter__(self) -> "ObjectResult":
        return self

    def __next__(self) -> bytes:
        """The rest of the current chunk, or the next chunk."""
        with self._lock:
            part = self._take(sys.maxsize)
        if part is None:
            raise StopIteration
        return _as_bytes(part)

    def close(self) -> None:
        """Stop reading (the consumer is deleted); idempotent."""
        ctx, self._ctx = self._ctx, None
        if ctx is not None:
            ctx.stop()
        super().close()

    def __del__(self) -> None:
        # Dropped unclosed: the context stops itself without waiting (this may
        # run on any thread, even the loop's), unlike close().
        self._ctx = None


# -- watching ----------------------------------------------------------------------------------


class ObjectWatcher:
    """Object-info changes of a bucket, blocking: iterate it (ends after
    :meth:`stop`, callable from any thread) or call :meth:`next`. Yields
    :class:`ObjectInfo` and one ``None`` when the initial infos are through.
    Runs on an ordered consumer: in order, exactly once, across reconnects."""

    def __init__(
        self, js: JsApi, bucket: str, history: bool, ignore_deletes: bool, updates_only: bool, listing: bool = False
    ) -> None:
        options.object_watch(history, ignore_deletes, updates_only)
        policy = "new" if updates_only else "all" if history else "last_per_subject"
        self._ignore_deletes = ignore_deletes
        self._bucket = bucket
        self._ready: Deque[Optional[ObjectInfo]] = collections.deque()
        self._lock = threading.Lock()
        oc = OrderedConsumer(js, obj.stream_name(bucket), filter_subjects=[obj.all_meta(bucket)], deliver_policy=policy)
        with bucket_errors(bucket):
            self._ctx = oc.messages()
        self._marker_due = not updates_only
        # A listing reads until nothing is pending (no count-ended marker: see kv.initial_done).
        self._first_consumer = None if listing else oc.cached_info.name
        self._initial = int(oc.cached_info.num_pending or 0)
        if self._marker_due and not oc.cached_info.num_pending:
            self._marker_due = False
            self._ready.append(None)

    def next(self, timeout: Optional[float] = None) -> Optional[ObjectInfo]:
        """The next info or the initial-values marker ``None``; TimeoutError
        after ``timeout`` seconds (None: no limit), ConsumerStoppedError once stopped."""
        t = options.optional_timeout("timeout", timeout)
        deadline = None if t is None else time.monotonic() + t  # skipped messages use it up too
        # Another reader may hold the lock while it waits: waiting for it counts too.
        if not self._lock.acquire(timeout=-1 if t is None else t):
            raise errors.TimeoutError(f"no object info within {t:.3f}s (another thread is reading this watcher)")
        try:
            while not self._ready:
                left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                with bucket_errors(self._bucket):  # deleted under the watch: say which bucket
                    self._add(self._ctx.next(timeout=left))
            return self._ready.popleft()
        finally:
            self._lock.release()

    def updates(self, timeout: Optional[float] = 5.0) -> Optional[ObjectInfo]:
        """nats-py's name for :meth:`next` (its default timeout, 5 s)."""
        return self.next(timeout)

    def _add(self, msg: "Msg") -> None:
        try:
            info: Optional[ObjectInfo] = ObjectInfo.from_wire(json.loads(msg.data))
        except (ValueError, errors.BadObjectMetaError):
            info = None  # not ours to show (nats.go skips it too)
        if info is not None:
            info.mtime = msg.metadata.timestamp
            if not (self._ignore_deletes and info.deleted):
                self._ready.append(info)
        if self._marker_due and initial_done(msg, self._first_consumer, self._initial):
            self._marker_due = False
            self._ready.append(None)

    def __iter__(self) -> "ObjectWatcher":
        return self

    def __next__(self) -> Optional[ObjectInfo]:
        try:
            return self.next()
        except errors.ConsumerStoppedError:
            raise StopIteration from None

    def stop(self) -> None:
        """End the watch; iteration in any thread ends. Idempotent."""
        self._ctx.stop()

    def __enter__(self) -> "ObjectWatcher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
