"""Object store (ADR-20): large objects in chunks on a stream, blocking API.

A bucket is the stream ``OBJ_<bucket>``. An object's bytes are messages on
``$O.<bucket>.C.<nuid>`` (128 KiB chunks by default) and its info one JSON
message on ``$O.<bucket>.M.<base64url name>``, rolled up so only the latest
stays. Memory stays bounded either way: ``put`` reads and publishes a chunk
at a time with a bounded window of unacknowledged chunks, and ``get``
returns an :class:`ObjectResult` that pulls chunks through an ordered
consumer a few at a time and checks size and SHA-256 digest at the end.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import datetime
import hashlib
import json
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Tuple


from . import model as obj
from .. import errors, options
from .._core.jsapi import JsApi
from .._core.nuid import next_nuid
from .model import (
    ObjectInfo,
    ObjectLink,
    ObjectMeta,
    ObjectMetaOptions,
    ObjectStoreConfig,
    ObjectStoreStatus,
    Source,
    bucket_errors,
)
from .read import DEFAULT_CHUNK_TIMEOUT, ObjectResult, ObjectWatcher

__all__ = [
    "ObjectStore",
    "ObjectResult",
    "ObjectWatcher",
    "ObjectInfo",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectLink",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
]

PUT_WINDOW_BYTES = 8 * 1024 * 1024  # unacknowledged chunk bytes a put keeps in flight
_ROLLUP = {"Nats-Rollup": "sub"}
_INFO_RACES = 64  # writers that may get in between before an info write gives up
# Failures of an info write after which it surely was not stored.
_REFUSED = (errors.APIError, errors.NoRespondersError, errors.PermissionDeniedError, errors.InvalidOptionError,
            errors.ObjectChangedError)  # fmt: skip


def _claim(bucket: str, name: str, current: Optional[ObjectInfo], info: ObjectInfo, links_too: bool) -> ObjectInfo:
    """``info`` to write over ``current``, unless that is a live object (or
    link, when ``links_too``): ObjectAlreadyExistsError."""
    if current is not None and not current.deleted and (links_too or not current.is_link):
        raise errors.ObjectAlreadyExistsError(f"object {name!r} already exists in bucket {bucket!r}")
    return info


# -- managing buckets (JetStream's object-store methods delegate here) -----------------------


def upsert(js: JsApi, config: ObjectStoreConfig, action: str) -> "ObjectStore":
    """Create (``action`` "create"), update ("update") or either ("") a bucket."""
    scfg = config.stream_config()  # validates everything first
    bucket = config.bucket
    with bucket_errors(bucket):
        if action == "update":
            stream = js.update_stream(scfg)
        elif action == "create":
            try:
                stream = js.create_stream(scfg)
            except errors.APIError as exc:
                if exc.err_code != errors.ErrorCode.STREAM_NAME_IN_USE:
                    raise
                raise errors.ObjectStoreExistsError(
                    exc.code, exc.err_code, f"object store {bucket!r} exists with another configuration"
                ) from exc
        else:
            try:
                stream = js.update_stream(scfg)
            except errors.StreamNotFoundError:
                stream = js.create_stream(scfg)
    return ObjectStore(js, bucket, stream)


def bind(js: JsApi, bucket: str) -> "ObjectStore":
    """A handle on an existing bucket; ObjectStoreNotFoundError otherwise."""
    options.object_store_name(bucket)
    with bucket_errors(bucket):
        return ObjectStore(js, bucket, js.stream_info(obj.stream_name(bucket)))


def delete(js: JsApi, bucket: str) -> None:
    options.object_store_name(bucket)
    with bucket_errors(bucket):
        js.delete_stream(obj.stream_name(bucket))


def statuses(js: JsApi) -> List[ObjectStoreStatus]:
    """Every bucket's status (streams named OBJ_… holding chunk subjects)."""
    prefix = obj.STREAM_PREFIX
    return [
        ObjectStoreStatus.from_stream_info(name[len(prefix):], info)
        for info in js.streams(subject=obj.all_chunks("*"))
        if (name := info.config.name or "").startswith(prefix)
    ]


