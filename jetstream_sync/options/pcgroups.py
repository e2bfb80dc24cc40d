"""Partitioned consumer groups (orbit.go ``pcgroups``): the group, member and
partition checks, as orbit.go's ``validateStaticConfig`` makes them, plus the
names this client adds (a group and a member become a consumer name
``<group>-<member>`` and a key ``<stream>.<group>``, so both must be names)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import errors
from .checks import count, duration, name, subject

DEFAULT_ACK_WAIT = 5.0  # seconds; orbit.go's defaultAckWait
MIN_PIN_TTL = 1.0  # seconds; orbit.go's minPullExpiryPinnedTTL


def consumer_group_name(value: Any) -> str:
    """A consumer group's name: a stream/consumer name (no '.', '*', '>', ...)."""
    return name("consumer group", value)


def member_name(value: Any) -> str:
    """A member's name: a consumer name (it becomes part of one)."""
    return name("member", value)


def max_members(value: Any) -> int:
    """The number of partitions (orbit.go: ``max_members``), an integer >= 1."""
    return count("max_members", value)


def _strings(what: str, value: Any) -> List[Any]:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise errors.InvalidOptionError(f"{what} must be a list, got {value!r}")
    return list(value)


def group_filters(value: Any) -> List[str]:
    """Subject filters (wildcards allowed), applied after the partition token."""
    return [subject(f, what="filter", wildcards=True) for f in _strings("filters", value)]


def member_mappings(value: Any, partitions: int) -> List[Tuple[str, List[int]]]:
    """``[(member, [partition, ...]), ...]`` (or ``{member: [...]}`` or dicts
    with ``member`` / ``partitions``): members unique, every partition from 0
    to ``partitions - 1`` given to exactly one member."""
    if isinstance(value, dict):
        value = list(value.items())
    out: List[Tuple[str, List[int]]] = []
    for item in _strings("member_mappings", value):
        if isinstance(item, dict):
            item = (item.get("member"), item.get("partitions"))
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise errors.InvalidOptionError(f"a member mapping is (member, [partitions]), got {item!r}")
        member, parts = member_name(item[0]), _strings("partitions", item[1])
        out.append((member, [_partition(p, partitions) for p in parts]))
    if not 1 <= len(out) <= partitions:
        raise errors.InvalidOptionError(f"the number of member mappings must be between 1 and max_members ({partitions}), got {len(out)}")
    members = [m for m, _ in out]
    if len(set(members)) != len(members):
        raise errors.InvalidOptionError(f"member names in member_mappings must be unique, got {members}")
    seen = [p for _, parts in out for p in parts]
    if len(set(seen)) != len(seen):
        raise errors.InvalidOptionError("each partition number may be mapped to one member only")
    if len(seen) != partitions:
        raise errors.InvalidOptionError(f"member_mappings must map every partition 0..{partitions - 1}, got {sorted(seen)}")
    return out


