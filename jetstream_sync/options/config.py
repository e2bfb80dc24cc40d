"""Stream and consumer configs: a config object from an optional base plus
keyword fields, validated as the server will (enums, durations, subjects,
64-bit counts, priority groups); and the names (ADR-6) they carry."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any, Dict, Optional, Type, TypeVar

from .. import errors
from ..models import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamConsumerLimits,
)
from . import checks
from .buckets import string_map
from .checks import MAX_INT, duration, subject
from .pull import MIN_SERVER_HEARTBEAT, priority_config

__all__ = ["build_config", "validate_name"]

_C = TypeVar("_C", StreamConfig, ConsumerConfig)
_ENUMS: Dict[str, Type[Enum]] = {
    "ack_policy": AckPolicy,
    "deliver_policy": DeliverPolicy,
    "replay_policy": ReplayPolicy,
    "retention": RetentionPolicy,
    "storage": StorageType,
    "discard": DiscardPolicy,
    "compression": StoreCompression,
}
_DURATIONS = (
    "ack_wait",
    "inactive_threshold",
    "max_expires",
    "priority_timeout",
    "max_age",
    "duplicate_window",
    "subject_delete_marker_ttl",
)


def validate_name(kind: str, value: Any) -> str:
    """ADR-6 names (they become subject tokens and file names)."""
    return checks.name(kind, value)


def build_config(cls: Type[_C], config: Optional[_C], overrides: Dict[str, Any]) -> _C:
    """A config object from an optional base plus keyword overrides, validated."""
    if config is not None and not isinstance(config, cls):
        raise errors.InvalidOptionError(f"config must be a {cls.__name__}, not {type(config).__name__}")
    try:
        cfg = dataclasses.replace(config, **overrides) if config is not None else cls(**overrides)
    except TypeError as exc:
        raise errors.InvalidOptionError(f"invalid {cls.__name__} field: {exc}") from None
    for name, enum in _ENUMS.items():
        value = getattr(cfg, name, None)
        if value is not None and not isinstance(value, enum):
            try:
                setattr(cfg, name, enum(value))
            except ValueError:
                allowed = ", ".join(repr(e.value) for e in enum)
                raise errors.InvalidOptionError(f"{name} must be one of {allowed}, got {value!r}") from None
    for name in _DURATIONS:
        value = getattr(cfg, name, None)
        if value is not None:
            unlimited = "no limit" if name == "max_age" else ""  # None (or 0) keeps messages forever
            setattr(cfg, name, duration(name, value, allow_zero=True, none_means=unlimited))
    limits = getattr(cfg, "consumer_limits", None)
    if isinstance(limits, StreamConsumerLimits) and limits.inactive_threshold is not None:
        duration("consumer_limits.inactive_threshold", limits.inactive_threshold, allow_zero=True)
    for name in ("filter_subject", "deliver_subject"):
        value = getattr(cfg, name, None)
        if value:
            subject(value, what=name, wildcards=(name == "filter_subject"))
    if isinstance(cfg, ConsumerConfig):
        if cfg.backoff is not None:
            if not isinstance(cfg.backoff, (list, tuple)):
                raise errors.InvalidOptionError(f"backoff must be a list of seconds, got {cfg.backoff!r}")
            cfg.backoff = [duration("backoff entry", b, allow_zero=True) for b in cfg.backoff]
        priority_config(cfg.priority_policy, cfg.priority_groups, cfg.priority_timeout, cfg.deliver_subject)
        if cfg.idle_heartbeat:
            cfg.idle_heartbeat = duration("idle_heartbeat", cfg.idle_heartbeat, minimum=MIN_SERVER_HEARTBEAT)
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if isinstance(value, int) and not isinstance(value, bool) and not -MAX_INT - 1 <= value <= MAX_INT:
            raise errors.InvalidOptionError(f"{f.name} must fit in 64 bits, got {value!r}")
    if getattr(cfg, "metadata", None) is not None:
        cfg.metadata = string_map("metadata", cfg.metadata)
    for name, what in (("filter_subjects", "filter_subjects entry"), ("subjects", "stream subject")):
        values = getattr(cfg, name, None)
        if values is None:
            continue
        if not isinstance(values, (list, tuple)):
            raise errors.InvalidOptionError(f"{name} must be a list of subjects, got {values!r}")
        for value in values:
            subject(value, what=what, wildcards=True)
    return cfg
