"""Key-value buckets (ADR-8, per-key TTLs ADR-48): streams with conventions.

A bucket ``B`` is the stream ``KV_B`` on subjects ``$KV.B.>``; a key ``k`` is
the subject ``$KV.B.k`` and a revision is a stream sequence. Deletes and
purges are marker messages (``KV-Operation: DEL`` / ``PURGE``; a purge also
rolls the key's history up). Watches, keys and history read an
:class:`OrderedConsumer`, so they survive reconnects and lost consumers.

Thread safety: a :class:`KeyValue` handle holds no mutable state; any number
of threads may call any of its methods at once. A :class:`KeyWatcher` may be
read from several threads (each entry goes to one of them) and stopped from
any thread.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union, cast

from .. import errors, options
from .._core.jsapi import JsApi
from ..contexts import MessagesContext
from .._core.message import Msg
from ..models import (
    DeliverPolicy,
    Placement,
    RePublish,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamInfo,
)
from .._core.publish import check_line
from ..ordered import OrderedConsumer

__all__ = ["KeyValue", "KeyValueConfig", "KeyValueEntry", "KeyValueOp", "KeyValueStatus", "KeyWatcher"]

STREAM_PREFIX = "KV_"
KV_OPERATION = "KV-Operation"
MARKER_REASON = "Nats-Marker-Reason"  # server-placed markers (ADR-43/48)
ROLLUP = "Nats-Rollup"
MSG_TTL = "Nats-TTL"
DEFAULT_PURGE_DELETES_OLDER_THAN = 30 * 60.0  # seconds, as nats.go


class KeyValueOp(str, enum.Enum):
    """What an entry records: a value, a delete marker or a purge marker."""

    PUT = "PUT"
    DEL = "DEL"
    PURGE = "PURGE"


_BY_MARKER_REASON = {"MaxAge": KeyValueOp.PURGE, "Purge": KeyValueOp.PURGE, "Remove": KeyValueOp.DEL}


def operation_of(headers: Optional[Dict[str, str]]) -> KeyValueOp:
    """The operation a stored message stands for (ADR-8 header, or ADR-48 marker reason)."""
    if not headers:
        return KeyValueOp.PUT
    op = headers.get(KV_OPERATION)
    if op:
        return KeyValueOp.DEL if op == "DEL" else KeyValueOp.PURGE if op == "PURGE" else KeyValueOp.PUT
    return _BY_MARKER_REASON.get(headers.get(MARKER_REASON, ""), KeyValueOp.PUT)


@dataclasses.dataclass(frozen=True)
class KeyValueEntry:
    """One revision of a key. ``created`` is an aware UTC datetime; ``delta``
    is how many newer messages the watch had still to deliver (0 for the
    latest; None from get()); ``value`` is b"" for markers and meta-only watches."""

    bucket: str
    key: str
    value: bytes
    revision: int
    created: Optional[datetime.datetime]
    operation: KeyValueOp = KeyValueOp.PUT
    delta: Optional[int] = None


@dataclasses.dataclass
class KeyValueConfig:
    """A bucket's configuration. Durations are seconds; None means no limit.

    ``history`` (1-64, default 1) values are kept per key; ``ttl`` expires
    values that old; ``max_value_size`` / ``max_bytes`` cap one value / the
    bucket in bytes; ``storage`` is "file" (default) or "memory";
    ``compression`` stores with S2; ``limit_marker_ttl`` (>= 1 s, server
    2.11+) lets the server place markers when values expire, kept that long,
    and enables per-key TTLs (``create(ttl=)``, ``purge(ttl=)``).
    """

    bucket: str
    description: Optional[str] = None
    history: int = 1
    ttl: Optional[float] = None
    max_value_size: Optional[int] = None
    max_bytes: Optional[int] = None
    storage: Union[str, StorageType] = StorageType.FILE
    replicas: int = 1
    placement: Optional[Placement] = None
    republish: Optional[RePublish] = None
    compression: bool = False
    limit_marker_ttl: Optional[float] = None
    metadata: Optional[Dict[str, str]] = None


@dataclasses.dataclass(frozen=True)
class KeyValueStatus:
    """A bucket's state and configuration, from its stream info."""

    bucket: str
    stream_info: StreamInfo

    backing_store = "JetStream"

    @property
    def values(self) -> int:
        """Messages in the bucket, history and markers included."""
        return int(self.stream_info.state.messages or 0)

    @property
    def bytes(self) -> int:
        return int(self.stream_info.state.bytes or 0)

    @property
    def history(self) -> int:
        return int(self.stream_info.config.max_msgs_per_subject or 0)

    @property
    def ttl(self) -> Optional[float]:
        """Seconds values live (None: forever)."""
        return self.stream_info.config.max_age or None

    @property
    def limit_marker_ttl(self) -> Optional[float]:
        """Seconds server markers live (None: no markers)."""
        return self.stream_info.config.subject_delete_marker_ttl or None

    marker_ttl = limit_marker_ttl  # nats-py's name

    @property
    def is_compressed(self) -> bool:
        return self.stream_info.config.compression not in (None, StoreCompression.NONE, "none")

    @property
    def metadata(self) -> Dict[str, str]:
        return dict(self.stream_info.config.metadata or {})

    @property
    def config(self) -> KeyValueConfig:
        c = self.stream_info.config
        return KeyValueConfig(
            bucket=self.bucket,
            description=c.description,
            history=self.history,
            ttl=self.ttl,
            max_value_size=c.max_msg_size if c.max_msg_size and c.max_msg_size > 0 else None,
            max_bytes=c.max_bytes if c.max_bytes and c.max_bytes > 0 else None,
            storage=c.storage or StorageType.FILE,
            replicas=c.num_replicas or 1,
            # from_response built this module's classes for these
            placement=cast(Optional[Placement], c.placement),
            republish=cast(Optional[RePublish], c.republish),
            compression=self.is_compressed,
            limit_marker_ttl=self.limit_marker_ttl,
            metadata=c.metadata,
        )


