"""A key-value watch (ADR-8): the blocking iterator over a bucket's entries
that :meth:`KeyValue.watch` returns, and when its initial values end."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator, Optional

from .. import errors, options
from .._core.message import Msg
from ..contexts import MessagesContext
from .codecs import AS_STORED, Codecs
from ..models import ConsumerInfo
from .model import KeyValueEntry, KeyValueOp, operation_of

__all__ = ["KeyWatcher", "initial_done"]

# While initial entries are due and none comes for this long, ask the server
# whether any is still to come: one purged meanwhile (another client's purge
# or purge_deletes) never comes, and the marker would never be due.
PROBE_AFTER = 1.0


def initial_done(msg: Msg, first_consumer: Optional[str], initial: int) -> bool:
    """Whether ``msg`` ends a watch's initial values: nothing is pending after
    it (ADR-8), or it is the ``initial``-th delivery of the first server
    consumer, as nats.go counts. That consumer delivers in stream order, so
    its Nth message is at or past the last initial one; under steady writes
    nothing-pending may never come. A consumer made by a reset starts by
    sequence and also delivers superseded revisions: its count says nothing."""
    meta = msg.metadata
    if not meta.num_pending:
        return True
    return first_consumer is not None and meta.consumer == first_consumer and meta.sequence.consumer >= initial


class KeyWatcher:
    """The entries of a watch, in revision order: a blocking iterator.

    Yields :class:`KeyValueEntry` items and, once, ``None`` when the initial
    entries are all out (at once when there were none; never with
    ``updates_only``). Iteration goes on until :meth:`stop`, which any
    thread may call and which ends iteration in every thread blocked on it.
    Leaving ``with kv.watch(...) as w:`` stops it. Several threads may read
    it; each entry goes to one of them.
    """

    def __init__(
        self,
        bucket: str,
        pre: str,
        ctx: MessagesContext,
        pending: Optional[int],
        ignore_deletes: bool,
        first_consumer: Optional[str] = None,
        codecs: Codecs = AS_STORED,
        meta_only: bool = False,
        probe: Optional[Callable[[], ConsumerInfo]] = None,
    ) -> None:
        self.bucket = bucket
        self._pre = pre
        self._ctx = ctx
        self._ignore_deletes = ignore_deletes
        self._lock = threading.Lock()  # the marker bookkeeping below, shared by readers
        self._in_initial = bool(pending)  # initial entries still to come
        self._marker_due = pending == 0  # none to come: the marker first
        self._initial = pending or 0
        self._first_consumer = first_consumer  # the server consumer the initial pending was counted on
        self._codecs = codecs
        self._decode_values = not meta_only  # a meta-only watch has no values to decode
        self._probe = probe  # the info of the server consumer now delivering (its pending count)
        self._last_seq = 0  # the stream sequence of the last entry taken

    def __repr__(self) -> str:
        return f"<KeyWatcher {self.bucket!r}>"

    def __iter__(self) -> Iterator[Optional[KeyValueEntry]]:
        return self

    def __next__(self) -> Optional[KeyValueEntry]:
        try:
            return self.next(None)
        except errors.ConsumerStoppedError:
            raise StopIteration from None

    def next(self, timeout: Optional[float] = None) -> Optional[KeyValueEntry]:
        """The next entry (or the ``None`` marker), waiting up to ``timeout``
        seconds (None: no limit). Raises :class:`TimeoutError` when nothing
        came (the watcher stays usable) and ConsumerStoppedError once stopped;
        KeyValueCodecError for an entry the handle's codecs cannot decode
        (that entry is skipped; the watcher stays usable)."""
        t = options.optional_timeout("timeout", timeout)
        # One deadline for the call: skipped deletes must not restart the wait.
        deadline = None if t is None else time.monotonic() + t
        while True:
            if self._take_marker():
                return None
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            probing = self._in_initial and self._probe is not None and (left is None or left > PROBE_AFTER)
            try:
                msg = self._ctx.next(PROBE_AFTER if probing else left)
            except errors.TimeoutError:
                if probing and self._nothing_more_to_come():
                    self._end_initial()
                    continue
                if probing:
                    continue
                raise
            except errors.BucketNotFoundError:
                raise
            except errors.StreamNotFoundError as exc:  # the bucket was deleted under the watch
                raise self._deleted(exc) from exc
            self._count(msg)  # before decoding: an entry that fails to decode still counts
            entry = self._entry(msg)
            if entry is not None:
                return entry  # an ignored entry: the loop sends a marker it made due

    def updates(self, timeout: Optional[float] = 5.0) -> Optional[KeyValueEntry]:
        """nats-py's name for :meth:`next` (its default timeout, 5 s)."""
        return self.next(timeout)

    def _take_marker(self) -> bool:
        with self._lock:
            due, self._marker_due = self._marker_due, False
            return due

    def _count(self, msg: Msg) -> None:
        """Set the marker due after the last initial entry (see initial_done)."""
        self._last_seq = msg.metadata.sequence.stream
        if not self._in_initial or not initial_done(msg, self._first_consumer, self._initial):
            return  # read without the lock: it only ever turns False
        self._end_initial()

    def _deleted(self, exc: errors.StreamNotFoundError) -> errors.BucketNotFoundError:
        return errors.BucketNotFoundError(404, exc.err_code, f"bucket {self.bucket!r} was deleted ({exc})")

    def _end_initial(self) -> None:
        with self._lock:
            if self._in_initial:
                self._in_initial = False
                self._marker_due = True

    def _nothing_more_to_come(self) -> bool:
        """The server has nothing pending for the watch and every entry it
        delivered was taken: the initial entries still due were purged."""
        assert self._probe is not None
        try:
            info = self._probe()
        except errors.BucketNotFoundError:
            raise
        except errors.StreamNotFoundError as exc:
            raise self._deleted(exc) from exc
        except errors.JetStreamError:
            return False  # the ordered consumer is being reset: its next messages will say
        delivered = info.delivered.stream_seq if info.delivered is not None else 0
        return not info.num_pending and delivered <= self._last_seq

    def _entry(self, msg: Msg) -> Optional[KeyValueEntry]:
        op = operation_of(msg.headers)
        if self._ignore_deletes and op is not KeyValueOp.PUT:
            return None
        meta = msg.metadata
        key = self._codecs.decode_key(msg.subject[len(self._pre) :])
        value = self._codecs.decode_value(msg.data) if op is KeyValueOp.PUT and self._decode_values else msg.data
        return KeyValueEntry(self.bucket, key, value, meta.sequence.stream, meta.timestamp, op, meta.num_pending)

    def stop(self) -> None:
        """End the watch now; idempotent, from any thread."""
        self._ctx.stop()

    @property
    def closed(self) -> bool:
        return self._ctx.closed

    def __enter__(self) -> "KeyWatcher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
