"""The JetStream context: stream and consumer management, publishing."""

from __future__ import annotations

import base64
import concurrent.futures
import dataclasses
import datetime
import json
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple, Type, TypeVar, Union

import nats.errors as _nerr
from nats.nuid import NUID

from . import errors, options
from ._publish import check_publish, publish_headers
from .client import as_bytes
from .message import Msg, parse_header_block
from .models import (
    AccountInfo,
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPauseResponse,
    ConsumerResetResponse,
    DeliverPolicy,
    DiscardPolicy,
    PubAck,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StoredMsg,
    StreamConfig,
    StreamInfo,
    parse_utc_iso,
)

if TYPE_CHECKING:  # pragma: no cover
    from ._connection import Connection
    from .client import Client
    from .consumer import Consumer
    from .object_store import ObjectStore, ObjectStoreConfig, ObjectStoreStatus
    from .ordered import OrderedConsumer
    from .push import PushConsumer
    from .stream import Stream
    from .subscribe import PullSubscription, PushSubscription

    AnyConsumer = Union[Consumer, PushConsumer]

__all__ = ["JetStream"]

_C = TypeVar("_C", StreamConfig, ConsumerConfig)
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
                allowed = ", ".join(repr(e.value) for e in enum)  # type: ignore[attr-defined]
                raise errors.InvalidOptionError(f"{name} must be one of {allowed}, got {value!r}") from None
    for name in _DURATIONS:
        value = getattr(cfg, name, None)
        if value is not None:
            setattr(cfg, name, options.duration(name, value, allow_zero=True))
    for name in ("filter_subject", "deliver_subject"):
        value = getattr(cfg, name, None)
        if value:
            options.subject(value, what=name, wildcards=(name == "filter_subject"))
    if isinstance(cfg, ConsumerConfig):
        options.priority_config(cfg.priority_policy, cfg.priority_groups, cfg.priority_timeout, cfg.deliver_subject)
    for name, what in (("filter_subjects", "filter_subjects entry"), ("subjects", "stream subject")):
        values = getattr(cfg, name, None)
        if values is None:
            continue
        if not isinstance(values, (list, tuple)):
            raise errors.InvalidOptionError(f"{name} must be a list of subjects, got {values!r}")
        for value in values:
            options.subject(value, what=what, wildcards=True)
    return cfg


