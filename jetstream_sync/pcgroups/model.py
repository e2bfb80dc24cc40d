"""What a partitioned consumer group is on the wire, as orbit.go's
``pcgroups`` lays it out: the config bucket and key, the config JSON (field
names and ``omitempty`` as its Go structs), the member consumers' names and
filters, and the stream transform that puts the partition number first."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence, Tuple

from ..options import pcgroups as checks
from ..models import SubjectTransform

STATIC_BUCKET = "static-consumer-groups"  # orbit.go kvStaticBucketName
ELASTIC_BUCKET = "elastic-consumer-groups"  # orbit.go kvElasticBucketName
PRIORITY_GROUP = "PCG"  # orbit.go priorityGroupName: every member consumer's priority group
PIN_HEADER = "Nats-Pin-Id"


@dataclass(frozen=True)
class MemberMapping:
    """The partitions one member owns (orbit.go ``MemberMapping``)."""

    member: str
    partitions: Tuple[int, ...]


@dataclass(frozen=True)
class StaticGroupConfig:
    """A static group's config (orbit.go ``StaticConsumerGroupConfig``):
    ``max_members`` partitions, optional ``filters`` (subjects after the
    partition token), and either ``members`` (partitions spread evenly) or
    ``member_mappings`` (partitions given explicitly)."""

    max_members: int
    filters: Tuple[str, ...] = ()
    members: Tuple[str, ...] = ()
    member_mappings: Tuple[MemberMapping, ...] = field(default=())

    @classmethod
    def checked(cls, maximum: Any, filters: Any, members: Any, mappings: Any, **kw: Any) -> "StaticGroupConfig":
        n, f, m, mm = checks.static_group(maximum, filters, members, mappings, **kw)
        return cls(n, tuple(f), tuple(m), tuple(MemberMapping(a, tuple(p)) for a, p in mm))

    def to_json(self) -> bytes:
        """The JSON orbit.go's ``json.Marshal`` writes: fields in struct order, empty ones left out."""
        doc: Dict[str, Any] = {"max_members": self.max_members}
        if self.filters:
            doc["filters"] = list(self.filters)
        if self.members:
            doc["members"] = list(self.members)
        if self.member_mappings:
            doc["member_mappings"] = [{"member": m.member, "partitions": list(m.partitions)} for m in self.member_mappings]
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "StaticGroupConfig":
        """Read a stored config (InvalidOptionError when it is not one)."""
        n, f, m, mm = checks.stored_static_group(data)
        return cls(n, tuple(f), tuple(m), tuple(MemberMapping(a, tuple(p)) for a, p in mm))

    def is_member(self, member: str) -> bool:
        """Whether ``member`` is in the membership (orbit.go ``IsInMembership``)."""
        return member in self.members or any(m.member == member for m in self.member_mappings)

    def partitions_of(self, member: str) -> List[int]:
        """The partition numbers ``member`` owns."""
        return [int(f.split(".", 1)[0]) for f in partition_filters(self.members, self.max_members, self.member_mappings, member, ">")]

    def member_filters(self, member: str) -> List[str]:
        """The filter subjects of ``member``'s consumer, in orbit.go's order."""
        out: List[str] = []
        for f in self.filters or (">",):
            out += partition_filters(self.members, self.max_members, self.member_mappings, member, f)
        return out


@dataclass(frozen=True)
class PartitioningFilter:
    """orbit.go ``PartitioningFilter``: the subjects ``filter`` an elastic
    group takes, and the 1-based indexes of its ``*`` tokens that make the
    partitioning key (empty: the whole subject)."""

    filter: str
    partitioning_wildcards: Tuple[int, ...] = ()