def _partition(value: Any, partitions: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < partitions:
        raise errors.InvalidOptionError(f"partition numbers must be integers from 0 to {partitions - 1}, got {value!r}")
    return value


def static_group(
    maximum: Any, filters: Any, members: Any, mappings: Any, *, require_members: bool = True
) -> Tuple[int, List[str], List[str], List[Tuple[str, List[int]]]]:
    """A static group's config checked: (max_members, filters, members, mappings).
    ``members`` and ``mappings`` exclude each other; creating a group needs one
    of them (a stored config read back may have neither)."""
    partitions = max_members(maximum)
    names = [member_name(m) for m in _strings("members", members)]
    if names and mappings:
        raise errors.InvalidOptionError("give members or member_mappings, not both")
    maps = member_mappings(mappings, partitions) if mappings else []
    if require_members and not names and not maps:
        raise errors.InvalidOptionError("a consumer group needs members or member_mappings")
    return partitions, group_filters(filters), names, maps


def _json_object(data: bytes, kind: str) -> Dict[str, Any]:
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise errors.InvalidOptionError(f"{kind} consumer group config is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise errors.InvalidOptionError(f"{kind} consumer group config is a JSON object, got {doc!r}")
    return doc


def stored_static_group(data: bytes) -> Tuple[int, List[str], List[str], List[Tuple[str, List[int]]]]:
    """A static group's config as orbit.go stores it (its JSON), checked."""
    doc = _json_object(data, "a static")
    return static_group(doc.get("max_members"), doc.get("filters"), doc.get("members"),
                        doc.get("member_mappings"), require_members=False)  # fmt: skip


JOIN_CONSUME_OPTIONS = ("max_messages", "max_bytes", "threshold_messages", "threshold_bytes")


def join_options(ack_wait: Any, max_ack_pending: Any, given: Dict[str, Any]) -> Tuple[float, Optional[int]]:
    """A member's ``ack_wait`` (seconds, default 5, also the pin timeout and
    twice the pull expiry, as orbit.go derives them) and ``max_ack_pending``;
    other options must be consume options the group does not set itself."""
    unknown = sorted(set(given) - set(JOIN_CONSUME_OPTIONS))
    if unknown:
        raise errors.InvalidOptionError(
            f"unknown option(s) {', '.join(unknown)} for join; allowed: ack_wait, max_ack_pending,"
            f" error_handler, {', '.join(JOIN_CONSUME_OPTIONS)}"
        )
    wait = DEFAULT_ACK_WAIT if ack_wait is None else duration("ack_wait", ack_wait)
    pending = None if max_ack_pending is None else count("max_ack_pending", max_ack_pending)
    return wait, pending


def partition_wildcards(filter_: Any, wildcards: Sequence[Any]) -> Tuple[str, List[int]]:
    """A partitioning filter (``foo.*``) and the 1-based indexes of its ``*``
    tokens that form the key (orbit.go's ``validateConfig``)."""
    f = subject(filter_, what="filter", wildcards=True)
    tokens = f.split(".")
    stars = tokens.count("*")
    if stars == 0 and tokens[-1] != ">":
        raise errors.InvalidOptionError(f"a partitioning filter needs a '*' wildcard or a final '>', got {f!r}")
    idx = _strings("wildcards", list(wildcards) if isinstance(wildcards, tuple) else wildcards)
    if len(set(idx)) != len(idx):
        raise errors.InvalidOptionError(f"wildcard indexes must be unique, got {idx}")
    for i in idx:
        if isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= stars:
            raise errors.InvalidOptionError(f"wildcard indexes must be from 1 to {stars} (the '*' tokens of {f!r}), got {i!r}")
    return f, idx


def partitioning_filters(value: Any) -> List[Tuple[str, List[int]]]:
    """An elastic group's partitioning filters: ``[(filter, [wildcard, ...]), ...]``
    (or dicts with ``filter`` / ``partitioning_wildcards``, or bare filters)."""
    out = []
    for item in _strings("partitioning_filters", value):
        if isinstance(item, str):
            item = (item, [])
        elif isinstance(item, dict):
            item = (item.get("filter"), item.get("partitioning_wildcards") or [])
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise errors.InvalidOptionError(f"a partitioning filter is (filter, [wildcard indexes]), got {item!r}")
        out.append(partition_wildcards(item[0], item[1]))
    return out


def elastic_group(
    maximum: Any, filters: Any, max_msgs: Any, max_bytes: Any, members: Any = None, mappings: Any = None
) -> Tuple[int, List[Tuple[str, List[int]]], int, int, List[str], List[Tuple[str, List[int]]]]:
    """An elastic group's config checked (orbit.go ``validateConfig``):
    (max_members, partitioning filters, max buffered messages, max buffered
    bytes, members, member mappings); 0 buffered means no limit."""
    partitions = max_members(maximum)
    pfs = partitioning_filters(filters)
    msgs = count("max_buffered_msgs", max_msgs or 0, allow_zero=True)
    size = count("max_buffered_bytes", max_bytes or 0, allow_zero=True)
    names = [member_name(m) for m in _strings("members", members)]
    if names and mappings:
        raise errors.InvalidOptionError("give members or member_mappings, not both")
    maps = member_mappings(mappings, partitions) if mappings else []
    return partitions, pfs, msgs, size, names, maps


def stored_elastic_group(
    data: bytes,
) -> Tuple[int, List[Tuple[str, List[int]]], int, int, List[str], List[Tuple[str, List[int]]]]:
    """An elastic group's config as orbit.go stores it (its JSON), checked."""
    doc = _json_object(data, "an elastic")
    return elastic_group(doc.get("max_members"), doc.get("partitioning_filters"), doc.get("max_buffered_msg"),
                         doc.get("max_buffered_bytes"), doc.get("members"), doc.get("member_mappings"))  # fmt: skip


def member_names(value: Any) -> List[str]:
    """A non-empty list of member names (add / delete members)."""
    names = [member_name(m) for m in _strings("members", value)]
    if not names:
        raise errors.InvalidOptionError("give at least one member name")
    return names