# -- a bucket --------------------------------------------------------------------


class KeyValue:
    """A key-value bucket (see the module docstring for thread safety).

    Values are bytes (a str is encoded as UTF-8). Revisions are stream
    sequences: they grow across the whole bucket, not per key.
    """

    def __init__(self, js: JsApi, info: StreamInfo) -> None:
        name = info.config.name or ""
        self._js = js
        self.stream_name = name
        self.bucket = name[len(STREAM_PREFIX) :]
        self._pre = f"$KV.{self.bucket}."
        # Through an imported API (api_prefix, as nats.go) writes go through the
        # same import; a domain's $JS.<domain>.API leaves them as they are.
        api = js.api_prefix
        own_api = api == "$JS.API" or (api.startswith("$JS.") and api.endswith(".API"))
        self._put_pre = self._pre if own_api else f"{api}.{self._pre}"
        self._direct = bool(info.config.allow_direct)
        self._info = info

    def __repr__(self) -> str:
        return f"<KeyValue {self.bucket!r}>"

    @property
    def cached_info(self) -> StreamInfo:
        """The bucket's stream info from when the handle was made."""
        return self._info

    # -- reading ----------------------------------------------------------------

    def get(self, key: str, revision: Optional[int] = None) -> KeyValueEntry:
        """The latest value of ``key``, or revision ``revision`` of it.

        Raises KeyNotFoundError when there is none (also when ``revision``
        belongs to another key) and KeyDeletedError (a KeyNotFoundError)
        when that entry is a delete or purge marker. Uses a direct get when
        the bucket allows it (any replica answers; no read-after-write
        guarantee, as ADR-8 says).
        """
        subject = self._pre + self._key(key)
        seq = options.optional_size("revision", revision) if revision is not None else None
        try:
            stored = self._js.get_msg(
                self.stream_name, seq, None if seq is not None else subject, direct=bool(self._direct)
            )
        except errors.MsgNotFoundError as exc:
            raise errors.KeyNotFoundError(f"key {key!r} not found in bucket {self.bucket!r}") from exc
        except _GONE as exc:
            raise self._gone(exc) from exc
        if stored.subject != subject:
            other = stored.subject[len(self._pre) :] if stored.subject.startswith(self._pre) else stored.subject
            raise errors.KeyNotFoundError(f"revision {revision} is not of key {key!r} (it is of {other!r})")
        entry = KeyValueEntry(self.bucket, key, stored.data, stored.seq, stored.time, operation_of(stored.headers))
        if entry.operation is not KeyValueOp.PUT:
            raise errors.KeyDeletedError(f"key {key!r} was deleted ({entry.operation.value})", entry, entry.operation)
        return entry

    # -- writing ----------------------------------------------------------------

    def put(self, key: str, value: Union[bytes, str]) -> int:
        """Store ``value`` under ``key``; returns its revision."""
        return self._write(key, value, None, None)

    def _gone(self, exc: BaseException) -> BaseException:
        """The error for a bucket deleted under this handle (no stream, or
        nothing captures its subjects); JetStream being off stays what it is."""
        if isinstance(exc, (errors.JetStreamNotEnabledError, errors.BucketNotFoundError)):
            return exc
        return errors.BucketNotFoundError(404, errors.ErrorCode.STREAM_NOT_FOUND, f"bucket {self.bucket!r} not found ({exc})")

    def create(self, key: str, value: Union[bytes, str], *, ttl: Optional[float] = None) -> int:
        """Store ``value`` only if ``key`` has none (never put, or deleted or
        purged last); returns the revision, raises KeyExistsError otherwise.
        ``ttl`` (seconds, >= 1) removes the value after that long (needs a
        bucket with ``limit_marker_ttl``)."""
        headers = {MSG_TTL: self._ttl_header("ttl", ttl)} if ttl is not None else None
        try:
            return self._write(key, value, 0, headers)
        except errors.KeyWrongLastSequenceError as exc:
            first = exc
        try:
            self.get(key)
        except errors.KeyDeletedError as deleted:  # a marker: replace it, if it still is the latest
            try:
                return self._write(key, value, deleted.entry.revision, headers)
            except errors.KeyWrongLastSequenceError as exc:  # another creator won the race
                first = exc
        except errors.KeyNotFoundError:
            pass  # the marker expired meanwhile: someone else's value, or none, is there
        raise errors.KeyExistsError(first.code, first.err_code, f"key {key!r} exists: {first.description}") from first

    def update(self, key: str, value: Union[bytes, str], last: int) -> int:
        """Store ``value`` only if ``key``'s latest revision is ``last`` (0:
        only if the key never had one); returns the new revision, raises
        KeyWrongLastSequenceError otherwise."""
        return self._write(key, value, options.revision("last", last), None)

    def delete(self, key: str, *, last: Optional[int] = None) -> None:
        """Place a delete marker (history is kept); with ``last``, only if
        that is the key's latest revision (KeyWrongLastSequenceError otherwise)."""
        self._write(key, b"", _optional_revision(last), {KV_OPERATION: "DEL"})

    def purge(self, key: str, *, last: Optional[int] = None, ttl: Optional[float] = None) -> None:
        """Place a purge marker and remove the key's history; with ``last``,
        only if that is its latest revision; ``ttl`` (seconds, >= 1) removes
        the marker itself after that long (needs ``limit_marker_ttl``)."""
        headers = {KV_OPERATION: "PURGE", ROLLUP: "sub"}
        if ttl is not None:
            headers[MSG_TTL] = self._ttl_header("ttl", ttl)
        self._write(key, b"", _optional_revision(last), headers)

    def _key(self, key: Any) -> str:
        """``key`` checked, also that a write of it fits the protocol line
        (else put refused it as a long subject and get/history asked the server)."""
        options.kv_key(key)
        try:
            check_line(self._js.connection, self._put_pre + key)
        except errors.InvalidOptionError as exc:
            raise errors.InvalidKeyError(f"key is too long ({len(key)} characters): {exc}") from None
        return cast(str, key)

    def _check_size(self, key: str, value: Any, headers: Optional[Dict[str, str]]) -> None:
        """Refuse before sending a value over the bucket's max_value_size
        (the server counts headers too). The limit this handle saw may be
        stale: it is asked for afresh before refusing."""
        limit = self._info.config.max_msg_size if self._info.config is not None else None
        if not limit or limit < 0 or not isinstance(value, (bytes, bytearray, memoryview, str)):
            return  # other types: publish refuses them
        size = len(options.as_bytes(value)) if isinstance(value, str) else memoryview(value).nbytes
        size += len(options.header_block(headers)) if headers else 0
        if size <= limit:
            return
        limit = self._current_config().max_msg_size
        if limit and 0 < limit < size:
            raise errors.InvalidOptionError(
                f"value of key {key!r} is {size} bytes, over the max_value_size of bucket {self.bucket!r} ({limit})"
            )

    def _current_config(self) -> StreamConfig:
        """The bucket's configuration asked of the server now (this handle's may be stale)."""
        try:
            return self._js.stream_info(self.stream_name).config
        except _GONE as exc:
            raise self._gone(exc) from exc

    def _ttl_header(self, name: str, ttl: Any) -> str:
        """A per-key TTL; refused before sending when the bucket has no
        ``limit_marker_ttl`` (the server would answer 10166). This handle's
        copy of the config may predate turning it on: asked afresh before refusing."""
        value = options.msg_ttl(name, ttl)
        cfg = self._info.config
        if cfg is not None and not cfg.allow_msg_ttl and not self._current_config().allow_msg_ttl:
            raise errors.InvalidOptionError(
                f"{name}: bucket {self.bucket!r} has no limit_marker_ttl, so per-key TTLs are off"
                " (update_key_value(..., limit_marker_ttl=...) to turn them on)"
            )
        return value

    def _write(self, key: str, value: Union[bytes, str], last: Optional[int], headers: Optional[Dict[str, str]]) -> int:
        subject = self._put_pre + self._key(key)
        self._check_size(key, value, headers)
        try:
            return self._js.publish(subject, value, headers=headers, expected_last_subject_seq=last).seq
        except _GONE as exc:
            raise self._gone(exc) from exc
        except errors.APIError as exc:
            if exc.err_code in errors.WRONG_LAST_SEQUENCE_CODES:
                raise errors.KeyWrongLastSequenceError(exc.code, exc.err_code, exc.description) from exc
            raise

    # -- watching and listing ---------------------------------------------------

    def watch(
        self,
        keys: Union[str, Sequence[str]] = ">",
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: Optional[int] = None,
    ) -> "KeyWatcher":
        """Watch keys matching ``keys`` (a key, a wildcard pattern, or a list
        of them; ``>``: all). First the latest entry of every matching key
        (all history with ``include_history``; from revision
        ``resume_from_revision`` on when given), then one ``None`` marker,
        then every change as it happens. ``updates_only``: changes only, no
        marker. ``ignore_deletes`` skips delete/purge markers;
        ``meta_only`` leaves values empty."""
        filters = [keys] if isinstance(keys, str) else list(keys) if isinstance(keys, (list, tuple)) else None
        if not filters:
            raise errors.InvalidKeyError(f"keys must be a key pattern or a non-empty list of them, got {keys!r}")
        options.kv_watch(include_history, ignore_deletes, meta_only, updates_only, resume_from_revision)
        # The server refuses overlapping filters (10138): keep only those no other covers.
        try:
            patterns = options.disjoint_filters([options.kv_key(k, wildcards=True) for k in filters], "key patterns")
        except errors.InvalidKeyError:
            raise
        except errors.InvalidOptionError as exc:
            raise errors.InvalidKeyError(str(exc)) from None
        subjects = [self._pre + k for k in patterns]
        if resume_from_revision is not None:
            policy, start = DeliverPolicy.BY_START_SEQUENCE, options.revision("resume_from_revision", resume_from_revision, 1)
        else:
            policy = DeliverPolicy.NEW if updates_only else DeliverPolicy.ALL if include_history else DeliverPolicy.LAST_PER_SUBJECT
            start = None
        oc = OrderedConsumer(self._js, self.stream_name, filter_subjects=subjects, deliver_policy=policy,
                             opt_start_seq=start, headers_only=meta_only)  # fmt: skip
        try:
            ctx = oc.messages()
        except _GONE as exc:
            raise self._gone(exc) from exc
        pending = None if updates_only else int(oc.cached_info.num_pending or 0)
        return KeyWatcher(self.bucket, self._pre, ctx, pending, ignore_deletes, oc.cached_info.name)

    def watch_all(self, **opts: Any) -> "KeyWatcher":
        """:meth:`watch` of every key."""
        return self.watch(">", **opts)

    watchall = watch_all  # nats-py's name

    def keys(self, filters: Union[str, Sequence[str], None] = None) -> List[str]:
        """The keys that have a value now (sorted; [] when none), optionally
        only those matching ``filters`` (key patterns, as :meth:`watch`). A
        key rewritten while the listing runs may be left out (the server
        skips values superseded meanwhile)."""
        if filters is not None and not isinstance(filters, str) and isinstance(filters, (list, tuple)) and not filters:
            return []  # no pattern matches nothing
        found = {e.key for e in self._initial(">" if filters is None else filters, ignore_deletes=True, meta_only=True)}
        return sorted(found)

    def history(self, key: str) -> List[KeyValueEntry]:
        """Every kept entry of ``key``, oldest first, markers included;
        KeyNotFoundError when there is none."""
        entries = self._initial(self._key(key), include_history=True)
        if not entries:
            raise errors.KeyNotFoundError(f"no history for key {key!r} in bucket {self.bucket!r}")
        return entries

    def _initial(self, keys: Union[str, Sequence[str]], **opts: Any) -> List[KeyValueEntry]:
        """The entries a watch delivers before its marker; each wait is bounded
        by the JetStream timeout."""
        out: List[KeyValueEntry] = []
        with self.watch(keys, **opts) as watcher:
            # A listing reads until nothing is pending: a count-ended marker
            # would leave out keys rewritten (and so skipped) meanwhile.
            watcher._first_consumer = None
            while True:
                entry = watcher.next(timeout=self._js.timeout)
                if entry is None:
                    return out
                out.append(entry)

    def purge_deletes(self, older_than: float = DEFAULT_PURGE_DELETES_OLDER_THAN) -> int:
        """Remove the keys whose latest entry is a delete or purge marker,
        keeping the marker itself while it is younger than ``older_than``
        seconds (default 30 minutes; <= 0, e.g. nats.go's -1: remove all
        markers too; it must be finite). Returns how many keys were cleaned."""
        older_than = options.duration("older_than", older_than, allow_zero=True, allow_negative=True)
        markers = [e for e in self._initial(">") if e.operation is not KeyValueOp.PUT]
        now = datetime.datetime.now(datetime.timezone.utc)
        for entry in markers:
            young = older_than > 0 and entry.created is not None and (now - entry.created).total_seconds() < older_than
            # Bounded by the marker's revision, not "all" / "keep 1": a value
            # put after the listing must survive, and a young marker with it.
            upto = entry.revision if young else entry.revision + 1
            self._js.purge_stream(self.stream_name, subject=self._pre + entry.key, seq=upto)
        return len(markers)

    def status(self) -> KeyValueStatus:
        """The bucket's state and configuration, asked of the server now."""
        try:
            return KeyValueStatus(self.bucket, self._js.stream_info(self.stream_name))
        except _GONE as exc:
            raise self._gone(exc) from exc


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


