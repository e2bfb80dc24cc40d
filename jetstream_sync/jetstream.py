"""The JetStream context: stream and consumer management, publishing."""

from __future__ import annotations

import base64
import concurrent.futures
import dataclasses
import json
import re
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Type, TypeVar, Union

import nats.errors as _nerr
from nats.aio.client import Client as _NatsClient
from nats.nuid import NUID

from . import errors
from ._publish import AsyncPublisher, check_subject, publish_headers, publish_with_retry
from .client import _as_bytes, _check_timeout
from .models import (
    AccountInfo,
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    DiscardPolicy,
    PubAck,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoredMsg,
    StoreCompression,
    StreamConfig,
    StreamInfo,
)

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client
    from .consumer import Consumer
    from .stream import Stream

__all__ = ["JetStream"]

_C = TypeVar("_C", StreamConfig, ConsumerConfig)
# ADR-6: names become subject tokens and file names.
_BAD_NAME = re.compile(r"[.*>\s/\\\x00-\x1f\x7f]")
_ENUMS: Dict[str, type] = {
    "ack_policy": AckPolicy,
    "deliver_policy": DeliverPolicy,
    "replay_policy": ReplayPolicy,
    "retention": RetentionPolicy,
    "storage": StorageType,
    "discard": DiscardPolicy,
    "compression": StoreCompression,
}
_DURATIONS = ("ack_wait", "inactive_threshold", "max_expires", "priority_timeout", "max_age", "duplicate_window")


