"""JetStream API models: nats-py's ``nats.js.api`` classes, extended.

nats-py's dataclasses lack newer consumer fields (per-request limits,
priority groups) and silently drop fields they do not know. The subclasses
here add the missing fields and keep every unknown field (nested ones too) in
``extra``, which ``as_dict()`` sends back, so a get → update round-trip never
erases server settings this library has not heard of.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Dict, FrozenSet, List, Optional, Tuple, Type, TypeVar, cast

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
    "ConsumerPauseResponse",
    "ConsumerResetResponse",
    "PubAck",
    "StoredMsg",
    "Schedule",
    "FastPubAck",
    "AccountInfo",
    "AckPolicy",
    "DeliverPolicy",
    "DiscardPolicy",
    "ReplayPolicy",
    "RetentionPolicy",
    "StorageType",
    "StoreCompression",
    "StreamState",
    "StreamSource",
    "ExternalStream",
    "SubjectTransform",
    "StreamConsumerSource",
    "StreamConsumerLimits",
    "Placement",
    "RePublish",
]

_NS = 1_000_000_000


def parse_utc_iso(text: str) -> datetime.datetime:
    """An RFC 3339 time from the server (nanosecond fraction allowed) as an aware UTC datetime."""
    t = text.strip()
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    main, frac, zone = t, "", ""
    plus = max(t.rfind("+"), t.rfind("-", 19))
    if plus > 18:
        main, zone = t[:plus], t[plus:]
    if "." in main:
        main, frac = main.split(".", 1)
        frac = "." + frac[:6].ljust(6, "0")
    when = datetime.datetime.fromisoformat(main + frac + (zone or "+00:00"))
    return when.astimezone(datetime.timezone.utc)

_ABSENT = object()  # a key the server left out


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


def _copy_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value


_FIELD_NAMES: Dict[type, FrozenSet[str]] = {}
_M = TypeVar("_M", bound="_Model")


@dataclass
class _Model(_api.Base):
    """Parsing shared by the config models (listed before a nats-py base).

    ``from_response`` never mutates its argument (nats-py's does, which got
    nested fields converted twice) and builds nested objects from these
    classes, so unknown keys survive at every level in ``extra``. Durations
    become seconds, times datetimes; ``_wire`` remembers the server's exact
    form of those (and which defaults it left out), and ``as_dict()`` sends
    that back for every value still unchanged, so get → update is exact.
    """

    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _wire: Dict[str, Tuple[Any, Any]] = field(default_factory=dict, repr=False, compare=False)

    _nested: ClassVar[Dict[str, Any]] = {}  # field -> model class
    _durations: ClassVar[Tuple[str, ...]] = ()  # seconds here, nanoseconds on the wire
    _times: ClassVar[Tuple[str, ...]] = ()  # datetime here, RFC 3339 on the wire

    @classmethod
    def _field_names(cls) -> FrozenSet[str]:
        names = _FIELD_NAMES.get(cls)
        if names is None:
            names = _FIELD_NAMES[cls] = frozenset(f.name for f in fields(cls)) - {"extra", "_wire"}
        return names

    @classmethod
    def from_response(cls: Type[_M], resp: Dict[str, Any]) -> _M:
        known = cls._field_names()
        params: Dict[str, Any] = {}
        extra: Dict[str, Any] = {}
        wire: Dict[str, Tuple[Any, Any]] = {}
        for key, value in resp.items():
            if key not in known:
                extra[key] = _copy_json(value)
                continue
            if value is None:
                pass
            elif key in cls._nested:
                sub = cls._nested[key]
                value = [sub.from_response(v) for v in value] if isinstance(value, list) else sub.from_response(value)
            elif key in cls._durations:
                if isinstance(value, list):
                    seconds: Any = [v / _NS for v in value]
                    wire[key] = (list(seconds), list(value))
                else:
                    seconds = value / _NS
                    wire[key] = (seconds, value)
                value = seconds
            elif key in cls._times:
                when = parse_utc_iso(value)
                wire[key] = (when, value)
                value = when
            else:
                value = _copy_json(value)
            params[key] = value
        obj = cls(**params)
        for key in known - resp.keys():
            wire[key] = (getattr(obj, key), _ABSENT)
        obj.extra = extra
        obj._wire = wire
        return obj

    def as_dict(self) -> Dict[str, object]:
        result = super().as_dict()
        result.pop("_wire", None)
        for key in self._durations:
            value = getattr(self, key)
            if value is not None and key in result:  # present: the base decided to send it
                result[key] = [_seconds_to_ns(v) for v in value] if isinstance(value, list) else _seconds_to_ns(value)
        for key, (value, sent) in self._wire.items():
            if getattr(self, key) == value:
                if sent is _ABSENT:
                    result.pop(key, None)
                else:
                    result[key] = _copy_json(sent)
        return _with_extra(result, self.extra)


@dataclass
class ExternalStream(_Model, _api.ExternalStream):
    """Another domain's or account's JetStream API (``api``) and delivery prefix."""


@dataclass
class SubjectTransform(_Model, _api.SubjectTransform):
    """Subject transform ``src`` → ``dest``."""


@dataclass
class StreamConsumerSource(_Model, _api.StreamConsumerSource):
    """Pre-created consumer a source or mirror reads from (ADR-60)."""


@dataclass
class Placement(_Model, _api.Placement):
    """Where a stream's replicas go."""


