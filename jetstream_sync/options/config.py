"""Stream and consumer configs: a config object from an optional base plus
keyword fields, validated as the server will (enums, durations, subjects,
64-bit counts, priority groups); and the names (ADR-6) they carry."""

from __future__ import annotations

import dataclasses
import datetime
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
from .checks import MAX_INT, at_least, duration, exclusive, subject
from .pull import MIN_SERVER_HEARTBEAT, priority_config

__all__ = ["build_config", "validate_name", "consumer_kind", "consumer_names", "ordered_start", "opt_start_time"]

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


def consumer_kind(cfg: ConsumerConfig, action: str, push: bool) -> None:
    """``cfg`` fits the call: ``update`` names its consumer, a push call has a
    ``deliver_subject`` and a pull call none (whether the deliver subject came
    as a keyword or in a config object)."""
    if action == "update" and not (cfg.name or cfg.durable_name):
        raise errors.InvalidOptionError("update_consumer needs the consumer's name")
    verb = action or "create_or_update"
    if push and not cfg.deliver_subject:
        raise errors.InvalidOptionError(f"a push consumer needs a deliver_subject; for a pull consumer use {verb}_consumer()")
    if not push and cfg.deliver_subject:  # as a keyword or in the config: one rule for both forms
        raise errors.InvalidOptionError(
            f"deliver_subject {cfg.deliver_subject!r} makes a push consumer: use {verb}_push_consumer(), "
            f"which returns a PushConsumer ({verb}_consumer() is for pull consumers only)"
        )


def consumer_names(cfg: ConsumerConfig) -> None:
    """One consumer name (``name`` and ``durable_name`` agree) and one kind of filter."""
    if cfg.name and cfg.durable_name and cfg.name != cfg.durable_name:
        raise errors.InvalidOptionError("name and durable_name differ; give one of them")
    exclusive("", "filter_subject", cfg.filter_subject or None, "filter_subjects", cfg.filter_subjects or None)


def ordered_start(cfg: ConsumerConfig) -> None:
    """An ordered consumer's start options must agree with the deliver policy, as the server
    requires. A policy that names one start option drops the other (as
    nats.go): ``by_start_sequence`` keeps ``opt_start_seq``, ``by_start_time``
    keeps ``opt_start_time``; with no policy, both at once is refused.
    ``last_per_subject`` with no filter reads every subject (``>``)."""
    policy = cfg.deliver_policy or DeliverPolicy.ALL
    if policy is DeliverPolicy.BY_START_SEQUENCE:
        cfg.opt_start_time = None
    elif policy is DeliverPolicy.BY_START_TIME:
        cfg.opt_start_seq = None
    elif cfg.opt_start_seq is not None and cfg.opt_start_time is not None:
        raise errors.InvalidOptionError(
            "give opt_start_seq or opt_start_time, not both (or name one with deliver_policy)"
        )
    if policy is DeliverPolicy.LAST_PER_SUBJECT and not cfg.filter_subjects and not cfg.filter_subject:
        cfg.filter_subjects = [">"]  # the server wants a filter for this policy
    if policy is DeliverPolicy.BY_START_SEQUENCE:
        if not cfg.opt_start_seq:
            raise errors.InvalidOptionError("deliver_policy 'by_start_sequence' needs opt_start_seq")
    elif cfg.opt_start_seq is not None:
        if policy is not DeliverPolicy.ALL:
            raise errors.InvalidOptionError("opt_start_seq goes with deliver_policy 'by_start_sequence'")
        cfg.deliver_policy = DeliverPolicy.BY_START_SEQUENCE
    if cfg.opt_start_seq is not None:
        at_least("opt_start_seq", cfg.opt_start_seq, 1)
    if policy is DeliverPolicy.BY_START_TIME:
        if cfg.opt_start_time is None:
            raise errors.InvalidOptionError("deliver_policy 'by_start_time' needs opt_start_time")
    elif cfg.opt_start_time is not None:
        if cfg.deliver_policy not in (None, DeliverPolicy.ALL):
            raise errors.InvalidOptionError("opt_start_time goes with deliver_policy 'by_start_time'")
        cfg.deliver_policy = DeliverPolicy.BY_START_TIME


def opt_start_time(value: Any) -> Optional[datetime.datetime]:
    """An ordered consumer's ``opt_start_time`` as an aware datetime (naive means UTC)."""
    if value is None:
        return None
    if not isinstance(value, datetime.datetime):
        raise errors.InvalidOptionError(f"opt_start_time must be a datetime, got {value!r}")
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.timezone.utc)