def validate_name(kind: str, name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise errors.InvalidOptionError(f"{kind} name is required")
    if _BAD_NAME.search(name):
        raise errors.InvalidOptionError(
            f"invalid {kind} name {name!r}: no '.', '*', '>', whitespace or path separators allowed"
        )
    return name


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
                allowed = ", ".join(repr(e.value) for e in enum)  # type: ignore[attr-defined]
                raise errors.InvalidOptionError(f"{name} must be one of {allowed}, got {value!r}") from None
    for name in _DURATIONS:
        value = getattr(cfg, name, None)
        if value is not None and (not isinstance(value, (int, float)) or value < 0):
            raise errors.InvalidOptionError(f"{name} must be a duration in seconds >= 0, got {value!r}")
    return cfg


class JetStream:
    """JetStream on one connection: manage streams/consumers, publish.

    ``domain`` selects a JetStream domain (``$JS.<domain>.API``);
    ``api_prefix`` replaces the API prefix outright (ADR-19; exclusive with
    ``domain``). ``timeout`` (seconds, default 5) bounds each API request.
    """

    def __init__(
        self, client: "Client", *, domain: Optional[str] = None, api_prefix: Optional[str] = None, timeout: float = 5.0
    ) -> None:
        if domain and api_prefix:
            raise errors.InvalidOptionError("domain and api_prefix are mutually exclusive")
        _check_timeout(timeout)
        if domain is not None:
            validate_name("domain", domain)
        self._client = client
        self._timeout = float(timeout)
        self._domain = domain
        prefix = api_prefix.rstrip(".") if api_prefix else (f"$JS.{domain}.API" if domain else "$JS.API")
        self._prefix = prefix
        self._publisher: Optional[AsyncPublisher] = None
        self._nuid = NUID()

    @property
    def client(self) -> "Client":
        return self._client

    @property
    def api_prefix(self) -> str:
        return self._prefix

    @property
    def timeout(self) -> float:
        return self._timeout

    # -- the JSON API -----------------------------------------------------------

    def _api(self, suffix: str, payload: Optional[Dict[str, Any]] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
        """One JetStream API request; raises APIError (by err_code) on an error reply."""
        self._client._check_open()
        t = self._timeout if timeout is None else timeout
        return self._client._run(self._aapi(suffix, payload, t), t + 1.0)  # type: ignore[no-any-return]

    async def _aapi(self, suffix: str, payload: Optional[Dict[str, Any]], timeout: float) -> Dict[str, Any]:
        nc: _NatsClient = self._client._nc
        body = b"" if payload is None else json.dumps(payload).encode()
        subject = f"{self._prefix}.{suffix}"
        try:
            msg = await nc.request(subject, body, timeout=timeout)
        except _nerr.NoRespondersError:
            raise errors.JetStreamNotEnabledError(
                f"no JetStream API answered on {self._prefix} (JetStream not enabled, or wrong domain/prefix)"
            ) from None
        except _nerr.TimeoutError:
            raise errors.TimeoutError(f"JetStream API request {subject} timed out after {timeout}s") from None
        try:
            resp = json.loads(msg.data)
        except ValueError:
            raise errors.JetStreamError(f"invalid JetStream API response to {subject}: {msg.data[:200]!r}") from None
        if "error" in resp:
            raise errors.APIError.from_error(resp["error"])
        return resp  # type: ignore[no-any-return]

    def _paged(self, suffix: str, key: str, payload: Optional[Dict[str, Any]] = None) -> Iterator[Any]:
        offset = 0
        while True:
            resp = self._api(suffix, {**(payload or {}), "offset": offset})
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

    def stream(self, name: str) -> "Stream":
        """A handle on an existing stream; raises StreamNotFoundError."""
        return self._stream_handle(self._api(f"STREAM.INFO.{validate_name('stream', name)}"))

    def stream_info(self, name: str) -> StreamInfo:
        return StreamInfo.from_response(self._api(f"STREAM.INFO.{validate_name('stream', name)}"))

    def delete_stream(self, name: str) -> None:
        """Delete a stream and all its messages and consumers."""
        self._api(f"STREAM.DELETE.{validate_name('stream', name)}")

    def stream_names(self, subject: Optional[str] = None) -> List[str]:
        """Names of all streams, or of those whose subjects overlap ``subject``."""
        payload = {"subject": subject} if subject else None
        return list(self._paged("STREAM.NAMES", "streams", payload))

    def streams(self, subject: Optional[str] = None) -> List[StreamInfo]:
        """Info of all streams (or those overlapping ``subject``)."""
        payload = {"subject": subject} if subject else None
        return [StreamInfo.from_response(s) for s in self._paged("STREAM.LIST", "streams", payload)]

    def _stream_handle(self, resp: Dict[str, Any]) -> "Stream":
        from .stream import Stream

        return Stream(self, StreamInfo.from_response(resp))

    # -- stream data ------------------------------------------------------------

    def _purge(self, stream: str, subject: Optional[str], seq: Optional[int], keep: Optional[int]) -> int:
        if seq is not None and keep is not None:
            raise errors.InvalidOptionError("purge: seq and keep are mutually exclusive")
        payload: Dict[str, Any] = {}
        if subject:
            payload["filter"] = subject
        if seq is not None:
            payload["seq"] = _positive("seq", seq)
        if keep is not None:
            payload["keep"] = _positive("keep", keep, allow_zero=True)
        resp = self._api(f"STREAM.PURGE.{validate_name('stream', stream)}", payload or None)
        return int(resp.get("purged", 0))

    def _get_msg(self, stream: str, seq: Optional[int], last_by_subject: Optional[str]) -> StoredMsg:
        if (seq is None) == (last_by_subject is None):
            raise errors.InvalidOptionError("get_msg: give exactly one of seq or last_by_subject")
        payload = {"seq": _positive("seq", seq)} if seq is not None else {"last_by_subj": last_by_subject}
        raw = self._api(f"STREAM.MSG.GET.{validate_name('stream', stream)}", payload)["message"]
        headers = None
        if raw.get("hdrs"):
            block = base64.b64decode(raw["hdrs"])
            headers = _NatsClient._parse_header_lines(block[block.find(b"\r\n") + 2 :]) or None
        when = raw.get("time")
        return StoredMsg(
            stream=stream,
            subject=raw["subject"],
            seq=int(raw["seq"]),
            data=base64.b64decode(raw.get("data") or b""),
            headers=headers,
            time=StreamInfo._parse_utc_iso(when) if when else None,
        )

    def _delete_msg(self, stream: str, seq: int, erase: bool) -> None:
        payload = {"seq": _positive("seq", seq), "no_erase": not erase}
        self._api(f"STREAM.MSG.DELETE.{validate_name('stream', stream)}", payload)

    # -- consumers --------------------------------------------------------------

    def create_consumer(self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any) -> "Consumer":
        """Create a consumer; fails (APIError 10148) if one with that name but a
        different config exists. Without ``name``/``durable_name`` it is
        ephemeral, with a generated name."""
        return self._upsert_consumer(stream, config, fields, "create")

    def update_consumer(self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any) -> "Consumer":
        """Update an existing consumer; fails if it does not exist."""
        return self._upsert_consumer(stream, config, fields, "update")

    def create_or_update_consumer(
        self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any
    ) -> "Consumer":
        return self._upsert_consumer(stream, config, fields, "")

    def _upsert_consumer(
        self, stream: str, config: Optional[ConsumerConfig], fields: Dict[str, Any], action: str
    ) -> "Consumer":
        validate_name("stream", stream)
        cfg = build_config(ConsumerConfig, config, fields)
        if cfg.name and cfg.durable_name and cfg.name != cfg.durable_name:
            raise errors.InvalidOptionError("name and durable_name differ; give one of them")
        if cfg.filter_subject and cfg.filter_subjects:
            raise errors.InvalidOptionError("filter_subject and filter_subjects are mutually exclusive")
        name = cfg.name or cfg.durable_name
        if not name:
            if action == "update":
                raise errors.InvalidOptionError("update_consumer needs the consumer's name")
            name = cfg.name = self._nuid.next().decode()
        validate_name("consumer", name)
        subject = f"CONSUMER.CREATE.{stream}.{name}"
        if cfg.filter_subject:
            subject += f".{cfg.filter_subject}"
        payload: Dict[str, Any] = {"stream_name": stream, "config": cfg.as_dict()}
        if action:
            payload["action"] = action
        return self._consumer_handle(self._api(subject, payload))

    def consumer(self, stream: str, name: str) -> "Consumer":
        """A handle on an existing consumer; raises ConsumerNotFoundError."""
        return self._consumer_handle(self._consumer_info_raw(stream, name))

    def consumer_info(self, stream: str, name: str) -> ConsumerInfo:
        return ConsumerInfo.from_response(self._consumer_info_raw(stream, name))

    def _consumer_info_raw(self, stream: str, name: str) -> Dict[str, Any]:
        return self._api(f"CONSUMER.INFO.{validate_name('stream', stream)}.{validate_name('consumer', name)}")

    def delete_consumer(self, stream: str, name: str) -> None:
        self._api(f"CONSUMER.DELETE.{validate_name('stream', stream)}.{validate_name('consumer', name)}")

    def consumer_names(self, stream: str) -> List[str]:
        return list(self._paged(f"CONSUMER.NAMES.{validate_name('stream', stream)}", "consumers"))

    def consumers(self, stream: str) -> List[ConsumerInfo]:
        items = self._paged(f"CONSUMER.LIST.{validate_name('stream', stream)}", "consumers")
        return [ConsumerInfo.from_response(c) for c in items]

    def _consumer_handle(self, resp: Dict[str, Any]) -> "Consumer":
        from .consumer import Consumer

        return Consumer(self, ConsumerInfo.from_response(resp))

    def account_info(self) -> AccountInfo:
        """Usage and limits of this account's JetStream."""
        return AccountInfo.from_response(self._api("INFO"))

    # -- publishing -------------------------------------------------------------

    def publish(
        self,
        subject: str,
        data: Union[bytes, str] = b"",
        *,
        headers: Optional[Dict[str, str]] = None,
        msg_id: Optional[str] = None,
        expected_stream: Optional[str] = None,
        expected_last_seq: Optional[int] = None,
        expected_last_subject_seq: Optional[int] = None,
        expected_last_msg_id: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> PubAck:
        """Publish to a stream and wait for its acknowledgement.

        ``msg_id`` sets ``Nats-Msg-Id`` (a repeat within the stream's duplicate
        window returns a PubAck with ``duplicate=True``); the ``expected_*``
        arguments set the ``Nats-Expected-*`` headers, and a mismatch raises
        APIError. A "no responders" reply is retried twice (ADR-22).
        """
        self._client._check_open()
        t = self._timeout if timeout is None else timeout
        _check_timeout(t)
        hdrs = publish_headers(
            headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq, expected_last_msg_id
        )
        payload = _as_bytes(data)
        coro = publish_with_retry(self._client, subject, payload, hdrs, t)
        return self._client._run(coro, (t + 0.5) * 3)  # type: ignore[no-any-return]

    def publish_async(
        self,
        subject: str,
        data: Union[bytes, str] = b"",
        *,
        headers: Optional[Dict[str, str]] = None,
        msg_id: Optional[str] = None,
        expected_stream: Optional[str] = None,
        expected_last_seq: Optional[int] = None,
        expected_last_subject_seq: Optional[int] = None,
        expected_last_msg_id: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> "concurrent.futures.Future[PubAck]":
        """Publish without waiting; the Future resolves to the PubAck.

        At most ``max_pending`` publishes (see :meth:`set_publish_async_max_pending`,
        default 4000) are in flight; beyond that this call blocks until acks
        come back (or raises TimeoutError after ``timeout``). Use
        :meth:`publish_async_complete` to wait for all of them.
        """
        t = self._timeout if timeout is None else timeout
        _check_timeout(t)
        hdrs = publish_headers(
            headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq, expected_last_msg_id
        )
        return self._async_publisher().publish(check_subject(subject), _as_bytes(data), hdrs, t)

    def set_publish_async_max_pending(self, max_pending: int) -> None:
        """Size of the publish_async window (before its first use)."""
        if self._publisher is not None:
            raise errors.InvalidOptionError("publish_async already in use; set max_pending before the first call")
        self._publisher = AsyncPublisher(self._client, max_pending)

    def _async_publisher(self) -> AsyncPublisher:
        if self._publisher is None:
            self._publisher = AsyncPublisher(self._client)
        return self._publisher

    @property
    def publish_async_pending(self) -> int:
        """publish_async calls not yet acknowledged."""
        return self._publisher.pending if self._publisher is not None else 0

    def publish_async_complete(self, timeout: Optional[float] = None) -> bool:
        """Block until every publish_async is resolved; False on timeout."""
        if self._publisher is None:
            return True
        return self._publisher.wait_complete(timeout)


def _positive(name: str, value: Any, allow_zero: bool = False) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < (0 if allow_zero else 1):
        raise errors.InvalidOptionError(f"{name} must be an integer >= {0 if allow_zero else 1}, got {value!r}")
    return value