@dataclass(frozen=True)
class ElasticGroupConfig:
    """An elastic group's config (orbit.go ``ElasticConsumerGroupConfig``).
    ``revision`` is the config's revision in the bucket (not stored)."""

    max_members: int
    partitioning_filters: Tuple[PartitioningFilter, ...] = ()
    max_buffered_msgs: int = 0
    max_buffered_bytes: int = 0
    members: Tuple[str, ...] = ()
    member_mappings: Tuple[MemberMapping, ...] = ()
    revision: int = field(default=0, compare=False)

    @classmethod
    def checked(cls, *args: Any, revision: int = 0) -> "ElasticGroupConfig":
        return cls._of(checks.elastic_group(*args), revision)

    @classmethod
    def from_json(cls, data: bytes, revision: int = 0) -> "ElasticGroupConfig":
        """Read a stored config (InvalidOptionError when it is not one)."""
        return cls._of(checks.stored_elastic_group(data), revision)

    @classmethod
    def _of(cls, parts: Any, revision: int) -> "ElasticGroupConfig":
        n, pfs, msgs, size, members, maps = parts
        return cls(n, tuple(PartitioningFilter(f, tuple(w)) for f, w in pfs), msgs, size, tuple(members),
                   tuple(MemberMapping(a, tuple(p)) for a, p in maps), revision)  # fmt: skip

    def to_json(self) -> bytes:
        """The JSON orbit.go's ``json.Marshal`` writes (``partitioning_filters``
        is not omitempty there: null when none; the buffered limits, members
        and mappings are)."""
        doc: Dict[str, Any] = {
            "max_members": self.max_members,
            "partitioning_filters": [
                {"filter": f.filter, "partitioning_wildcards": list(f.partitioning_wildcards)} for f in self.partitioning_filters
            ] or None,
        }
        if self.max_buffered_msgs:
            doc["max_buffered_msg"] = self.max_buffered_msgs
        if self.max_buffered_bytes:
            doc["max_buffered_bytes"] = self.max_buffered_bytes
        if self.members:
            doc["members"] = list(self.members)
        if self.member_mappings:
            doc["member_mappings"] = [{"member": m.member, "partitions": list(m.partitions)} for m in self.member_mappings]
        return json.dumps(doc, separators=(",", ":")).encode()

    def is_member(self, member: str) -> bool:
        """Whether ``member`` is in the membership."""
        return member in self.members or any(m.member == member for m in self.member_mappings)

    def member_filters(self, member: str) -> List[str]:
        """The filter subjects of ``member``'s consumer (orbit.go ``ElasticGetPartitionFilters``)."""
        out: List[str] = []
        for f in [p.filter for p in self.partitioning_filters] or [">"]:
            out += partition_filters(self.members, self.max_members, self.member_mappings, member, f)
        return out

    def partitions_of(self, member: str) -> List[int]:
        """The partition numbers ``member`` owns now."""
        return [int(f.split(".", 1)[0]) for f in partition_filters(self.members, self.max_members, self.member_mappings, member, ">")]

    def transforms(self) -> List[SubjectTransform]:
        """The subject transforms of the group's work-queue stream's source."""
        pfs = self.partitioning_filters or (PartitioningFilter(">"),)
        return [partition_transform(self.max_members, p.filter, p.partitioning_wildcards) for p in pfs]


def elastic_stream_name(stream: str, group: str) -> str:
    """The elastic group's work-queue stream (orbit.go ``composeCGSName``)."""
    return f"{stream}-{group}"


def partition_filters(
    members: Sequence[str], max_members: int, mappings: Sequence[MemberMapping], member: str, filter_: str
) -> List[str]:
    """orbit.go ``GeneratePartitionFilters``: ``<partition>.<filter>`` for each
    partition of ``member``. With ``members``: deduplicated, sorted, capped at
    ``max_members``; partition i goes to member i // (max_members // n), the
    remainder round-robin. With mappings: ``<partition>.>`` (orbit.go ignores
    the filter there, and so does this, so both create the same consumer)."""
    if members:
        names = sorted(dict.fromkeys(members))[:max_members]
        n = len(names)
        per = max_members // n
        out = []
        for i in range(max_members):
            owner = names[(i // per) % n] if i < n * per else names[(i - n * per) % n]
            if owner == member:
                out.append(f"{i}.{filter_}")
        return out
    return [f"{p}.>" for m in mappings if m.member == member for p in m.partitions]


def group_key(stream: str, group: str) -> str:
    """The group's key in the config bucket (orbit.go ``composeKey``)."""
    return f"{stream}.{group}"


def static_consumer_name(group: str, member: str) -> str:
    """A static member's durable consumer (orbit.go ``composeStaticConsumerName``)."""
    return f"{group}-{member}"


def strip_partition(subject: str) -> str:
    """The subject without its first token (the partition number), as
    orbit.go's message shim returns it."""
    head, dot, rest = subject.partition(".")
    return rest if dot else subject


def partition_transform(partitions: int, filter_: str = ">", wildcards: Sequence[int] = ()) -> SubjectTransform:
    """The subject transform that prefixes a stream's subjects with their
    partition number (orbit.go ``getPartitioningTransformDest``): ``filter_``
    (default ``>``) is what it applies to; ``wildcards`` the 1-based indexes
    of the ``*`` tokens that make the key (empty: the whole subject). Use it as
    a stream's ``subject_transform`` for a static group."""
    n = checks.max_members(partitions)
    f, idx = checks.partition_wildcards(filter_, wildcards)
    tokens, star = f.split("."), 0
    for i, t in enumerate(tokens):
        if t == "*":
            star += 1
            tokens[i] = f"{{{{Wildcard({star})}}}}"
    args = f"{n},{','.join(str(i) for i in idx)}" if idx else f"{n}"
    return SubjectTransform(src=f, dest=f"{{{{Partition({args})}}}}.{'.'.join(tokens)}")
