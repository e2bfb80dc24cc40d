"""Object store (ADR-20) data: the models, their JSON form, subjects, digests,
the stream config of a bucket and the chunking of a put. Pure, no I/O.

The models are this library's own rather than nats-py's ``nats.js.api``
ones: those lack ``metadata`` (ADR-20 rev. 2), keep ``mtime`` as text and
write headers as ``{name: value}``, which nats.go (``{name: [values]}``)
cannot read. Fields a newer writer adds are kept in ``extra`` and written
back, so ``update_meta`` never erases them.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from .. import errors, options
from ..models import DiscardPolicy, Placement, StorageType, StoreCompression, StreamConfig, StreamInfo

__all__ = [
    "ObjectLink",
    "ObjectMetaOptions",
    "ObjectMeta",
    "ObjectInfo",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
]

DEFAULT_CHUNK_SIZE = 128 * 1024  # bytes (ADR-20)
MAX_WINDOW = 256  # chunks a put keeps in flight or a reader buffers, whatever their size
DIGEST_ALGORITHM = "SHA-256"
STREAM_PREFIX = options.OBJECT_STREAM_PREFIX
Source = Union[bytes, bytearray, memoryview, str, Any]  # or anything with read(n)


# -- names and subjects --------------------------------------------------------------


def stream_name(bucket: str) -> str:
    return f"{STREAM_PREFIX}{bucket}"


def encode_name(name: str) -> str:
    """An object name as its meta-subject token: URL-safe base64, padded (as nats.go)."""
    return base64.urlsafe_b64encode(name.encode()).decode()


def chunk_subject(bucket: str, nuid: str) -> str:
    return f"$O.{bucket}.C.{nuid}"


def meta_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{encode_name(name)}"


def all_chunks(bucket: str) -> str:
    return f"$O.{bucket}.C.>"


def all_meta(bucket: str) -> str:
    return f"$O.{bucket}.M.>"


def check_object_name(bucket: str, name: Any) -> str:
    """An object name that fits its meta subject; InvalidObjectNameError otherwise."""
    return options.object_name(name, len(f"$O.{bucket}.M."))


@contextlib.contextmanager
def bucket_errors(bucket: str) -> Iterator[None]:
    """A missing stream means a missing bucket."""
    try:
        yield
    except errors.ObjectStoreNotFoundError:
        raise
    except errors.StreamNotFoundError as exc:
        raise errors.ObjectStoreNotFoundError(exc.code, exc.err_code, f"object store {bucket!r} not found") from exc


# -- digests -------------------------------------------------------------------------


def digest_value(sha: "hashlib._Hash") -> str:
    """``SHA-256=<URL-safe base64>`` of a finished hash (ADR-20's form)."""
    return f"{DIGEST_ALGORITHM}={base64.urlsafe_b64encode(sha.digest()).decode()}"


def decode_digest(value: Any) -> bytes:
    """The raw SHA-256 of an info's ``digest``; BadObjectMetaError when it is not one.
    Padding may be missing and the standard alphabet is accepted too."""
    algo, sep, text = value.partition("=") if isinstance(value, str) else ("", "", "")
    if not sep or algo.upper() != DIGEST_ALGORITHM:
        raise errors.BadObjectMetaError(f"object digest must be '{DIGEST_ALGORITHM}=<base64>', got {value!r}")
    text = text.replace("+", "-").replace("/", "_")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise errors.BadObjectMetaError(f"object digest is not base64: {value!r}") from None
    if len(raw) != hashlib.sha256().digest_size:
        raise errors.BadObjectMetaError(f"object digest is not a SHA-256: {value!r}")
    return raw


# -- models ----------------------------------------------------------------------------


def _split(data: Dict[str, Any], keys: Tuple[str, ...]) -> Dict[str, Any]:
    return {k: v for k, v in data.items() if k not in keys}


@dataclass
class ObjectLink:
    """A link to an object (``name``) or to a whole bucket (``name`` None)."""

    bucket: str
    name: Optional[str] = None

    def to_wire(self) -> Dict[str, Any]:
        return {"bucket": self.bucket, **({"name": self.name} if self.name else {})}

    @classmethod
    def from_wire(cls, data: Dict[str, Any]) -> "ObjectLink":
        return cls(str(data.get("bucket") or ""), data.get("name") or None)


@dataclass
class ObjectMetaOptions:
    """``link`` (an :class:`ObjectLink`) or ``max_chunk_size`` (bytes) of the object."""

    link: Optional[ObjectLink] = None
    max_chunk_size: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    _keys = ("link", "max_chunk_size")

    def to_wire(self) -> Dict[str, Any]:
        out = dict(self.extra)
        if self.link is not None:
            out["link"] = self.link.to_wire()
        if self.max_chunk_size:
            out["max_chunk_size"] = self.max_chunk_size
        return out

    @classmethod
    def from_wire(cls, data: Dict[str, Any]) -> "ObjectMetaOptions":
        link = data.get("link")
        return cls(
            ObjectLink.from_wire(link) if isinstance(link, dict) else None,
            data.get("max_chunk_size") or None,
            _split(data, cls._keys),
        )


@dataclass
class ObjectMeta:
    """What a user says about an object: ``name``, ``description``,
    ``headers`` (name -> list of values, as nats.go), ``metadata`` (str -> str)
    and ``options``."""

    name: str = ""
    description: Optional[str] = None
    headers: Optional[Dict[str, List[str]]] = None
    metadata: Optional[Dict[str, str]] = None
    options: Optional[ObjectMetaOptions] = None


_INFO_KEYS = ("name", "description", "headers", "metadata", "options", "bucket", "nuid", "size", "chunks",
              "digest", "deleted", "mtime")  # fmt: skip


@dataclass
class ObjectInfo(ObjectMeta):
    """An object's meta plus what the store knows: ``bucket``, ``nuid`` (the
    chunks' subject token), ``size`` (bytes), ``chunks``, ``digest``
    (``SHA-256=…``), ``deleted`` and ``mtime`` (aware UTC datetime of the
    info message; the time of the put for a fresh put's result)."""

    bucket: str = ""
    nuid: str = ""
    size: int = 0
    chunks: int = 0
    digest: Optional[str] = None
    deleted: bool = False
    mtime: Optional[datetime.datetime] = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def meta(self) -> ObjectMeta:
        """A copy of the user-settable part (for :meth:`ObjectStore.update_meta`)."""
        return ObjectMeta(self.name, self.description, _copy_headers(self.headers),
                          dict(self.metadata) if self.metadata else None, self.options)  # fmt: skip

    @property
    def link(self) -> Optional[ObjectLink]:
        return self.options.link if self.options is not None else None

    @property
    def is_link(self) -> bool:
        return self.link is not None

    def to_wire(self) -> Dict[str, Any]:
        """The stored JSON (``mtime`` is never stored, ADR-20)."""
        out: Dict[str, Any] = {"name": self.name}
        for key in ("description", "headers", "metadata"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.options is not None:
            out["options"] = self.options.to_wire()
        out.update(bucket=self.bucket, nuid=self.nuid, size=self.size, chunks=self.chunks)
        if self.digest:
            out["digest"] = self.digest
        if self.deleted:
            out["deleted"] = True
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    @classmethod
    def from_wire(cls, data: Any) -> "ObjectInfo":
        """Parse stored JSON; BadObjectMetaError if it is not an object info."""
        try:
            opts = data.get("options")
            return cls(
                name=str(data["name"]),
                description=data.get("description") or None,
                headers=_read_headers(data.get("headers")),
                metadata=dict(data["metadata"]) if data.get("metadata") else None,
                options=ObjectMetaOptions.from_wire(opts) if isinstance(opts, dict) else None,
                bucket=str(data.get("bucket") or ""),
                nuid=str(data.get("nuid") or ""),
                size=int(data.get("size") or 0),
                chunks=int(data.get("chunks") or 0),
                digest=data.get("digest") or None,
                deleted=bool(data.get("deleted")),
                extra=_split(data, _INFO_KEYS),
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise errors.BadObjectMetaError(f"object info is not ADR-20 JSON: {str(data)[:200]}") from exc


def _read_headers(value: Any) -> Optional[Dict[str, List[str]]]:
    """nats.go writes lists, older nats.py plain strings: lists either way."""
    if not value:
        return None
    return {str(k): [str(x) for x in v] if isinstance(v, list) else [str(v)] for k, v in value.items()}


def _copy_headers(headers: Optional[Dict[str, List[str]]]) -> Optional[Dict[str, List[str]]]:
    return {k: list(v) for k, v in headers.items()} if headers else None


# -- the bucket ------------------------------------------------------------------------


@dataclass
class ObjectStoreConfig:
    """An object store's settings. ``ttl``: seconds objects are kept (None or
    0: forever); ``max_bytes``: bucket size limit in bytes (None or -1: none);
    ``storage``: ``"file"`` (default) or ``"memory"``; ``replicas``: 1-5;
    ``compression``: S2 on disk (server 2.10+); ``metadata``: str -> str."""

    bucket: str
    description: Optional[str] = None
    ttl: Optional[float] = None
    max_bytes: Optional[int] = None
    storage: Union[str, StorageType] = StorageType.FILE
    replicas: int = 1
    placement: Optional[Placement] = None
    compression: bool = False
    metadata: Optional[Dict[str, str]] = None

    def stream_config(self) -> StreamConfig:
        """The stream behind the bucket (ADR-20), every field validated."""
        bucket = options.object_store_name(self.bucket)
        limits = options.object_store_limits(self.ttl, self.max_bytes, self.replicas, self.compression)
        ttl, max_bytes, replicas = limits
        placement = self.placement
        placement = options.model_or_dict("placement", placement, Placement)
        return StreamConfig(
            name=stream_name(bucket),
            description=options.optional_text("description", self.description),
            subjects=[all_chunks(bucket), all_meta(bucket)],
            max_age=ttl,
            max_bytes=max_bytes,
            storage=self.storage,  # type: ignore[arg-type]  # build_config checks it
            num_replicas=replicas,
            placement=placement,
            discard=DiscardPolicy.NEW,
            allow_rollup_hdrs=True,
            allow_direct=True,
            compression=StoreCompression.S2 if self.compression else None,
            metadata=options.string_map("metadata", self.metadata),
        )


def store_config(config: Any, bucket: Any, fields: Dict[str, Any]) -> ObjectStoreConfig:
    """An :class:`ObjectStoreConfig` from a config, a bucket name or both, plus keyword fields."""
    if isinstance(bucket, ObjectStoreConfig):
        config, bucket = bucket, None
    options.config_type(config, ObjectStoreConfig)
    if bucket is not None:
        fields = {**fields, "bucket": bucket}
    made: ObjectStoreConfig = options.dataclass_from(ObjectStoreConfig, config, fields, "invalid object store option")
    return made


@dataclass
class ObjectStoreStatus:
    """A bucket's state: ``ttl`` seconds (0: forever), ``size`` bytes of all
    its data and meta, ``backing_store`` ``"JetStream"``; ``stream_info`` is
    the stream's info."""

    bucket: str
    description: Optional[str]
    ttl: float
    storage: Optional[StorageType]
    replicas: int
    sealed: bool
    size: int
    metadata: Optional[Dict[str, str]]
    compressed: bool
    stream_info: StreamInfo = field(repr=False)
    backing_store: str = "JetStream"

    @classmethod
    def from_stream_info(cls, bucket: str, info: StreamInfo) -> "ObjectStoreStatus":
        cfg = info.config
        compression = cfg.compression
        return cls(
            bucket=bucket,
            description=cfg.description,
            ttl=cfg.max_age or 0.0,
            storage=cfg.storage,
            replicas=cfg.num_replicas or 1,
            sealed=bool(cfg.sealed),
            size=info.state.bytes,
            metadata=cfg.metadata,
            compressed=compression not in (None, StoreCompression.NONE, "none"),
            stream_info=info,
        )


# -- chunking a put --------------------------------------------------------------------


def chunks_of(source: Source, size: int) -> Iterator[bytes]:
    """``source`` cut into ``size``-byte chunks (the last may be shorter);
    only one chunk is in memory at a time for readers. Raises
    InvalidOptionError at once (not on first iteration) for other types."""
    if isinstance(source, str):
        source = source.encode()
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _slices(memoryview(source).cast("B"), size)
    return _reads(options.data_reader(source), size)


def _slices(view: memoryview, size: int) -> Iterator[bytes]:
    for start in range(0, len(view), size):
        yield bytes(view[start : start + size])


def _reads(read: Callable[[int], Any], size: int) -> Iterator[bytes]:
    """Full chunks from a reader that may return short reads, bytes or text
    (text is UTF-8 encoded; a read may then overshoot and is cut)."""
    carry = b""
    eof = False
    while not eof:
        parts, have = [carry], len(carry)
        while have < size:
            piece = read(size - have)
            if not options.read_piece(piece):
                eof = True
                break
            if isinstance(piece, str):
                piece = piece.encode()
            parts.append(bytes(piece))
            have += len(piece)
        block = b"".join(parts)
        start = 0
        while len(block) - start >= size:
            yield block[start : start + size]
            start += size
        carry = block[start:]
    if carry:
        yield carry
