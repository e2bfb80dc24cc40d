"""The JetStream API on one connection: JSON requests under the API prefix
(ADR-19 domains and prefixes), the error replies mapped to the exception tree,
and the stream, message and consumer operations, answered with models (never
handles). Publishing comes from its base, :class:`JsPublisher`.

The public :class:`~jetstream_sync.JetStream` composes one of these and wraps
its answers in handles; every handle, engine and bucket is given this object,
so nothing below the public context imports it.
"""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union


from .. import errors, options
from ..models import (
    AccountInfo,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPauseResponse,
    ConsumerResetResponse,
    StoredMsg,
    StreamConfig,
    StreamInfo,
    parse_utc_iso,
)
from . import direct as _direct
from . import nats_errors
from .connection import Connection
from .jspublish import JsPublisher
from .message import parse_header_block
from .nuid import next_nuid

__all__ = ["JsApi"]


class JsApi(JsPublisher):
    """JetStream on one connection (see the module docstring).

    ``domain`` selects a JetStream domain (``$JS.<domain>.API``);
    ``api_prefix`` replaces the API prefix outright (exclusive with
    ``domain``). ``timeout`` (seconds, default 5) bounds each API request.
    Thread-safe: blocking calls from any thread but the loop thread;
    ``arequest`` on the loop thread only.
    """

    def __init__(
        self, conn: Connection, *, domain: Optional[str] = None, api_prefix: Optional[str] = None, timeout: float = 5.0
    ) -> None:
        options.exclusive("", "domain", domain, "api_prefix", api_prefix)
        super().__init__(conn, options.duration("timeout", timeout))
        self._connection = conn
        if domain is not None:
            options.validate_name("domain", domain)
            prefix = f"$JS.{domain}.API"
        elif api_prefix is not None:
            prefix = options.api_prefix(api_prefix)
        else:
            prefix = "$JS.API"
        self._domain = domain
        self._prefix = prefix

    @property
    def connection(self) -> Connection:
        """The connection core (handles and engines use it)."""
        return self._connection

    @property
    def api_prefix(self) -> str:
        """``$JS.API``, ``$JS.<domain>.API`` or the prefix given."""
        return self._prefix

    @property
    def domain(self) -> Optional[str]:
        return self._domain

    def request(
        self,
        suffix: str,
        payload: Optional[Dict[str, Any]] = None,
        timeout: Optional[float] = None,
        about: str = "",
    ) -> Dict[str, Any]:
        """One JetStream API request; raises APIError (by err_code) on an error
        reply. ``about`` ("stream 'X'") is named in not-found errors."""
        conn = self.connection
        conn.check()
        t = self.timeout if timeout is None else timeout
        subject = f"{self.api_prefix}.{suffix}"
        options.control_line(subject, reply_room=conn.reply_room)
        body = b"" if payload is None else json.dumps(payload).encode()
        options.payload_size(len(body), conn.max_payload)
        return conn.run(self._aapi(subject, body, t, about), t + 1.0, confirm_acks="all")

    async def _aapi(self, subject: str, body: bytes, timeout: float, about: str) -> Dict[str, Any]:
        try:
            msg = await self.connection.request(subject, body, timeout)
        except nats_errors.API_REQUEST_FAILURES as exc:
            raise nats_errors.api_request_error(exc, subject, self.api_prefix, timeout) from exc
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

    def paged(
        self, suffix: str, key: str, payload: Optional[Dict[str, Any]] = None, about: str = ""
    ) -> Iterator[Any]:
        offset = 0
        while True:
            resp = self.request(suffix, {**(payload or {}), "offset": offset}, about=about)
            items = resp.get(key) or []
            yield from items
            offset += len(items)
            if not items or offset >= int(resp.get("total", 0)):
                return


    def create_stream(self, config: Optional[StreamConfig] = None, **fields: Any) -> StreamInfo:
        cfg = options.build_config(StreamConfig, config, fields)
        name = options.validate_name("stream", cfg.name)
        return StreamInfo.from_response(self.request(f"STREAM.CREATE.{name}", cfg.as_dict()))

    def update_stream(self, config: Optional[StreamConfig] = None, **fields: Any) -> StreamInfo:
        cfg = options.build_config(StreamConfig, config, fields)
        name = options.validate_name("stream", cfg.name)
        return StreamInfo.from_response(self.request(f"STREAM.UPDATE.{name}", cfg.as_dict()))

    def create_or_update_stream(self, config: Optional[StreamConfig] = None, **fields: Any) -> StreamInfo:
        cfg = options.build_config(StreamConfig, config, fields)
        try:
            return self.update_stream(cfg)
        except errors.StreamNotFoundError:
            return self.create_stream(cfg)

    def stream_info(
        self, name: str, *, subjects_filter: Optional[str] = None, deleted_details: bool = False
    ) -> StreamInfo:
        """As :meth:`jetstream_sync.JetStream.stream_info` (documented there)."""
        options.validate_name("stream", name)
        options.flag("deleted_details", deleted_details)
        payload: Dict[str, Any] = {}
        if subjects_filter is not None:
            payload["subjects_filter"] = options.subject(subjects_filter, what="subjects_filter", wildcards=True)
        if deleted_details:
            payload["deleted_details"] = True
        about = f"stream {name!r}"
        resp = self.request(f"STREAM.INFO.{name}", payload or None, about=about)
        subjects = dict((resp.get("state") or {}).get("subjects") or {})
        total = int(resp.get("total") or 0)
        while subjects_filter is not None and len(subjects) < total:  # the server pages the subjects
            page = self.request(f"STREAM.INFO.{name}", {**payload, "offset": len(subjects)}, about=about)
            more = (page.get("state") or {}).get("subjects") or {}
            if not more:
                break
            subjects.update(more)
        if subjects or subjects_filter is not None:  # asked for: {} when nothing matches
            resp.setdefault("state", {})["subjects"] = subjects
        return StreamInfo.from_response(resp)

    def confirm_missing(self, stream: str, exc: errors.JetStreamError, what: str) -> errors.JetStreamError:
        """What ``exc`` — StreamNotFoundError, or NoRespondersError from the
        stream's subjects or a direct get — means for ``stream``: the
        StreamNotFoundError of the server when it says the stream does not
        exist (asked now, within the API timeout); otherwise a
        NoRespondersError saying ``what``'s stream did not answer. Nothing
        answers a stream while its server restarts or its leader moves: that
        is no proof it is gone."""
        if isinstance(exc, errors.StreamNotFoundError):
            return exc
        try:
            self.request(f"STREAM.INFO.{options.validate_name('stream', stream)}", about=f"stream {stream!r}")
        except errors.StreamNotFoundError as gone:
            return gone
        except errors.JetStreamError as other:  # JetStream not answering either
            return errors.NoRespondersError(f"{what}: its stream {stream!r} did not answer ({exc}; then {other})")
        return errors.NoRespondersError(f"{what}: its stream {stream!r} did not answer ({exc})")

    def delete_stream(self, name: str) -> None:
        """Delete a stream and all its messages and consumers."""
        self.request(f"STREAM.DELETE.{options.validate_name('stream', name)}", about=f"stream {name!r}")

    def stream_names(self, subject: Optional[str] = None) -> List[str]:
        """Names of all streams, or of those whose subjects overlap ``subject``."""
        payload = {"subject": options.subject(subject, wildcards=True)} if subject is not None else None
        return list(self.paged("STREAM.NAMES", "streams", payload))

    def streams(self, subject: Optional[str] = None) -> List[StreamInfo]:
        """Info of all streams (or those overlapping ``subject``)."""
        payload = {"subject": options.subject(subject, wildcards=True)} if subject is not None else None
        return [StreamInfo.from_response(s) for s in self.paged("STREAM.LIST", "streams", payload)]

    def purge_stream(
        self, stream: str, subject: Optional[str] = None, seq: Optional[int] = None, keep: Optional[int] = None
    ) -> int:
        """Remove messages of ``stream`` (see :meth:`Stream.purge`); returns how many."""
        options.exclusive("purge", "seq", seq, "keep", keep)
        payload: Dict[str, Any] = {}
        if subject is not None:
            payload["filter"] = options.subject(subject, wildcards=True)
        if seq is not None:
            payload["seq"] = _positive("seq", seq)
        if keep is not None:
            payload["keep"] = _positive("keep", keep, allow_zero=True)
        resp = self.request(f"STREAM.PURGE.{options.validate_name('stream', stream)}", payload or None, about=f"stream {stream!r}")
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
        """As :meth:`jetstream_sync.JetStream.get_msg` (documented there)."""
        options.validate_name("stream", stream)
        options.flag("direct", direct)
        if next_by_subject is not None:
            options.exclusive("get_msg", "last_by_subject", last_by_subject, "next_by_subject", next_by_subject, mutually=False)
            payload: Dict[str, Any] = {
                "seq": 1 if seq is None else _positive("seq", seq),
                "next_by_subj": options.subject(next_by_subject, what="next_by_subject", wildcards=True),
            }
            about = f"next message on {next_by_subject!r} from sequence {payload['seq']} in stream {stream!r}"
        elif options.exactly_one("get_msg", "seq", seq, "last_by_subject", last_by_subject) == "seq":
            payload = {"seq": _positive("seq", seq)}
            about = f"sequence {seq} of stream {stream!r}"
        else:
            payload = {"last_by_subj": options.subject(last_by_subject, what="last_by_subject", wildcards=True)}
            about = f"last message on {last_by_subject!r} in stream {stream!r}"
        if direct:
            t = self.timeout
            try:
                return self.connection.run(_direct.get_one(self.connection, self._direct_subject(stream), payload, t, about), t + 1.0)
            except errors.NoRespondersError as exc:
                raise _no_direct(stream) from exc
        raw = self.request(f"STREAM.MSG.GET.{stream}", payload, about=about)["message"]
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
        """As :meth:`jetstream_sync.JetStream.get_msgs` (documented there)."""
        body: Dict[str, Any] = {"batch": _positive("batch", batch)}
        options.exclusive("get_msgs", "seq", seq, "start_time", start_time, mutually=False)
        if start_time is not None:
            body["start_time"] = options.rfc3339(options.aware_datetime("start_time", start_time))
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
        """As :meth:`jetstream_sync.JetStream.get_last_msgs` (documented there)."""
        subjects = options.non_empty_subjects("subjects", subjects)
        body: Dict[str, Any] = {"multi_last": [options.subject(x, wildcards=True) for x in subjects]}
        options.exclusive("get_last_msgs", "up_to_seq", up_to_seq, "up_to_time", up_to_time, mutually=False)
        if up_to_seq is not None:
            body["up_to_seq"] = _positive("up_to_seq", up_to_seq)
        if up_to_time is not None:
            body["up_to_time"] = options.rfc3339(options.aware_datetime("up_to_time", up_to_time))
        if batch is not None:
            body["batch"] = _positive("batch", batch)
        return self._direct_batch(stream, body, batch or 1 << 30)

    def _direct_subject(self, stream: str) -> str:
        return f"{self.api_prefix}.DIRECT.GET.{options.validate_name('stream', stream)}"

    def _direct_batch(self, stream: str, body: Dict[str, Any], limit: int) -> List[StoredMsg]:
        subject = self._direct_subject(stream)
        t = self.timeout
        try:
            return self.connection.run(_direct.get_batch(self.connection, subject, body, t, limit), t + 1.0)
        except errors.NoRespondersError as exc:
            raise _no_direct(stream) from exc

    def delete_msg(self, stream: str, seq: int, erase: bool = False) -> None:
        """Delete one message of ``stream``; raises MsgNotFoundError if it is not there."""
        payload = {"seq": _positive("seq", seq), "no_erase": not erase}
        about = f"sequence {seq} of stream {stream!r}"
        try:
            self.request(f"STREAM.MSG.DELETE.{options.validate_name('stream', stream)}", payload, about=about)
        except errors.APIError as exc:
            # The server reports a missing sequence as a failed delete ("no message found"
            # or "stream store EOF"), not as not-found.
            if exc.err_code == errors.ErrorCode.STREAM_MSG_DELETE_FAILED and _means_missing(exc.description):
                raise errors.MsgNotFoundError(404, errors.ErrorCode.MSG_NOT_FOUND, f"no message found: {about}") from exc
            raise

    def upsert_consumer(
        self, stream: str, config: Optional[ConsumerConfig], fields: Dict[str, Any], action: str, push: bool
    ) -> ConsumerInfo:
        options.validate_name("stream", stream)
        cfg = options.build_config(ConsumerConfig, config, fields)
        options.consumer_kind(cfg, action, push)
        subject, payload = self.consumer_request(stream, cfg, action)
        return ConsumerInfo.from_response(self.request(subject, payload, about=f"stream {stream!r}"))

    def consumer_request(self, stream: str, cfg: ConsumerConfig, action: str = "") -> Tuple[str, Dict[str, Any]]:
        """The API subject suffix and body that create/update consumer ``cfg``
        (validated; a name is generated when it has none)."""
        options.consumer_names(cfg)
        name = cfg.name or cfg.durable_name
        if not name:
            name = cfg.name = next_nuid()
        options.validate_name("consumer", name)
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
        return await self._aapi(f"{self.api_prefix}.{suffix}", body, self.timeout, about)

    def consumer_info(self, stream: str, name: str) -> ConsumerInfo:
        return ConsumerInfo.from_response(self.consumer_info_raw(stream, name))

    def consumer_info_raw(self, stream: str, name: str) -> Dict[str, Any]:
        about = f"consumer {name!r} of stream {stream!r}"
        return self.request(f"CONSUMER.INFO.{options.validate_name('stream', stream)}.{options.validate_name('consumer', name)}", about=about)

    def delete_consumer(self, stream: str, name: str) -> None:
        about = f"consumer {name!r} of stream {stream!r}"
        self.request(f"CONSUMER.DELETE.{options.validate_name('stream', stream)}.{options.validate_name('consumer', name)}", about=about)

    def consumer_names(self, stream: str) -> List[str]:
        return list(self.paged(f"CONSUMER.NAMES.{options.validate_name('stream', stream)}", "consumers", about=f"stream {stream!r}"))

    def consumers(self, stream: str) -> List[ConsumerInfo]:
        items = self.paged(f"CONSUMER.LIST.{options.validate_name('stream', stream)}", "consumers", about=f"stream {stream!r}")
        return [ConsumerInfo.from_response(c) for c in items]

    def pause_consumer(
        self, stream: str, name: str, until: Union[datetime.datetime, float]
    ) -> ConsumerPauseResponse:
        """As :meth:`jetstream_sync.JetStream.pause_consumer` (documented there)."""
        when = options.pause_until(until)
        resp = self._consumer_op("PAUSE", stream, name, {"pause_until": options.rfc3339(when)}, "2.11")
        return ConsumerPauseResponse.from_response(resp)

    def resume_consumer(self, stream: str, name: str) -> ConsumerPauseResponse:
        """As :meth:`jetstream_sync.JetStream.resume_consumer` (documented there)."""
        return ConsumerPauseResponse.from_response(self._consumer_op("PAUSE", stream, name, None, "2.11"))

    def reset_consumer(self, stream: str, name: str, seq: Optional[int] = None) -> ConsumerResetResponse:
        """As :meth:`jetstream_sync.JetStream.reset_consumer` (documented there)."""
        payload = None if seq is None else {"seq": _positive("seq", seq)}
        return ConsumerResetResponse.from_response(self._consumer_op("RESET", stream, name, payload, "2.14"))

    def unpin_consumer(self, stream: str, name: str, group: str) -> None:
        """As :meth:`jetstream_sync.JetStream.unpin_consumer` (documented there)."""
        self._consumer_op("UNPIN", stream, name, {"group": options.group_name(group)}, "2.11")

    def _consumer_op(
        self, verb: str, stream: str, name: str, payload: Optional[Dict[str, Any]], since: str
    ) -> Dict[str, Any]:
        """``$JS.API.CONSUMER.<verb>.<stream>.<name>``. Neither a server older
        than ``since`` nor (for RESET) a missing consumer answers: after a
        timeout, ask for the consumer's info to tell the two apart."""
        about = f"consumer {name!r} of stream {stream!r}"
        subject = f"CONSUMER.{verb}.{options.validate_name('stream', stream)}.{options.validate_name('consumer', name)}"
        try:
            return self.request(subject, payload, about=about)
        except errors.TimeoutError as exc:
            self.consumer_info_raw(stream, name)  # raises ConsumerNotFoundError if that was why
            raise errors.TimeoutError(
                f"{exc}: CONSUMER.{verb} needs nats-server {since} or newer (older servers do not answer it)"
            ) from exc

    def account_info(self) -> AccountInfo:
        """Usage and limits of this account's JetStream."""
        info: AccountInfo = AccountInfo.from_response(self.request("INFO"))  # nats-py leaves it unannotated
        return info

    def counter_get(self, stream: str, subject: str) -> int:
        """The value of the counter on ``subject`` (MsgNotFoundError if it has none)."""
        msg = self.get_msg(stream, last_by_subject=options.subject(subject))  # one counter: no wildcards
        try:
            return int(json.loads(msg.data)["val"])
        except (ValueError, KeyError, TypeError) as exc:
            raise errors.JetStreamError(f"the last message on {subject!r} is not a counter value") from exc



def _positive(name: str, value: Any, allow_zero: bool = False) -> int:
    return options.count(name, value, allow_zero=allow_zero)


def _no_direct(stream: str) -> errors.NoRespondersError:
    return errors.NoRespondersError(f"no direct get for stream {stream!r}: it does not exist or lacks allow_direct")


def _means_missing(description: str) -> bool:
    d = description.lower()
    return "not found" in d or "no message" in d or "eof" in d
