"""The JetStream context: stream, consumer and message management. Publishing
(``_js_publish.py``), the subscribe workflow (``_js_subscribe.py``) and
bucket management (``_js_buckets.py``) are mixed in from modules of their own."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
from enum import Enum
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple, Type, TypeVar, Union, overload

import nats.errors as _nerr
from nats.nuid import NUID

from ._core import direct as _direct
from . import errors, options
from ._js_buckets import Buckets
from ._js_publish import Publishing
from ._js_subscribe import Subscribing
from ._core.message import parse_header_block
from .models import (
    AccountInfo,
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPauseResponse,
    ConsumerResetResponse,
    DeliverPolicy,
    DiscardPolicy,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StoredMsg,
    StreamConfig,
    StreamConsumerLimits,
    StreamInfo,
    parse_utc_iso,
)

if TYPE_CHECKING:  # pragma: no cover
    from ._core.connection import Connection
    from .client import Client
    from .consumer import Consumer
    from .ordered import OrderedConsumer
    from .push import PushConsumer
    from .stream import Stream

__all__ = ["JetStream"]


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


def validate_name(kind: str, name: Any) -> str:
    """ADR-6 names (they become subject tokens and file names)."""
    return options.name(kind, name)


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
            setattr(cfg, name, options.duration(name, value, allow_zero=True, none_means=unlimited))
    limits = getattr(cfg, "consumer_limits", None)
    if isinstance(limits, StreamConsumerLimits) and limits.inactive_threshold is not None:
        options.duration("consumer_limits.inactive_threshold", limits.inactive_threshold, allow_zero=True)
    for name in ("filter_subject", "deliver_subject"):
        value = getattr(cfg, name, None)
        if value:
            options.subject(value, what=name, wildcards=(name == "filter_subject"))
    if isinstance(cfg, ConsumerConfig):
        if cfg.backoff is not None:
            if not isinstance(cfg.backoff, (list, tuple)):
                raise errors.InvalidOptionError(f"backoff must be a list of seconds, got {cfg.backoff!r}")
            cfg.backoff = [options.duration("backoff entry", b, allow_zero=True) for b in cfg.backoff]
        options.priority_config(cfg.priority_policy, cfg.priority_groups, cfg.priority_timeout, cfg.deliver_subject)
        if cfg.idle_heartbeat:
            cfg.idle_heartbeat = options.duration("idle_heartbeat", cfg.idle_heartbeat, minimum=options.MIN_SERVER_HEARTBEAT)
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if isinstance(value, int) and not isinstance(value, bool) and not -options.MAX_INT - 1 <= value <= options.MAX_INT:
            raise errors.InvalidOptionError(f"{f.name} must fit in 64 bits, got {value!r}")
    if getattr(cfg, "metadata", None) is not None:
        cfg.metadata = options.string_map("metadata", cfg.metadata)
    for name, what in (("filter_subjects", "filter_subjects entry"), ("subjects", "stream subject")):
        values = getattr(cfg, name, None)
        if values is None:
            continue
        if not isinstance(values, (list, tuple)):
            raise errors.InvalidOptionError(f"{name} must be a list of subjects, got {values!r}")
        for value in values:
            options.subject(value, what=what, wildcards=True)
    return cfg


class JetStream(Publishing, Subscribing, Buckets):
    """JetStream on one connection: manage streams/consumers, publish.

    ``domain`` selects a JetStream domain (``$JS.<domain>.API``);
    ``api_prefix`` replaces the API prefix outright (ADR-19; exclusive with
    ``domain``). ``timeout`` (seconds, default 5) bounds each API request.
    """

    def __init__(
        self,
        conn: "Connection",
        *,
        client: Optional["Client"] = None,
        domain: Optional[str] = None,
        api_prefix: Optional[str] = None,
        timeout: float = 5.0,
    ) -> None:
        if domain is not None and api_prefix is not None:
            raise errors.InvalidOptionError("domain and api_prefix are mutually exclusive")
        self._timeout = options.duration("timeout", timeout)
        if domain is not None:
            validate_name("domain", domain)
            prefix = f"$JS.{domain}.API"
        elif api_prefix is not None:
            prefix = options.api_prefix(api_prefix)
        else:
            prefix = "$JS.API"
        self._conn = conn
        self._client = client
        self._domain = domain
        self._prefix = prefix
        self._nuid = NUID()

    def __repr__(self) -> str:
        return f"<jetstream_sync.JetStream {self._prefix}>"

    @property
    def client(self) -> "Client":
        """The Client this context was made from."""
        if self._client is None:
            raise errors.InvalidOptionError("this JetStream context was not made by Client.jetstream()")
        return self._client

    @property
    def connection(self) -> "Connection":
        """The connection core (internal: contexts and engines use it)."""
        return self._conn

    @property
    def api_prefix(self) -> str:
        return self._prefix

    @property
    def timeout(self) -> float:
        return self._timeout

    # -- the JSON API -----------------------------------------------------------

    def _api(
        self,
        suffix: str,
        payload: Optional[Dict[str, Any]] = None,
        timeout: Optional[float] = None,
        about: str = "",
    ) -> Dict[str, Any]:
        """One JetStream API request; raises APIError (by err_code) on an error
        reply. ``about`` ("stream 'X'") is named in not-found errors."""
        conn = self._conn
        conn.check()
        t = self._timeout if timeout is None else timeout
        subject = f"{self._prefix}.{suffix}"
        options.control_line(subject, reply_room=conn.reply_room)
        body = b"" if payload is None else json.dumps(payload).encode()
        options.payload_size(len(body), conn.max_payload)
        return conn.run(self._aapi(subject, body, t, about), t + 1.0, confirm_acks="all")

    async def _aapi(self, subject: str, body: bytes, timeout: float, about: str) -> Dict[str, Any]:
        try:
            msg = await self._conn.request(subject, body, timeout)
        except _nerr.NoRespondersError as exc:
            raise errors.JetStreamNotEnabledError(
                f"no JetStream API answered on {self._prefix} (JetStream not enabled, or wrong domain/prefix)"
            ) from exc
        except _nerr.TimeoutError as exc:
            raise errors.TimeoutError(f"JetStream API request {subject} timed out after {timeout}s") from exc
        try:
            resp: Dict[str, Any] = json.loads(msg.data)
        except ValueError as exc:
            raise errors.JetStreamError(f"invalid JetStream API response to {subject}: {msg.data[:200]!r}") from exc
        if "error" in resp:
            err = errors.APIError.from_error(resp["error"])
            if about and isinstance(err, errors.NotFoundError):
                err = type(err)(err.code, err.err_code, f"{err.description}: {about}")
            raise err
        return resp

    def _paged(
        self, suffix: str, key: str, payload: Optional[Dict[str, Any]] = None, about: str = ""
    ) -> Iterator[Any]:
        offset = 0
        while True:
            resp = self._api(suffix, {**(payload or {}), "offset": offset}, about=about)
            items = resp.get(key) or []
            yield from items
            offset += len(items)
            if not items or offset >= int(resp.get("total", 0)):
                return

    # -- streams ----------------------------------------------------------------

    def create_stream(self, config: Optional[StreamConfig] = None, **fields: Any) -> "Stream":
        """Create a stream from a :class:`StreamConfig` and/or its fields as keywords."""
        cfg = build_config(StreamConfig, config, fields)
        name = validate_name("stream", cfg.name)
        return self._stream_handle(self._api(f"STREAM.CREATE.{name}", cfg.as_dict()))

    def update_stream(self, config: Optional[StreamConfig] = None, **fields: Any) -> "Stream":
        """Update a stream's configuration."""
        cfg = build_config(StreamConfig, config, fields)
        name = validate_name("stream", cfg.name)
        return self._stream_handle(self._api(f"STREAM.UPDATE.{name}", cfg.as_dict()))

    def create_or_update_stream(self, config: Optional[StreamConfig] = None, **fields: Any) -> "Stream":
        """Update the stream if it exists, else create it."""
        cfg = build_config(StreamConfig, config, fields)
        try:
            return self.update_stream(cfg)
        except errors.StreamNotFoundError:
            return self.create_stream(cfg)

    def stream(self, name: str) -> "Stream":
        """A handle on an existing stream; raises StreamNotFoundError."""
        return self._stream_handle(self._api(f"STREAM.INFO.{validate_name('stream', name)}", about=f"stream {name!r}"))

    def stream_info(
        self, name: str, *, subjects_filter: Optional[str] = None, deleted_details: bool = False
    ) -> StreamInfo:
        """Info of a stream. ``subjects_filter`` (wildcards allowed) fills
        ``state.subjects`` with the message count per matching subject (all
        pages); ``deleted_details`` fills ``state.deleted`` with the deleted
        sequences."""
        validate_name("stream", name)
        if not isinstance(deleted_details, bool):
            raise errors.InvalidOptionError(f"deleted_details must be a bool, got {deleted_details!r}")
        payload: Dict[str, Any] = {}
        if subjects_filter is not None:
            payload["subjects_filter"] = options.subject(subjects_filter, what="subjects_filter", wildcards=True)
        if deleted_details:
            payload["deleted_details"] = True
        about = f"stream {name!r}"
        resp = self._api(f"STREAM.INFO.{name}", payload or None, about=about)
        subjects = dict((resp.get("state") or {}).get("subjects") or {})
        total = int(resp.get("total") or 0)
        while subjects_filter is not None and len(subjects) < total:  # the server pages the subjects
            page = self._api(f"STREAM.INFO.{name}", {**payload, "offset": len(subjects)}, about=about)
            more = (page.get("state") or {}).get("subjects") or {}
            if not more:
                break
            subjects.update(more)
        if subjects or subjects_filter is not None:  # asked for: {} when nothing matches
            resp.setdefault("state", {})["subjects"] = subjects
        return StreamInfo.from_response(resp)

    def delete_stream(self, name: str) -> None:
        """Delete a stream and all its messages and consumers."""
        self._api(f"STREAM.DELETE.{validate_name('stream', name)}", about=f"stream {name!r}")

    def stream_names(self, subject: Optional[str] = None) -> List[str]:
        """Names of all streams, or of those whose subjects overlap ``subject``."""
        payload = {"subject": options.subject(subject, wildcards=True)} if subject is not None else None
        return list(self._paged("STREAM.NAMES", "streams", payload))

    def streams(self, subject: Optional[str] = None) -> List[StreamInfo]:
        """Info of all streams (or those overlapping ``subject``)."""
        payload = {"subject": options.subject(subject, wildcards=True)} if subject is not None else None
        return [StreamInfo.from_response(s) for s in self._paged("STREAM.LIST", "streams", payload)]

    def _stream_handle(self, resp: Dict[str, Any]) -> "Stream":
        from .stream import Stream

        return Stream(self, StreamInfo.from_response(resp))

    # -- stream data ------------------------------------------------------------

    def purge_stream(
        self, stream: str, subject: Optional[str] = None, seq: Optional[int] = None, keep: Optional[int] = None
    ) -> int:
        """Remove messages of ``stream`` (see :meth:`Stream.purge`); returns how many."""
        if seq is not None and keep is not None:
            raise errors.InvalidOptionError("purge: seq and keep are mutually exclusive")
        payload: Dict[str, Any] = {}
        if subject is not None:
            payload["filter"] = options.subject(subject, wildcards=True)
        if seq is not None:
            payload["seq"] = _positive("seq", seq)
        if keep is not None:
            payload["keep"] = _positive("keep", keep, allow_zero=True)
        resp = self._api(f"STREAM.PURGE.{validate_name('stream', stream)}", payload or None, about=f"stream {stream!r}")
        return int(resp.get("purged", 0))

    def get_msg(
        self,
        stream: str,
        seq: Optional[int] = None,
        last_by_subject: Optional[str] = None,
        *,
        next_by_subject: Optional[str] = None,
        direct: bool = False,
    ) -> StoredMsg:
        """One stored message of ``stream``: by ``seq``, the last on
        ``last_by_subject``, or the first at or after ``seq`` (default 1) on
        ``next_by_subject`` (wildcards allowed). ``direct=True`` reads with
        direct get (ADR-31: any replica answers; the stream needs
        ``allow_direct``). Raises MsgNotFoundError."""
        validate_name("stream", stream)
        if not isinstance(direct, bool):
            raise errors.InvalidOptionError(f"direct must be a bool, got {direct!r}")
        if next_by_subject is not None:
            if last_by_subject is not None:
                raise errors.InvalidOptionError("get_msg: last_by_subject and next_by_subject are exclusive")
            payload: Dict[str, Any] = {
                "seq": 1 if seq is None else _positive("seq", seq),
                "next_by_subj": options.subject(next_by_subject, what="next_by_subject", wildcards=True),
            }
            about = f"next message on {next_by_subject!r} from sequence {payload['seq']} in stream {stream!r}"
        elif (seq is None) == (last_by_subject is None):
            raise errors.InvalidOptionError("get_msg: give exactly one of seq or last_by_subject")
        elif seq is not None:
            payload = {"seq": _positive("seq", seq)}
            about = f"sequence {seq} of stream {stream!r}"
        else:
            payload = {"last_by_subj": options.subject(last_by_subject, what="last_by_subject", wildcards=True)}
            about = f"last message on {last_by_subject!r} in stream {stream!r}"
        if direct:
            t = self._timeout
            try:
                return self._conn.run(_direct.get_one(self._conn, self._direct_subject(stream), payload, t, about), t + 1.0)
            except errors.NoRespondersError as exc:
                raise _no_direct(stream) from exc
        raw = self._api(f"STREAM.MSG.GET.{stream}", payload, about=about)["message"]
        headers = None
        if raw.get("hdrs"):
            block = base64.b64decode(raw["hdrs"])
            headers = parse_header_block(block)
        when = raw.get("time")
        return StoredMsg(
            stream=stream,
            subject=raw["subject"],
            seq=int(raw["seq"]),
            data=base64.b64decode(raw.get("data") or b""),
            headers=headers,
            time=parse_utc_iso(when) if when else None,
        )

    def get_msgs(
        self,
        stream: str,
        *,
        seq: Optional[int] = None,
        next_by_subject: Optional[str] = None,
        start_time: Optional[datetime.datetime] = None,
        batch: int = 100,
        max_bytes: Optional[int] = None,
    ) -> List[StoredMsg]:
        """Up to ``batch`` stored messages in one direct-get request (ADR-31,
        the stream needs ``allow_direct``): from ``seq`` (default 1) or
        ``start_time``, only those on ``next_by_subject`` if given, at most
        ``max_bytes``. An empty list when there are none."""
        body: Dict[str, Any] = {"batch": _positive("batch", batch)}
        if seq is not None and start_time is not None:
            raise errors.InvalidOptionError("get_msgs: seq and start_time are exclusive")
        if start_time is not None:
            body["start_time"] = options.rfc3339(_aware("start_time", start_time))
        else:
            body["seq"] = 1 if seq is None else _positive("seq", seq)
        if next_by_subject is not None:
            body["next_by_subj"] = options.subject(next_by_subject, what="next_by_subject", wildcards=True)
        if max_bytes is not None:
            body["max_bytes"] = _positive("max_bytes", max_bytes)
        return self._direct_batch(stream, body, body["batch"])

    def get_last_msgs(
        self,
        stream: str,
        subjects: List[str],
        *,
        up_to_seq: Optional[int] = None,
        up_to_time: Optional[datetime.datetime] = None,
        batch: Optional[int] = None,
    ) -> List[StoredMsg]:
        """The last message on each of ``subjects`` (wildcards allowed) in one
        direct-get request (ADR-31 multi-last; the stream needs
        ``allow_direct``), as of ``up_to_seq`` / ``up_to_time`` if given."""
        if isinstance(subjects, str) or not isinstance(subjects, (list, tuple)) or not subjects:
            raise errors.InvalidOptionError(f"subjects must be a non-empty list of subjects, got {subjects!r}")
        body: Dict[str, Any] = {"multi_last": [options.subject(x, wildcards=True) for x in subjects]}
        if up_to_seq is not None and up_to_time is not None:
            raise errors.InvalidOptionError("get_last_msgs: up_to_seq and up_to_time are exclusive")
        if up_to_seq is not None:
            body["up_to_seq"] = _positive("up_to_seq", up_to_seq)
        if up_to_time is not None:
            body["up_to_time"] = options.rfc3339(_aware("up_to_time", up_to_time))
        if batch is not None:
            body["batch"] = _positive("batch", batch)
        return self._direct_batch(stream, body, batch or 1 << 30)

    def _direct_subject(self, stream: str) -> str:
        return f"{self._prefix}.DIRECT.GET.{validate_name('stream', stream)}"

    def _direct_batch(self, stream: str, body: Dict[str, Any], limit: int) -> List[StoredMsg]:
        subject = self._direct_subject(stream)
        t = self._timeout
        try:
            return self._conn.run(_direct.get_batch(self._conn, subject, body, t, limit), t + 1.0)
        except errors.NoRespondersError as exc:
            raise _no_direct(stream) from exc

    def delete_msg(self, stream: str, seq: int, erase: bool = False) -> None:
        """Delete one message of ``stream``; raises MsgNotFoundError if it is not there."""
        payload = {"seq": _positive("seq", seq), "no_erase": not erase}
        about = f"sequence {seq} of stream {stream!r}"
        try:
            self._api(f"STREAM.MSG.DELETE.{validate_name('stream', stream)}", payload, about=about)
        except errors.APIError as exc:
            # The server reports a missing sequence as a failed delete ("no message found"
            # or "stream store EOF"), not as not-found.
            if exc.err_code == errors.ErrorCode.STREAM_MSG_DELETE_FAILED and _means_missing(exc.description):
                raise errors.MsgNotFoundError(404, errors.ErrorCode.MSG_NOT_FOUND, f"no message found: {about}") from exc
            raise

    # -- consumers --------------------------------------------------------------

    # A pull Consumer and a PushConsumer are different handles, each made by
    # its own calls (nats.go's CreateConsumer / CreatePushConsumer), so every
    # call has one return type. The deliver_subject keyword of create_consumer
    # & co. (how push consumers were made before the push calls) still makes a
    # PushConsumer: the overloads type that form.

    @overload
    def create_consumer(
        self, stream: str, config: Optional[ConsumerConfig] = None, *, deliver_subject: str, **fields: Any
    ) -> "PushConsumer": ...
    @overload
    def create_consumer(
        self, stream: str, config: Optional[ConsumerConfig] = None, *, deliver_subject: None = None, **fields: Any
    ) -> "Consumer": ...
    def create_consumer(
        self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any
    ) -> "Union[Consumer, PushConsumer]":
        """Create a pull consumer; fails (APIError 10148) if one with that name
        but a different config exists. Without ``name``/``durable_name`` it is
        ephemeral, with a generated name. A config with a ``deliver_subject``
        is refused (InvalidOptionError: use :meth:`create_push_consumer`),
        except given as the ``deliver_subject=`` keyword, which makes and
        returns a PushConsumer."""
        return self._upsert_either(stream, config, fields, "create")

    @overload
    def update_consumer(
        self, stream: str, config: Optional[ConsumerConfig] = None, *, deliver_subject: str, **fields: Any
    ) -> "PushConsumer": ...
    @overload
    def update_consumer(
        self, stream: str, config: Optional[ConsumerConfig] = None, *, deliver_subject: None = None, **fields: Any
    ) -> "Consumer": ...
    def update_consumer(
        self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any
    ) -> "Union[Consumer, PushConsumer]":
        """Update an existing pull consumer; fails if it does not exist. Push
        consumers: :meth:`update_push_consumer` (as :meth:`create_consumer`)."""
        return self._upsert_either(stream, config, fields, "update")

    @overload
    def create_or_update_consumer(
        self, stream: str, config: Optional[ConsumerConfig] = None, *, deliver_subject: str, **fields: Any
    ) -> "PushConsumer": ...
    @overload
    def create_or_update_consumer(
        self, stream: str, config: Optional[ConsumerConfig] = None, *, deliver_subject: None = None, **fields: Any
    ) -> "Consumer": ...
    def create_or_update_consumer(
        self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any
    ) -> "Union[Consumer, PushConsumer]":
        """Update the pull consumer if it exists, else create it (as :meth:`create_consumer`)."""
        return self._upsert_either(stream, config, fields, "")

    def create_push_consumer(self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any) -> "PushConsumer":
        """Create a push consumer: its config needs a ``deliver_subject``
        (InvalidOptionError otherwise); otherwise as :meth:`create_consumer`."""
        return self._push_handle(self._upsert(stream, config, fields, "create", push=True))

    def update_push_consumer(self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any) -> "PushConsumer":
        """Update an existing push consumer; fails if it does not exist."""
        return self._push_handle(self._upsert(stream, config, fields, "update", push=True))

    def create_or_update_push_consumer(
        self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any
    ) -> "PushConsumer":
        """Update the push consumer if it exists, else create it."""
        return self._push_handle(self._upsert(stream, config, fields, "", push=True))

    def _upsert_either(
        self, stream: str, config: Optional[ConsumerConfig], fields: Dict[str, Any], action: str
    ) -> "Union[Consumer, PushConsumer]":
        """The pull calls: push only for the deliver_subject keyword, as their overloads say."""
        if fields.get("deliver_subject") is not None:
            return self._push_handle(self._upsert(stream, config, fields, action, push=True))
        return self._pull_handle(self._upsert(stream, config, fields, action, push=False))

    def _upsert(
        self, stream: str, config: Optional[ConsumerConfig], fields: Dict[str, Any], action: str, push: bool
    ) -> ConsumerInfo:
        validate_name("stream", stream)
        cfg = build_config(ConsumerConfig, config, fields)
        if action == "update" and not (cfg.name or cfg.durable_name):
            raise errors.InvalidOptionError("update_consumer needs the consumer's name")
        verb = action or "create_or_update"
        if push and not cfg.deliver_subject:
            raise errors.InvalidOptionError(f"a push consumer needs a deliver_subject; for a pull consumer use {verb}_consumer()")
        if not push and cfg.deliver_subject:
            raise errors.InvalidOptionError(
                f"the config has deliver_subject {cfg.deliver_subject!r}, which makes a push consumer: use {verb}_push_consumer()"
            )
        subject, payload = self.consumer_request(stream, cfg, action)
        return ConsumerInfo.from_response(self._api(subject, payload, about=f"stream {stream!r}"))

    def consumer_request(self, stream: str, cfg: ConsumerConfig, action: str = "") -> Tuple[str, Dict[str, Any]]:
        """The API subject suffix and body that create/update consumer ``cfg``
        (validated; a name is generated when it has none)."""
        if cfg.name and cfg.durable_name and cfg.name != cfg.durable_name:
            raise errors.InvalidOptionError("name and durable_name differ; give one of them")
        if cfg.filter_subject and cfg.filter_subjects:
            raise errors.InvalidOptionError("filter_subject and filter_subjects are mutually exclusive")
        name = cfg.name or cfg.durable_name
        if not name:
            name = cfg.name = self._nuid.next().decode()
        validate_name("consumer", name)
        subject = f"CONSUMER.CREATE.{stream}.{name}"
        if cfg.filter_subject:
            subject += f".{cfg.filter_subject}"
        payload: Dict[str, Any] = {"stream_name": stream, "config": cfg.as_dict()}
        if action:
            payload["action"] = action
        return subject, payload

    async def arequest(self, suffix: str, payload: Optional[Dict[str, Any]] = None, about: str = "") -> Dict[str, Any]:
        """Loop thread only: one JetStream API request (as the blocking calls
        make), for engines that manage consumers while they run."""
        body = b"" if payload is None else json.dumps(payload).encode()
        return await self._aapi(f"{self._prefix}.{suffix}", body, self._timeout, about)

    def consumer(self, stream: str, name: str) -> "Consumer":
        """A handle on an existing pull consumer; raises ConsumerNotFoundError,
        or ConsumerPushBasedError when it has a deliver subject (use
        :meth:`push_consumer` for that one)."""
        info = self.consumer_info(stream, name)
        deliver = info.config.deliver_subject if info.config is not None else None
        if deliver:
            raise errors.ConsumerPushBasedError(
                409, f"Consumer is push based: {stream}/{name} delivers to {deliver!r}; use push_consumer() for its handle"
            )
        return self._pull_handle(info)

    def push_consumer(self, stream: str, name: str) -> "PushConsumer":
        """A handle on an existing push consumer; raises ConsumerNotFoundError,
        or ConsumerPullBasedError when it has no deliver subject (use
        :meth:`consumer` for that one)."""
        info = self.consumer_info(stream, name)
        if info.config is None or not info.config.deliver_subject:
            raise errors.ConsumerPullBasedError(
                f"consumer {stream}/{name} is pull based (it has no deliver subject): use consumer() for its handle"
            )
        return self._push_handle(info)

    def ordered_consumer(self, stream: str, **config: Any) -> "OrderedConsumer":
        """An ordered consumer on ``stream`` (which must exist: StreamNotFoundError
        otherwise); options as :meth:`Stream.ordered_consumer`."""
        from .ordered import OrderedConsumer

        oc = OrderedConsumer(self, stream, **config)  # validates before asking the server
        self.stream_info(stream)
        return oc

    def consumer_info(self, stream: str, name: str) -> ConsumerInfo:
        return ConsumerInfo.from_response(self._consumer_info_raw(stream, name))

    def _consumer_info_raw(self, stream: str, name: str) -> Dict[str, Any]:
        about = f"consumer {name!r} of stream {stream!r}"
        return self._api(f"CONSUMER.INFO.{validate_name('stream', stream)}.{validate_name('consumer', name)}", about=about)

    def delete_consumer(self, stream: str, name: str) -> None:
        about = f"consumer {name!r} of stream {stream!r}"
        self._api(f"CONSUMER.DELETE.{validate_name('stream', stream)}.{validate_name('consumer', name)}", about=about)

    def consumer_names(self, stream: str) -> List[str]:
        return list(self._paged(f"CONSUMER.NAMES.{validate_name('stream', stream)}", "consumers", about=f"stream {stream!r}"))

    def consumers(self, stream: str) -> List[ConsumerInfo]:
        items = self._paged(f"CONSUMER.LIST.{validate_name('stream', stream)}", "consumers", about=f"stream {stream!r}")
        return [ConsumerInfo.from_response(c) for c in items]

    # -- consumer lifecycle (ADR-42 pins, pause, reset) ----------------------------

    def pause_consumer(
        self, stream: str, name: str, until: Union[datetime.datetime, float]
    ) -> ConsumerPauseResponse:
        """Pause a consumer until ``until`` (an aware datetime, or seconds from
        now): it delivers nothing meanwhile; pulls wait (server 2.11+)."""
        when = options.pause_until(until)
        resp = self._consumer_op("PAUSE", stream, name, {"pause_until": options.rfc3339(when)}, "2.11")
        return ConsumerPauseResponse.from_response(resp)

    def resume_consumer(self, stream: str, name: str) -> ConsumerPauseResponse:
        """Resume a paused consumer now (server 2.11+). The server serves
        pulls that were already waiting at its next wake-up for them (their
        next idle heartbeat, a new message, or a new pull), not at once."""
        return ConsumerPauseResponse.from_response(self._consumer_op("PAUSE", stream, name, None, "2.11"))

    def reset_consumer(self, stream: str, name: str, seq: Optional[int] = None) -> ConsumerResetResponse:
        """Move a consumer back to its ack floor, or to stream sequence ``seq``
        (not below its configured start); what was delivered and not acked is
        forgotten and delivered again from there (server 2.14+)."""
        payload = None if seq is None else {"seq": _positive("seq", seq)}
        return ConsumerResetResponse.from_response(self._consumer_op("RESET", stream, name, payload, "2.14"))

    def unpin_consumer(self, stream: str, name: str, group: str) -> None:
        """Release the pin of priority ``group`` of a pinned_client consumer;
        the server pins the next puller (server 2.11+)."""
        self._consumer_op("UNPIN", stream, name, {"group": options.group_name(group)}, "2.11")

    def _consumer_op(
        self, verb: str, stream: str, name: str, payload: Optional[Dict[str, Any]], since: str
    ) -> Dict[str, Any]:
        """``$JS.API.CONSUMER.<verb>.<stream>.<name>``. Neither a server older
        than ``since`` nor (for RESET) a missing consumer answers: after a
        timeout, ask for the consumer's info to tell the two apart."""
        about = f"consumer {name!r} of stream {stream!r}"
        subject = f"CONSUMER.{verb}.{validate_name('stream', stream)}.{validate_name('consumer', name)}"
        try:
            return self._api(subject, payload, about=about)
        except errors.TimeoutError as exc:
            self._consumer_info_raw(stream, name)  # raises ConsumerNotFoundError if that was why
            raise errors.TimeoutError(
                f"{exc}: CONSUMER.{verb} needs nats-server {since} or newer (older servers do not answer it)"
            ) from exc

    def _pull_handle(self, info: ConsumerInfo) -> "Consumer":
        from .consumer import Consumer

        return Consumer(self, info)

    def _push_handle(self, info: ConsumerInfo) -> "PushConsumer":
        from .push import PushConsumer

        return PushConsumer(self, info)

    def account_info(self) -> AccountInfo:
        """Usage and limits of this account's JetStream."""
        info: AccountInfo = AccountInfo.from_response(self._api("INFO"))  # nats-py leaves it unannotated
        return info

def _positive(name: str, value: Any, allow_zero: bool = False) -> int:
    return options.count(name, value, allow_zero=allow_zero)



def _no_direct(stream: str) -> errors.NoRespondersError:
    return errors.NoRespondersError(f"no direct get for stream {stream!r}: it does not exist or lacks allow_direct")


def _aware(name: str, value: Any) -> datetime.datetime:
    if not isinstance(value, datetime.datetime) or value.tzinfo is None:
        raise errors.InvalidOptionError(f"{name} must be an aware datetime, got {value!r}")
    return value


def _means_missing(description: str) -> bool:
    d = description.lower()
    return "not found" in d or "no message" in d or "eof" in d