# A deleted bucket shows as a missing stream, or as nobody answering its subjects.
_GONE = (errors.StreamNotFoundError, errors.NoRespondersError)


def _optional_revision(value: Any) -> Optional[int]:
    """``last=`` of delete/purge: None or 0 mean "whatever the latest is"."""
    return None if value is None or options.revision("last", value) == 0 else value


# -- watching ----------------------------------------------------------------------


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
        came (the watcher stays usable) and ConsumerStoppedError once stopped."""
        t = options.optional_timeout("timeout", timeout)
        # One deadline for the call: skipped deletes must not restart the wait.
        deadline = None if t is None else time.monotonic() + t
        while True:
            if self._take_marker():
                return None
            try:
                msg = self._ctx.next(None if deadline is None else max(deadline - time.monotonic(), 0.0))
            except errors.StreamNotFoundError as exc:  # the bucket was deleted under the watch
                if isinstance(exc, errors.BucketNotFoundError):
                    raise
                raise errors.BucketNotFoundError(404, exc.err_code, f"bucket {self.bucket!r} was deleted ({exc})") from exc
            entry = self._entry(msg)
            self._count(msg)
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
        if not self._in_initial or not initial_done(msg, self._first_consumer, self._initial):
            return  # read without the lock: it only ever turns False
        with self._lock:
            if self._in_initial:
                self._in_initial = False
                self._marker_due = True

    def _entry(self, msg: Msg) -> Optional[KeyValueEntry]:
        op = operation_of(msg.headers)
        if self._ignore_deletes and op is not KeyValueOp.PUT:
            return None
        meta = msg.metadata
        return KeyValueEntry(
            self.bucket, msg.subject[len(self._pre) :], msg.data, meta.sequence.stream, meta.timestamp, op, meta.num_pending
        )

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
