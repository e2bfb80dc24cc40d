"""What key-value buckets are made of (ADR-8): an entry, its operation, a
bucket's configuration and status. Pure data; the handle is ``bucket.py``."""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Dict, List, Optional, Union, cast

from ..models import Placement, RePublish, StorageType, StoreCompression, StreamInfo, StreamSource

STREAM_PREFIX = "KV_"
KV_OPERATION = "KV-Operation"
MARKER_REASON = "Nats-Marker-Reason"  # server-placed markers (ADR-43/48)


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
    mirror: Optional[StreamSource] = None
    sources: Optional[List[StreamSource]] = None


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
            mirror=cast(Optional[StreamSource], c.mirror),
            sources=cast(Optional[List[StreamSource]], c.sources),
        )