def names(js: JsApi) -> List[str]:
    prefix = obj.STREAM_PREFIX
    return [n[len(prefix):] for n in js.stream_names(subject=obj.all_chunks("*")) if n.startswith(prefix)]


# -- a bucket ---------------------------------------------------------------------------------


class ObjectStore:
    """One bucket. Thread-safe: every method may be called from any thread."""

    def __init__(self, js: JsApi, bucket: str, info: Any) -> None:
        self._js = js
        self.bucket = bucket
        self.stream_name = obj.stream_name(bucket)
        self._stream_info = info

    def __repr__(self) -> str:
        return f"<ObjectStore {self.bucket!r}>"

    @property
    def name(self) -> str:
        return self.bucket

    # -- writing ------------------------------------------------------------------------

    def put(
        self,
        name: str,
        data: Source = b"",
        meta: Optional[ObjectMeta] = None,
        *,
        description: Optional[str] = None,
        headers: Optional[Dict[str, Any]] = None,
        metadata: Optional[Dict[str, str]] = None,
        chunk_size: Optional[int] = None,
    ) -> ObjectInfo:
        """Store ``data`` (bytes, str as UTF-8, or a file-like object with
        ``read(n)``, read to its end) as object ``name``, replacing any object
        of that name once the new one is complete.

        ``meta`` gives description/headers/metadata/chunk size at once; the
        keywords override it. ``chunk_size`` is bytes per message (default
        128 KiB, at most the server's max_payload). Memory use is bounded by
        the window of unacknowledged chunks (8 MiB), not by the object's size.
        On failure the chunks already stored are purged, except when the
        info was sent and its fate is unknown (no acknowledgement): if it was
        stored after all the put succeeded and returns; if that cannot be
        told, the put raises and the chunks stay, so that an info stored late
        still reads back whole.
        """
        info = self._new_info(name, meta, description, headers, metadata, chunk_size)
        assert info.options is not None and info.options.max_chunk_size is not None  # _new_info sets it
        size = info.options.max_chunk_size
        chunks = obj.chunks_of(data, size)  # refuses other types before anything is sent
        subject = obj.chunk_subject(self.bucket, info.nuid)
        try:
            info.size, info.chunks, info.digest = self._send_chunks(subject, chunks, size)
        except BaseException:
            self._purge_quietly(subject)  # no info names these chunks
            raise
        replaced: List[Optional[ObjectInfo]] = [None]

        def replace(current: Optional[ObjectInfo]) -> ObjectInfo:
            replaced[0] = current
            return info

        try:
            self._write_info(info.name, replace)
        except _REFUSED:
            self._purge_quietly(subject)  # the info was not stored
            raise
        except BaseException:
            # A lost ack: purging now could leave the name pointing at no chunks.
            if not self._info_landed(info):
                raise
            info.mtime = datetime.datetime.now(datetime.timezone.utc)
        self._purge_chunks_of(replaced[0])
        return info

    def _new_info(
        self, name: str, meta: Optional[ObjectMeta], description: Any, headers: Any, metadata: Any, chunk_size: Any
    ) -> ObjectInfo:
        """The info of a put, every argument checked."""
        obj.check_object_name(self.bucket, name)
        if meta is not None:
            options.instance("meta", meta, ObjectMeta)
        base = meta or ObjectMeta()
        options.meta_name(base.name, name)
        if base.options is not None and base.options.link is not None:
            raise errors.ObjectLinkError("put() cannot store a link: use add_link() or add_bucket_link()")
        if chunk_size is None:
            chunk_size = (base.options.max_chunk_size if base.options else None) or obj.DEFAULT_CHUNK_SIZE
        return ObjectInfo(
            name=name,
            description=options.optional_text("description", base.description if description is None else description),
            headers=options.object_headers(base.headers if headers is None else headers),
            metadata=options.string_map("metadata", base.metadata if metadata is None else metadata),
            options=ObjectMetaOptions(max_chunk_size=options.chunk_size(chunk_size, self._js.connection.max_payload)),
            bucket=self.bucket,
            nuid=next_nuid(),
        )

    def _send_chunks(self, subject: str, chunks: Iterator[bytes], chunk_size: int) -> Tuple[int, int, str]:
        """Publish every chunk with at most a window of them unacknowledged;
        returns (size, chunks, digest). Raises the first failed publish."""
        js, sha = self._js, hashlib.sha256()
        window: Deque["concurrent.futures.Future[Any]"] = collections.deque()
        limit = max(1, min(obj.MAX_WINDOW, PUT_WINDOW_BYTES // chunk_size))
        count = total = 0
        try:
            for chunk in chunks:
                sha.update(chunk)
                window.append(js.publish_async(subject, chunk))
                count += 1
                total += len(chunk)
                if len(window) >= limit:
                    self._settle(window.popleft())
            while window:
                self._settle(window.popleft())
        finally:
            for future in window:  # a failure: let the rest land before the purge
                with contextlib.suppress(Exception):
                    future.exception(js.timeout + 1.0)
        return total, count, obj.digest_value(sha)

    def _settle(self, future: "concurrent.futures.Future[Any]") -> None:
        try:
            future.result(self._js.timeout + 1.0)  # its own deadline fails it first
        except concurrent.futures.TimeoutError:
            raise self._js.connection.timed_out(f"no acknowledgement for a chunk of bucket {self.bucket!r}") from None

    def _publish_info(self, info: ObjectInfo, last: int) -> None:
        """Write ``info`` as the latest (rolled-up) info of its name if the
        stored one is still at sequence ``last`` (0: none); mtime is now."""
        body = json.dumps(info.to_wire(), separators=(",", ":")).encode()
        with bucket_errors(self.bucket):
            self._js.publish(obj.meta_subject(self.bucket, info.name), body, headers=_ROLLUP,
                             expected_last_subject_seq=last)  # fmt: skip
        info.mtime = datetime.datetime.now(datetime.timezone.utc)

    def _write_info(self, name: str, make: Callable[[Optional[ObjectInfo]], Optional[ObjectInfo]]) -> Optional[ObjectInfo]:
        """Replace the stored info of ``name`` by ``make(stored)`` (None: write
        nothing), as a compare-and-set: a writer that got in between makes it
        read and try again, so what it replaced (returned) is known exactly
        and its chunks can be purged; a blind write left them behind for good."""
        for _ in range(_INFO_RACES):
            current, seq = self._stored_or_none(name)
            info = make(current)
            if info is None:
                return current
            try:
                self._publish_info(info, seq)
            except errors.APIError as exc:
                if exc.err_code not in errors.WRONG_LAST_SEQUENCE_CODES:
                    raise
                continue
            return current
        raise errors.ObjectChangedError(f"object {name!r} in bucket {self.bucket!r} kept changing; try again")

    def _purge_chunks_of(self, replaced: Optional[ObjectInfo], quietly: bool = True) -> None:
        """Purge the chunks of an info that was just replaced (``quietly``: best effort)."""
        if replaced is not None and not replaced.deleted and not replaced.is_link and replaced.nuid:
            subject = obj.chunk_subject(self.bucket, replaced.nuid)
            if quietly:
                self._purge_quietly(subject)
            else:
                self._purge(subject)

    def _info_landed(self, info: ObjectInfo) -> bool:
        """Whether ``info`` is the stored info of its name now (False when that cannot be told)."""
        try:
            return self.get_info(info.name, show_deleted=True).nuid == info.nuid
        except Exception:
            return False

    def _purge(self, subject: str) -> None:
        with bucket_errors(self.bucket):
            self._js.purge_stream(self.stream_name, subject=subject)

    def _purge_quietly(self, subject: str) -> None:
        """Best effort (the bucket may be sealed or gone); the object is already written or failed."""
        with contextlib.suppress(Exception):
            self._purge(subject)

    def delete(self, name: str) -> None:
        """Delete object ``name``: a delete marker replaces its info and its
        chunks are purged. ObjectNotFoundError if it never existed; deleting
        a deleted object does nothing."""
        obj.check_object_name(self.bucket, name)

        def mark(current: Optional[ObjectInfo]) -> Optional[ObjectInfo]:
            if current is None:
                raise self._not_found(name)
            if current.deleted:
                return None
            return dataclasses.replace(current, deleted=True, size=0, chunks=0, digest=None)

        self._purge_chunks_of(self._write_info(name, mark), quietly=False)

    def update_meta(self, name: str, meta: ObjectMeta) -> None:
        """Set the name, description, headers and metadata of object ``name``
        (a rename when ``meta.name`` differs: ObjectAlreadyExistsError if that
        name holds a live object). ObjectNotFoundError / ObjectDeletedError
        when there is nothing to update."""
        options.instance("meta", meta, ObjectMeta)
        new_name = obj.check_object_name(self.bucket, meta.name or name)
        description = options.optional_text("description", meta.description)
        headers = options.object_headers(meta.headers)
        metadata = options.string_map("metadata", meta.metadata)

        def edit(current: Optional[ObjectInfo]) -> ObjectInfo:
            if current is None:
                raise self._not_found(name)
            if current.deleted:
                raise errors.ObjectDeletedError(404, 0, f"object {name!r} in bucket {self.bucket!r} is deleted")
            return dataclasses.replace(current, name=new_name, description=description, headers=headers, metadata=metadata)

        if new_name == name:
            self._write_info(name, edit)  # a put in between is not undone
            return
        renamed = edit(self._stored_or_none(name)[0])
        self._write_info(new_name, lambda current: _claim(self.bucket, new_name, current, renamed, links_too=True))
        self._purge(obj.meta_subject(self.bucket, name))

    def add_link(self, name: str, target: ObjectInfo) -> ObjectInfo:
        """Make ``name`` a link to the object ``target`` (an info from any
        bucket). ``name`` may be new, deleted or a link (replaced), not a live
        object (ObjectAlreadyExistsError); the target must be a live object,
        not a link (ObjectLinkError)."""
        obj.check_object_name(self.bucket, name)
        if not isinstance(target, ObjectInfo) or not target.name or not target.bucket:
            raise errors.ObjectLinkError(f"add_link needs the ObjectInfo of an object, got {target!r}")
        if target.deleted:
            raise errors.ObjectLinkError(f"cannot link to the deleted object {target.name!r}")
        if target.is_link:
            raise errors.ObjectLinkError(f"cannot link to {target.name!r}: it is a link itself")
        return self._add_link(name, ObjectLink(target.bucket, target.name))

    def add_bucket_link(self, name: str, store: "ObjectStore") -> ObjectInfo:
        """Make ``name`` a link to the whole bucket ``store`` (like a directory)."""
        obj.check_object_name(self.bucket, name)
        if not isinstance(store, ObjectStore):
            raise errors.ObjectLinkError(f"add_bucket_link needs an ObjectStore, got {store!r}")
        return self._add_link(name, ObjectLink(store.bucket))

    def _add_link(self, name: str, link: ObjectLink) -> ObjectInfo:
        info = ObjectInfo(name=name, options=ObjectMetaOptions(link=link), bucket=self.bucket, nuid=next_nuid())
        self._write_info(name, lambda current: _claim(self.bucket, name, current, info, links_too=False))
        return info

    # -- reading ------------------------------------------------------------------------

    def get_info(self, name: str, *, show_deleted: bool = False) -> ObjectInfo:
        """The info of object ``name``; ObjectNotFoundError if there is none,
        ObjectDeletedError (one) if it is deleted, unless ``show_deleted``."""
        obj.check_object_name(self.bucket, name)
        info = self._stored(name)[0]
        if info.deleted and not show_deleted:
            raise errors.ObjectDeletedError(404, 0, f"object {name!r} in bucket {self.bucket!r} is deleted")
        return info

    def _stored(self, name: str) -> Tuple[ObjectInfo, int]:
        """The stored info of ``name`` and its message's sequence; ObjectNotFoundError when there is none."""
        try:
            with bucket_errors(self.bucket):
                msg = self._js.get_msg(self.stream_name, last_by_subject=obj.meta_subject(self.bucket, name))
        except errors.MsgNotFoundError as exc:
            about = f"object {name!r} not found in bucket {self.bucket!r}"
            raise errors.ObjectNotFoundError(exc.code, exc.err_code, about) from exc
        try:
            info = ObjectInfo.from_wire(json.loads(msg.data))
        except ValueError as exc:
            raise errors.BadObjectMetaError(f"object info of {name!r} is not JSON") from exc
        info.mtime = msg.time
        return info, msg.seq

    def _not_found(self, name: str) -> errors.ObjectNotFoundError:
        about = f"object {name!r} not found in bucket {self.bucket!r}"
        return errors.ObjectNotFoundError(404, errors.ErrorCode.MSG_NOT_FOUND, about)

    def _stored_or_none(self, name: str) -> Tuple[Optional[ObjectInfo], int]:
        try:
            return self._stored(name)
        except errors.ObjectNotFoundError:
            return None, 0

    def get(self, name: str, *, show_deleted: bool = False, timeout: float = DEFAULT_CHUNK_TIMEOUT) -> ObjectResult:
        """Object ``name`` as a readable stream (an :class:`ObjectResult`;
        close it, or use ``with``). Links to objects are followed; a bucket
        link raises ObjectLinkError. ``timeout``: seconds to wait for each
        chunk. The whole object is never held in memory."""
        t = options.duration("timeout", timeout)
        info = self.get_info(name, show_deleted=show_deleted)
        link = info.link
        if link is None:
            return ObjectResult(self._js, self.bucket, info, t)
        if not link.name:
            raise errors.ObjectLinkError(f"{name!r} links to the whole bucket {link.bucket!r}, not to an object")
        store = self if link.bucket == self.bucket else bind(self._js, link.bucket)
        target = store.get_info(link.name)
        if target.is_link:
            raise errors.BadObjectMetaError(f"{name!r} links to {link.name!r}, which is a link itself")
        return ObjectResult(self._js, store.bucket, target, t)

    def get_bytes(self, name: str, *, show_deleted: bool = False) -> bytes:
        """The whole object in memory (small objects; use :meth:`get` for large ones)."""
        with self.get(name, show_deleted=show_deleted) as result:
            return result.read()

    def list(self, *, show_deleted: bool = False) -> List[ObjectInfo]:
        """The info of every object (and link) in stream order; [] when empty."""
        out: List[ObjectInfo] = []
        with ObjectWatcher(self._js, self.bucket, False, not show_deleted, False, listing=True) as watcher:
            while True:
                item = watcher.next(timeout=self._js.timeout)
                if item is None:
                    return out
                out.append(item)

    def watch(
        self, *, include_history: bool = False, ignore_deletes: bool = False, updates_only: bool = False
    ) -> ObjectWatcher:
        """Changes of object infos as an :class:`ObjectWatcher`: first the
        latest info of each object (every one with ``include_history``), then
        ``None`` once those are delivered, then every change. With
        ``updates_only`` only changes from now on, and no ``None``."""
        return ObjectWatcher(self._js, self.bucket, include_history, ignore_deletes, updates_only)

    # -- the bucket ---------------------------------------------------------------------

    def status(self) -> ObjectStoreStatus:
        with bucket_errors(self.bucket):
            self._stream_info = self._js.stream_info(self.stream_name)
        return ObjectStoreStatus.from_stream_info(self.bucket, self._stream_info)

    def seal(self) -> ObjectStoreStatus:
        """Make the bucket read-only for good (the stream is sealed)."""
        with bucket_errors(self.bucket):
            config = self._js.stream_info(self.stream_name).config
            config.sealed = True
            self._stream_info = self._js.update_stream(config)
        return ObjectStoreStatus.from_stream_info(self.bucket, self._stream_info)