@dataclass
class RePublish(_Model, _api.RePublish):
    """Republish stored messages from ``src`` to ``dest``."""


@dataclass
class StreamConsumerLimits(_Model, _api.StreamConsumerLimits):
    """Defaults and caps for a stream's consumers; ``inactive_threshold`` is seconds."""

    _durations: ClassVar[Tuple[str, ...]] = ("inactive_threshold",)


@dataclass
class StreamSource(_Model, _api.StreamSource):
    """A stream's source or mirror; ``opt_start_time`` is a datetime."""

    _nested: ClassVar[Dict[str, type]] = {
        "external": ExternalStream,
        "subject_transforms": SubjectTransform,
        "consumer": StreamConsumerSource,
    }
    _times: ClassVar[Tuple[str, ...]] = ("opt_start_time",)


@dataclass
class StreamConfig(_Model, _api.StreamConfig):
    """Stream configuration (nats-py's, keeping unknown server fields in ``extra``).

    Durations (``max_age``, ``duplicate_window``, ``subject_delete_marker_ttl``,
    ``consumer_limits.inactive_threshold``) are seconds. Nested values are
    this module's :class:`StreamSource`, :class:`Placement`, … .
    """

    _nested: ClassVar[Dict[str, type]] = {
        "placement": Placement,
        "mirror": StreamSource,
        "sources": StreamSource,
        "republish": RePublish,
        "subject_transform": SubjectTransform,
        "consumer_limits": StreamConsumerLimits,
    }
    _durations: ClassVar[Tuple[str, ...]] = ("max_age", "duplicate_window", "subject_delete_marker_ttl")


_I = TypeVar("_I", bound="_InfoWithConfig")


class _InfoWithConfig(_api.Base):
    """from_response for info classes: typed ``config``, unknown fields in ``extra``.

    Listed before a nats-py info class; deriving from ``Base`` only tells the
    type checker what ``super()`` is (it adds no dataclass fields)."""

    if TYPE_CHECKING:  # the dataclasses mixing this in declare them
        _config_cls: ClassVar[Type[_Model]]
        config: Any
        extra: Dict[str, Any]

    @classmethod
    def from_response(cls: Type[_I], resp: Dict[str, Any]) -> _I:
        extra = _split_unknown(cls, resp)
        # nats-py converts nested dicts in place: hand it a copy, without the config.
        rest = {k: _copy_json(v) for k, v in resp.items() if k != "config"}
        info = super().from_response(rest)
        config = resp.get("config")
        if isinstance(config, dict):
            config = cls._config_cls.from_response(config)
        info.config = config
        info.extra = extra
        return info

    def as_dict(self) -> Dict[str, object]:
        return _with_extra(super().as_dict(), self.extra)


@dataclass
class StreamInfo(_InfoWithConfig, _api.StreamInfo):
    """Stream info as the server reported it; ``config`` is a :class:`StreamConfig`."""

    _config_cls: ClassVar[Type[_Model]] = StreamConfig
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    if TYPE_CHECKING:  # from_response builds this module's StreamConfig
        config: StreamConfig


@dataclass
class ConsumerConfig(_Model, _api.ConsumerConfig):
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

    _durations: ClassVar[Tuple[str, ...]] = (
        "ack_wait",
        "idle_heartbeat",
        "inactive_threshold",
        "backoff",
        "max_expires",
        "priority_timeout",
    )
    _times: ClassVar[Tuple[str, ...]] = ("opt_start_time", "pause_until")

    def as_dict(self) -> Dict[str, object]:
        result = super().as_dict()
        if isinstance(self.pause_until, datetime.datetime):
            result["pause_until"] = self._to_utc_iso(self.pause_until)
        return result


