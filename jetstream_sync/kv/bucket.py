"""Key-value buckets (ADR-8, per-key TTLs ADR-48): streams with conventions.

A bucket ``B`` is the stream ``KV_B`` on subjects ``$KV.B.>``; a key ``k`` is
the subject ``$KV.B.k`` and a revision is a stream sequence. Deletes and
purges are marker messages (``KV-Operation: DEL`` / ``PURGE``; a purge also
rolls the key's history up). Watches, keys and history read an
:class:`OrderedConsumer`, so they survive reconnects and lost consumers.

A handle may carry codecs (ADR-54, ``codecs.py``): keys and values are
encoded before anything is sent and decoded when read. A handle on a bucket
that mirrors another reads the origin's keys from the mirror and writes
them to the origin (as nats.go: a mirror stores the origin's subjects).

Thread safety: a :class:`KeyValue` handle holds no mutable state; any number
of threads may call any of its methods at once. A :class:`KeyWatcher` may be
read from several threads (each entry goes to one of them) and stopped from
any thread.
"""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Optional, Sequence, Union, cast

from .. import errors, options
from .._core.jsapi import JsApi
from ..models import DeliverPolicy, StreamConfig, StreamInfo
from .._core.publish import check_line
from ..ordered import OrderedConsumer
from .codecs import AS_STORED, Codecs
from .model import (
    KV_OPERATION,
    STREAM_PREFIX,
    KeyValueConfig,
    KeyValueEntry,
    KeyValueOp,
    KeyValueStatus,
    operation_of,
)
from .watch import KeyWatcher, initial_done

__all__ = ["KeyValue", "KeyValueConfig", "KeyValueEntry", "KeyValueOp", "KeyValueStatus", "KeyWatcher", "initial_done"]

ROLLUP = "Nats-Rollup"
MSG_TTL = "Nats-TTL"
DEFAULT_PURGE_DELETES_OLDER_THAN = 30 * 60.0  # seconds, as nats.go


# -- a bucket --------------------------------------------------------------------


