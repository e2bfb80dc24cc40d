"""JetStream API models: nats-py's ``nats.js.api`` classes, extended.

nats-py's dataclasses lack newer consumer fields (per-request limits,
priority groups) and silently drop fields they do not know. The subclasses
here add the missing fields and keep every unknown top-level field in
``extra``, which ``as_dict()`` sends back, so a get → update round-trip never
erases server settings this library has not heard of.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Dict, List, Optional

from nats.js import api as _api

# Re-exported unchanged: nothing to add.
from nats.js.api import (  # noqa: F401
    AccountInfo,
    AckPolicy,
    DeliverPolicy,
    DiscardPolicy,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StreamState,
)

__all__ = [
    "StreamConfig",
    "StreamInfo",
    "ConsumerConfig",
    "ConsumerInfo",
    "PubAck",
    "StoredMsg",
    "AccountInfo",
    "AckPolicy",
    "DeliverPolicy",
    "DiscardPolicy",
    "ReplayPolicy",
    "RetentionPolicy",
    "StorageType",
    "StoreCompression",
    "StreamState",
]

_NS = 1_000_000_000


def _split_unknown(cls: type, resp: Dict[str, Any]) -> Dict[str, Any]:
    known = {f.name for f in fields(cls)}
    return {k: v for k, v in resp.items() if k not in known}


def _with_extra(result: Dict[str, Any], extra: Dict[str, Any]) -> Dict[str, Any]:
    result.pop("extra", None)
    for key, value in extra.items():
        result.setdefault(key, value)
    return result


def _seconds_to_ns(value: Optional[float]) -> Optional[int]:
    return None if value is None else int(round(value * _NS))


@dataclass
class StreamConfig(_api.StreamConfig):
    """Stream configuration (nats-py's, keeping unknown server fields in ``extra``).

    Durations (``max_age``, ``duplicate_window``) are seconds.
    """

    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_response(cls, resp: Dict[str, Any]) -> "StreamConfig":
        extra = _split_unknown(cls, resp)
        cfg = super().from_response(resp)
        cfg.extra = extra
        return cfg

    def as_dict(self) -> Dict[str, object]:
        return _with_extra(super().as_dict(), self.extra)


class _InfoWithConfig:
    """from_response for info classes: typed ``config``, unknown fields in ``extra``."""

    @classmethod
    def from_response(cls, resp: Dict[str, Any]) -> Any:
        extra = _split_unknown(cls, resp)
        config = resp.get("config")
        # The parent converts a config dict in place; give it a copy.
        info = super().from_response({**resp, "config": dict(config or {})})  # type: ignore[misc]
        if isinstance(config, dict):
            info.config = cls._config_cls.from_response(config)  # type: ignore[attr-defined]
        info.extra = extra
        return info


@dataclass
class StreamInfo(_InfoWithConfig, _api.StreamInfo):
    """Stream info as the server reported it; ``config`` is a :class:`StreamConfig`."""

    _config_cls: ClassVar[type] = StreamConfig
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass
class ConsumerConfig(_api.ConsumerConfig):
    """Consumer configuration: nats-py's plus the fields it lacks.

    Durations are seconds: ``ack_wait``, ``inactive_threshold``,
    ``max_expires`` (longest pull ``expires`` the server accepts) and
    ``priority_timeout`` (pinned-client TTL). ``max_batch`` / ``max_bytes``
    cap a single pull request. ``priority_groups`` / ``priority_policy``
    (``"overflow"``, ``"pinned_client"``, ``"prioritized"``) are ADR-42.
    ``ack_policy`` defaults to explicit.
    """

    max_batch: Optional[int] = None
    max_expires: Optional[float] = None
    max_bytes: Optional[int] = None
    priority_groups: Optional[List[str]] = None
    priority_policy: Optional[str] = None
    priority_timeout: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_response(cls, resp: Dict[str, Any]) -> "ConsumerConfig":
        extra = _split_unknown(cls, resp)
        for key in ("max_expires", "priority_timeout"):
            if resp.get(key) is not None:
                resp[key] = resp[key] / _NS
        cfg = super().from_response(resp)
        cfg.extra = extra
        return cfg

    def as_dict(self) -> Dict[str, object]:
        result = super().as_dict()
        for key in ("max_expires", "priority_timeout"):
            if result.get(key) is not None:
                result[key] = _seconds_to_ns(result[key])  # type: ignore[arg-type]
        if isinstance(self.pause_until, datetime.datetime):
            result["pause_until"] = self._to_utc_iso(self.pause_until)
        return _with_extra(result, self.extra)


@dataclass
class ConsumerInfo(_InfoWithConfig, _api.ConsumerInfo):
    """Consumer info as the server reported it; ``config`` is a :class:`ConsumerConfig`."""

    _config_cls: ClassVar[type] = ConsumerConfig
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


_PLAIN_ACK_KEYS = frozenset({"stream", "seq", "domain", "duplicate"})


@dataclass
class PubAck(_api.PubAck):
    """The server's acknowledgement of a JetStream publish.

    ``duplicate`` is True when the stream's duplicate window already held a
    message with the same ``msg_id`` (nothing new was stored).
    """

    duplicate: bool = False

    @classmethod
    def from_response(cls, resp: Dict[str, Any]) -> "PubAck":
        if resp.keys() <= _PLAIN_ACK_KEYS:  # the common case, without dataclass introspection
            return cls(resp["stream"], resp["seq"], resp.get("domain"), bool(resp.get("duplicate")))
        ack = super().from_response(resp)
        ack.duplicate = bool(ack.duplicate)
        return ack


@dataclass
class StoredMsg:
    """A message read directly from a stream (``Stream.get_msg``)."""

    stream: str
    subject: str
    seq: int
    data: bytes
    headers: Optional[Dict[str, str]]
    time: Optional[datetime.datetime]