class JetStream:
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
        options.control_line(subject, "_INBOX." + "x" * 44)
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
            resp = json.loads(msg.data)
        except ValueError as exc:
            raise errors.JetStreamError(f"invalid JetStream API response to {subject}: {msg.data[:200]!r}") from exc
        if "error" in resp:
            err = errors.APIError.from_error(resp["error"])
            if about and isinstance(err, errors.NotFoundError):
                err = type(err)(err.code, err.err_code, f"{err.description}: {about}")
            raise err
        return resp  # type: ignore[no-any-return]

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

    def stream(self, name: str) -> "Stream":
        """A handle on an existing stream; raises StreamNotFoundError."""
        return self._stream_handle(self._api(f"STREAM.INFO.{validate_name('stream', name)}", about=f"stream {name!r}"))

    def stream_info(self, name: str) -> StreamInfo:
        return StreamInfo.from_response(self._api(f"STREAM.INFO.{validate_name('stream', name)}", about=f"stream {name!r}"))

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

    def get_msg(self, stream: str, seq: Optional[int] = None, last_by_subject: Optional[str] = None) -> StoredMsg:
        """One stored message of ``stream`` (see :meth:`Stream.get_msg`)."""
        if (seq is None) == (last_by_subject is None):
            raise errors.InvalidOptionError("get_msg: give exactly one of seq or last_by_subject")
        if seq is not None:
            payload: Dict[str, Any] = {"seq": _positive("seq", seq)}
            about = f"sequence {seq} of stream {stream!r}"
        else:
            payload = {"last_by_subj": options.subject(last_by_subject, wildcards=True)}
            about = f"last message on {last_by_subject!r} in stream {stream!r}"
        raw = self._api(f"STREAM.MSG.GET.{validate_name('stream', stream)}", payload, about=about)["message"]
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

    def create_consumer(self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any) -> "AnyConsumer":
        """Create a consumer; fails (APIError 10148) if one with that name but a
        different config exists. Without ``name``/``durable_name`` it is
        ephemeral, with a generated name."""
        return self._upsert_consumer(stream, config, fields, "create")

    def update_consumer(self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any) -> "AnyConsumer":
        """Update an existing consumer; fails if it does not exist."""
        return self._upsert_consumer(stream, config, fields, "update")

    def create_or_update_consumer(
        self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any
    ) -> "AnyConsumer":
        return self._upsert_consumer(stream, config, fields, "")

    def _upsert_consumer(
        self, stream: str, config: Optional[ConsumerConfig], fields: Dict[str, Any], action: str
    ) -> "AnyConsumer":
        validate_name("stream", stream)
        cfg = build_config(ConsumerConfig, config, fields)
        if action == "update" and not (cfg.name or cfg.durable_name):
            raise errors.InvalidOptionError("update_consumer needs the consumer's name")
        subject, payload = self.consumer_request(stream, cfg, action)
        return self._consumer_handle(self._api(subject, payload, about=f"stream {stream!r}"))

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

    def consumer(self, stream: str, name: str) -> "AnyConsumer":
        """A handle on an existing consumer: a PushConsumer when its config
        has a deliver subject, else a (pull) Consumer; raises
        ConsumerNotFoundError."""
        return self._consumer_handle(self._consumer_info_raw(stream, name))

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

    def _consumer_handle(self, resp: Dict[str, Any]) -> "AnyConsumer":
        info = ConsumerInfo.from_response(resp)
        if info.config is not None and info.config.deliver_subject:
            from .push import PushConsumer

            return PushConsumer(self, info)
        from .consumer import Consumer

        return Consumer(self, info)

    # -- the subscribe workflow (nats-py's names, ADR-15 / ADR-13) ---------------------

    def subscribe(
        self,
        subject: str,
        queue: Optional[str] = None,
        cb: Optional[Callable[[Msg], Any]] = None,
        durable: Optional[str] = None,
        stream: Optional[str] = None,
        config: Optional[ConsumerConfig] = None,
        manual_ack: bool = False,
        ordered_consumer: bool = False,
        idle_heartbeat: Optional[float] = None,
        flow_control: bool = False,
        *,
        deliver_policy: Union[str, DeliverPolicy, None] = None,
        headers_only: Optional[bool] = None,
        inactive_threshold: Optional[float] = None,
        error_handler: Optional[Callable[[BaseException], Any]] = None,
    ) -> "PushSubscription":
        """A push subscription on ``subject`` (ADR-15), as nats-py's.

        The stream is found by subject unless given. With ``durable`` (or a
        ``queue``, which is then the durable name and the deliver group) an
        existing consumer is bound after checks (SubscribeError when it does
        not fit), or created; without, an ephemeral one is created. A
        consumer created here is deleted by ``unsubscribe()``/``drain()``.
        With ``cb``, a worker thread calls it per message and acks after it
        returns unless ``manual_ack``; without, read with ``next_msg()`` or
        iteration. ``ordered_consumer=True`` reads in stream order with no
        acks (an :class:`OrderedConsumer` behind it).
        """
        from . import subscribe as sub

        given = {"deliver_policy": deliver_policy, "headers_only": headers_only, "inactive_threshold": inactive_threshold}
        norm = build_config(ConsumerConfig, None, {k: v for k, v in given.items() if v is not None})  # validates
        extra = {k: getattr(norm, k) for k in given}
        return sub.subscribe(
            self, subject, queue, cb, durable, stream, config, manual_ack, ordered_consumer,
            idle_heartbeat, flow_control, extra, error_handler,
        )  # fmt: skip

    def subscribe_bind(
        self,
        stream: str,
        consumer: str,
        cb: Optional[Callable[[Msg], Any]] = None,
        manual_ack: bool = False,
        *,
        queue: Optional[str] = None,
        error_handler: Optional[Callable[[BaseException], Any]] = None,
    ) -> "PushSubscription":
        """A push subscription on an existing consumer (ConsumerNotFoundError
        if there is none); never created, never deleted."""
        from . import subscribe as sub

        return sub.subscribe(
            self, "", queue, cb, consumer, stream, None, manual_ack, False, None, False, {}, error_handler, bind=True
        )

    def pull_subscribe(
        self,
        subject: str,
        durable: Optional[str] = None,
        stream: Optional[str] = None,
        config: Optional[ConsumerConfig] = None,
    ) -> "PullSubscription":
        """A pull subscription on ``subject`` (ADR-13), as nats-py's: bound to
        the durable consumer if it exists (after ADR-15's checks), else a
        consumer is created (and deleted again by ``unsubscribe()``)."""
        from . import subscribe as sub

        return sub.pull_subscribe(self, subject, durable, stream, config)

    def pull_subscribe_bind(self, durable: str, stream: str) -> "PullSubscription":
        """A pull subscription on an existing consumer (ConsumerNotFoundError
        if there is none); never created, never deleted."""
        from . import subscribe as sub

        return sub.pull_subscribe(self, "", durable, stream, None, bind=True)

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
        conn = self._conn
        conn.check()
        conn.loop_thread.check_usable()  # a blocking call: never on the loop thread
        t = self._timeout if timeout is None else options.duration("timeout", timeout)
        hdrs = publish_headers(
            headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq, expected_last_msg_id
        )
        payload = as_bytes(data)
        hdr = check_publish(conn, subject, payload, hdrs)
        # The same wire path as publish_async (no task per call).
        return conn.publisher().publish_and_wait(subject, payload, hdrs, hdr, t)  # type: ignore[no-any-return]

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
        conn = self._conn
        conn.check()
        t = self._timeout if timeout is None else options.duration("timeout", timeout)
        hdrs = publish_headers(
            headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq, expected_last_msg_id
        )
        payload = as_bytes(data)
        hdr = check_publish(conn, subject, payload, hdrs)
        return conn.publisher().publish(subject, payload, hdrs, hdr, t)

    def set_publish_async_max_pending(self, max_pending: int) -> None:
        """Size of the publish_async window, shared by every JetStream
        context of this Client (one publisher per connection)."""
        self._conn.publisher().set_max_pending(max_pending)

    @property
    def publish_async_pending(self) -> int:
        """publish_async calls of this Client not yet acknowledged."""
        conn = self._conn
        return conn.publisher().pending if conn.has_publisher else 0

    def publish_async_complete(self, timeout: Optional[float] = None) -> bool:
        """Block until every publish_async of this Client is resolved; False on timeout."""
        t = options.optional_timeout("timeout", timeout)
        conn = self._conn
        if not conn.has_publisher:
            return True
        return conn.publisher().wait_complete(t)

    # -- object store --

    def create_object_store(
        self, bucket: Union[str, "ObjectStoreConfig", None] = None, config: Optional["ObjectStoreConfig"] = None,
        **fields: Any,
    ) -> "ObjectStore":  # fmt: skip
        """Create an object store (ADR-20) from a bucket name and/or an
        :class:`ObjectStoreConfig`, fields as keywords: ``description``,
        ``ttl`` (seconds), ``max_bytes``, ``storage`` ("file"), ``replicas``
        (1), ``placement``, ``compression`` (False), ``metadata``. The same
        config again is a no-op; another raises ObjectStoreExistsError."""
        from . import object_store as obs

        return obs.upsert(self, obs.store_config(config, bucket, fields), "create")

    def update_object_store(
        self, bucket: Union[str, "ObjectStoreConfig", None] = None, config: Optional["ObjectStoreConfig"] = None,
        **fields: Any,
    ) -> "ObjectStore":  # fmt: skip
        """Replace an object store's config (fields left out get their
        defaults); ObjectStoreNotFoundError if it does not exist."""
        from . import object_store as obs

        return obs.upsert(self, obs.store_config(config, bucket, fields), "update")

    def create_or_update_object_store(
        self, bucket: Union[str, "ObjectStoreConfig", None] = None, config: Optional["ObjectStoreConfig"] = None,
        **fields: Any,
    ) -> "ObjectStore":  # fmt: skip
        from . import object_store as obs

        return obs.upsert(self, obs.store_config(config, bucket, fields), "")

    def object_store(self, bucket: str) -> "ObjectStore":
        """A handle on an existing object store; ObjectStoreNotFoundError otherwise."""
        from . import object_store as obs

        return obs.bind(self, bucket)

    def delete_object_store(self, bucket: str) -> None:
        """Delete an object store and every object in it."""
        from . import object_store as obs

        obs.delete(self, bucket)

    def object_store_names(self) -> List[str]:
        from . import object_store as obs

        return obs.names(self)

    def object_stores(self) -> List["ObjectStoreStatus"]:
        """The status of every object store."""
        from . import object_store as obs

        return obs.statuses(self)


def _positive(name: str, value: Any, allow_zero: bool = False) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < (0 if allow_zero else 1):
        raise errors.InvalidOptionError(f"{name} must be an integer >= {0 if allow_zero else 1}, got {value!r}")
    return value



def _means_missing(description: str) -> bool:
    d = description.lower()
    return "not found" in d or "no message" in d or "eof" in d