@dataclass
class ConsumerInfo(_InfoWithConfig, _api.ConsumerInfo):
    """Consumer info as the server reported it; ``config`` is a :class:`ConsumerConfig`.
    ``pause_remaining`` is seconds (as on ConsumerPauseResponse)."""

    _config_cls: ClassVar[Type[_Model]] = ConsumerConfig
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    if TYPE_CHECKING:  # from_response builds this module's ConsumerConfig
        config: ConsumerConfig

    @classmethod
    def from_response(cls, resp: Dict[str, Any]) -> "ConsumerInfo":
        info = super().from_response(resp)
        if isinstance(info.pause_remaining, (int, float)) and not isinstance(info.pause_remaining, bool):
            info.pause_remaining = info.pause_remaining / _NS
        return info

    def as_dict(self) -> Dict[str, object]:
        result = super().as_dict()
        remaining = result.get("pause_remaining")
        if isinstance(remaining, (int, float)) and not isinstance(remaining, bool):
            result["pause_remaining"] = _seconds_to_ns(remaining)
        return result


@dataclass
class ConsumerPauseResponse:
    """The server's answer to a pause or resume: ``paused``, when the pause
    ends (aware UTC datetime; None when resumed) and the seconds left."""

    paused: bool
    pause_until: Optional[datetime.datetime]
    pause_remaining: float

    @classmethod
    def from_response(cls, resp: Dict[str, Any]) -> "ConsumerPauseResponse":
        until = resp.get("pause_until")
        when = parse_utc_iso(until) if until else None
        if when is not None and when.year <= 1:  # Go's zero time: not paused
            when = None
        return cls(bool(resp.get("paused")), when, (resp.get("pause_remaining") or 0) / _NS)


@dataclass
class ConsumerResetResponse:
    """The server's answer to a consumer reset: the consumer's info after it,
    and the stream sequence delivery restarts from."""

    info: ConsumerInfo
    reset_seq: int

    @classmethod
    def from_response(cls, resp: Dict[str, Any]) -> "ConsumerResetResponse":
        rest = {k: v for k, v in resp.items() if k not in ("reset_seq", "type")}
        return cls(ConsumerInfo.from_response(rest), int(resp.get("reset_seq") or 0))


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
        ack = cast("PubAck", super().from_response(resp))  # nats-py builds cls(...): this class
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


@dataclass
class Schedule:
    """A message schedule held in a stream (ADR-51): the last message on its
    ``subject`` with a ``Nats-Schedule`` header. ``schedule`` is that header
    (``@at …``, ``@every …``, cron), ``target`` where it publishes,
    ``ttl`` / ``time_zone`` / ``source`` the optional headers as sent
    (``ttl`` a Go duration like ``"5m"``), ``seq`` and ``time`` (aware UTC)
    where and when it was stored, ``data`` and ``headers`` what it publishes."""

    stream: str
    subject: str
    schedule: str
    target: str
    seq: int
    time: Optional[datetime.datetime]
    data: bytes
    headers: Dict[str, str]
    ttl: Optional[str] = None
    time_zone: Optional[str] = None
    source: Optional[str] = None

    @classmethod
    def from_stored(cls, msg: StoredMsg) -> Optional["Schedule"]:
        """The schedule a stored message holds, or None if it holds none."""
        hdrs = msg.headers or {}
        pattern = hdrs.get("Nats-Schedule")
        if not pattern:
            return None
        return cls(
            msg.stream, msg.subject, pattern, hdrs.get("Nats-Schedule-Target", ""), msg.seq, msg.time, msg.data,
            dict(hdrs), hdrs.get("Nats-Schedule-TTL"), hdrs.get("Nats-Schedule-Time-Zone"), hdrs.get("Nats-Schedule-Source"),
        )  # fmt: skip


@dataclass
class FastPubAck:
    """What ``FastBatch.add()`` returns: ``batch_seq`` is the message's place
    in the batch (from 1), ``ack_seq`` the highest batch sequence the server
    has acknowledged so far (in gap mode "fail": messages 1 to ``ack_seq``
    are stored)."""

    batch_seq: int
    ack_seq: int