class KeyValue:
    """A key-value bucket (see the module docstring for thread safety).

    Values are bytes (a str is encoded as UTF-8). Revisions are stream
    sequences: they grow across the whole bucket, not per key.
    """

    def __init__(self, js: JsApi, info: StreamInfo, codecs: Codecs = AS_STORED) -> None:
        name = info.config.name or ""
        self._js = js
        self.stream_name = name
        self.bucket = name[len(STREAM_PREFIX) :]
        mirror = info.config.mirror
        #: The bucket this one mirrors (None: not a mirror); its keys are read here, written there.
        self.mirror_of: Optional[str] = None
        external = None
        if mirror is not None and mirror.name:
            self.mirror_of = mirror.name[len(STREAM_PREFIX) :] if mirror.name.startswith(STREAM_PREFIX) else mirror.name
            external = mirror.external.api if mirror.external is not None and mirror.external.api else None
        self._pre = f"$KV.{self.mirror_of or self.bucket}."
        # Through an imported API (api_prefix, as nats.go) writes go through the
        # same import; a domain's $JS.<domain>.API leaves them as they are. A
        # mirror of another domain's bucket writes through that domain's API.
        api = js.api_prefix
        own_api = api == "$JS.API" or (api.startswith("$JS.") and api.endswith(".API"))
        self._put_pre = f"{external}.{self._pre}" if external else self._pre if own_api else f"{api}.{self._pre}"
        self._direct = bool(info.config.allow_direct)
        self._info = info
        self._codecs = codecs

    def with_codecs(self, key_codec: Any = None, value_codec: Any = None) -> "KeyValue":
        """A handle on the same bucket that encodes keys with ``key_codec``
        and values with ``value_codec`` (see :mod:`jetstream_sync.kv.codecs`;
        None, the default: as stored). Checked here, nothing is sent."""
        return KeyValue(self._js, self._info, Codecs.checked(key_codec, value_codec))

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
        op = operation_of(stored.headers)
        if op is not KeyValueOp.PUT:
            entry = KeyValueEntry(self.bucket, key, stored.data, stored.seq, stored.time, op)
            raise errors.KeyDeletedError(f"key {key!r} was deleted ({op.value})", entry, op)
        return KeyValueEntry(self.bucket, key, self._codecs.decode_value(stored.data), stored.seq, stored.time, op)

    # -- writing ----------------------------------------------------------------

    def put(self, key: str, value: Union[bytes, str]) -> int:
        """Store ``value`` under ``key``; returns its revision."""
        return self._write(key, self._codecs.encode_value(value), None, None)

    def _gone(self, exc: errors.JetStreamError) -> BaseException:
        """The error for one of ``_GONE``: BucketNotFoundError once the server
        says the bucket's stream does not exist, else NoRespondersError (a
        restart, a leader moving); JetStream being off stays what it is."""
        if isinstance(exc, (errors.JetStreamNotEnabledError, errors.BucketNotFoundError)):
            return exc
        found = self._js.confirm_missing(self.stream_name, exc, f"bucket {self.bucket!r}")
        if isinstance(found, errors.StreamNotFoundError):
            return errors.BucketNotFoundError(found.code, found.err_code, f"bucket {self.bucket!r} not found ({found})")
        return found

    def create(self, key: str, value: Union[bytes, str], *, ttl: Optional[float] = None) -> int:
        """Store ``value`` only if ``key`` has none (never put, or deleted or
        purged last); returns the revision, raises KeyExistsError otherwise.
        ``ttl`` (seconds, >= 1) removes the value after that long (needs a
        bucket with ``limit_marker_ttl``)."""
        headers = {MSG_TTL: self._ttl_header("ttl", ttl)} if ttl is not None else None
        value = self._codecs.encode_value(value)
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
        return self._write(key, self._codecs.encode_value(value), options.revision("last", last), None)

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
        """``key`` encoded and checked, also that a write of it fits the protocol
        line (else put refused it as a long subject and get/history asked the server)."""
        if self._codecs.key is not None:
            if not isinstance(key, str):
                raise errors.InvalidKeyError(f"key must be a str, got {key!r}")
            encoded = self._codecs.encode_key(key)
            try:
                options.kv_key(encoded)
            except errors.InvalidKeyError as exc:
                raise errors.InvalidKeyError(f"key {key!r} encodes to an invalid key: {exc}") from None
            key = encoded
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
        """Publish ``value`` (already encoded) under ``key`` (not yet)."""
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
        return self._watch(self._patterns(keys), self._codecs, include_history=include_history,
                           ignore_deletes=ignore_deletes, meta_only=meta_only, updates_only=updates_only,
                           resume_from_revision=resume_from_revision)  # fmt: skip

    def _patterns(self, keys: Any) -> List[str]:
        """Key patterns encoded with the key codec and checked."""
        filters = [keys] if isinstance(keys, str) else list(keys) if isinstance(keys, (list, tuple)) else None
        if not filters or not all(isinstance(k, str) for k in filters):
            raise errors.InvalidKeyError(f"keys must be a key pattern or a non-empty list of them, got {keys!r}")
        return [options.kv_key(self._codecs.encode_filter(k), wildcards=True) for k in filters]

    def _watch(
        self, encoded: List[str], codecs: Codecs, *, include_history: bool = False, ignore_deletes: bool = False,
        meta_only: bool = False, updates_only: bool = False, resume_from_revision: Optional[int] = None,
        listing: bool = False,
    ) -> KeyWatcher:  # fmt: skip
        """A watch of the stored key patterns ``encoded``, decoding with ``codecs``.
        A ``listing`` reads until nothing is pending (a count-ended marker
        would leave out keys rewritten, and so skipped, meanwhile)."""
        options.kv_watch(include_history, ignore_deletes, meta_only, updates_only, resume_from_revision)
        # The server refuses overlapping filters (10138): keep only those no other covers.
        try:
            patterns = options.disjoint_filters(encoded, "key patterns")
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
        # The initial values now, as the watch starts: a value superseded before
        # the first pull, once the history limit removed it, would hold up the
        # server's last-per-subject delivery (nats-server 2.15 delivers nothing).
        ctx.prefetch()
        pending = None if updates_only else int(oc.cached_info.num_pending or 0)
        first = None if listing else oc.cached_info.name
        return KeyWatcher(self.bucket, self._pre, ctx, pending, ignore_deletes, first, codecs, meta_only, oc.info)

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
        patterns = [">"] if filters is None else self._patterns(filters)
        found = {e.key for e in self._initial(patterns, self._codecs, ignore_deletes=True, meta_only=True)}
        return sorted(found)

    def history(self, key: str) -> List[KeyValueEntry]:
        """Every kept entry of ``key``, oldest first, markers included;
        KeyNotFoundError when there is none."""
        entries = self._initial([self._key(key)], self._codecs, include_history=True)
        if not entries:
            raise errors.KeyNotFoundError(f"no history for key {key!r} in bucket {self.bucket!r}")
        return entries

    def _initial(self, encoded: List[str], codecs: Codecs, **opts: Any) -> List[KeyValueEntry]:
        """The entries a watch of the stored patterns ``encoded`` delivers
        before its marker; each wait is bounded by the JetStream timeout."""
        out: List[KeyValueEntry] = []
        with self._watch(encoded, codecs, listing=True, **opts) as watcher:
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
        markers = [e for e in self._initial([">"], AS_STORED) if e.operation is not KeyValueOp.PUT]  # stored keys
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


# A deleted bucket shows as a missing stream, or as nobody answering its
# subjects; the latter also while its server restarts (``_gone`` tells).
_GONE = (errors.StreamNotFoundError, errors.NoRespondersError)


def _optional_revision(value: Any) -> Optional[int]:
    """``last=`` of delete/purge: None or 0 mean "whatever the latest is"."""
    return None if value is None or options.revision("last", value) == 0 else value


