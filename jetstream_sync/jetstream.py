"""JetStream: the public context on one connection. It composes its parts
and holds no protocol logic of its own: publishing is its base
:class:`JsPublisher` (``_core/jspublish.py``); the API requests and the
stream, message and consumer operations are a :class:`JsApi`
(``_core/jsapi.py``), whose answers come back here as handles (``stream.py``,
``consumer.py``, ``push.py``, ``ordered.py``); the subscribe workflow is
``subscribe.py``; buckets are ``kv/`` and ``object_store/``. The methods
that hand a call on carry the user-facing docstrings."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Union

from . import errors, options, subscribe as sub
from ._core.connection import Connection
from ._core.jsapi import JsApi
from ._core.jspublish import JsPublisher
from ._core.message import Msg
from ._core.schedules import cancel_schedule, list_schedules
from .consumer import Consumer
from .core import CoreClient
from .models import (
    AccountInfo,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPauseResponse,
    ConsumerResetResponse,
    DeliverPolicy,
    Schedule,
    StoredMsg,
    StreamConfig,
    StreamInfo,
)
from .options import build_config
from .ordered import OrderedConsumer
from .push import PushConsumer
from .stream import Stream, pull_consumer, push_consumer, make_consumer, make_push_consumer
from .subscriptions import PullSubscription, PushSubscription
from ._core.lazy import lazy_module

# Buckets, object stores and consumer groups: imported at their first use (a
# process that only reads streams never needs them; _core/lazy.py).
if TYPE_CHECKING:
    from .kv import manage as kv
    from .kv.bucket import KeyValue, KeyValueConfig, KeyValueStatus
    from .object_store import model as obm, store as obs
    from .object_store.store import ObjectStore, ObjectStoreConfig, ObjectStoreStatus
    from .pcgroups import elastic as pce, static as pcg
else:
    kv = lazy_module("jetstream_sync.kv.manage")
    obs = lazy_module("jetstream_sync.object_store.store")
    obm = lazy_module("jetstream_sync.object_store.model")
    pce = lazy_module("jetstream_sync.pcgroups.elastic")
    pcg = lazy_module("jetstream_sync.pcgroups.static")

__all__ = ["JetStream"]


class JetStream(JsPublisher):
    """JetStream on one connection: manage streams and consumers, publish,
    subscribe, and reach key-value buckets and object stores.

    ``domain`` selects a JetStream domain (``$JS.<domain>.API``);
    ``api_prefix`` replaces the API prefix outright (ADR-19; exclusive with
    ``domain``). ``timeout`` (seconds, default 5) bounds each API request.
    """

    def __init__(
        self,
        conn: Connection,
        *,
        client: Optional[CoreClient] = None,
        domain: Optional[str] = None,
        api_prefix: Optional[str] = None,
        timeout: float = 5.0,
    ) -> None:
        self._api = JsApi(conn, domain=domain, api_prefix=api_prefix, timeout=timeout)
        super().__init__(conn, self._api.timeout)
        self._client = client

    def __repr__(self) -> str:
        return f"<jetstream_sync.JetStream {self._api.api_prefix}>"

    @property
    def client(self) -> CoreClient:
        """The Client this context was made from."""
        if self._client is None:
            raise errors.InvalidOptionError("this JetStream context was not made by Client.jetstream()")
        return self._client

    @property
    def api_prefix(self) -> str:
        """``$JS.API``, ``$JS.<domain>.API`` or the prefix given."""
        return self._api.api_prefix

    # -- publishing: publish, publish_async, publish_batch, counter_add and the
    # publish_async window come from JsPublisher; counter_get reads a stored message.

    def counter_get(self, stream: str, subject: str) -> int:
        """The value of the counter on ``subject`` (MsgNotFoundError if it has none)."""
        return self._api.counter_get(stream, subject)

    # -- message schedules (ADR-51); publish_schedule comes from JsPublisher

    def schedules(self, stream: str, subject: str = ">") -> List[Schedule]:
        """The message schedules held in ``stream`` on subjects matching
        ``subject`` (wildcards allowed), sorted by subject. A schedule made
        with ``@at`` is gone once it has fired."""
        return list_schedules(self._api, stream, subject)

    def cancel_schedule(self, stream: str, subject: str) -> bool:
        """Stop the schedule on ``subject`` by purging that subject (ADR-51);
        True if there was one. Messages it already produced stay."""
        return cancel_schedule(self._api, stream, subject)


    # -- streams ------------------------------------------------------------------

    def create_stream(self, config: Optional[StreamConfig] = None, **fields: Any) -> Stream:
        """Create a stream from a :class:`StreamConfig` and/or its fields as keywords."""
        return Stream(self._api, self._api.create_stream(config, **fields))

    def update_stream(self, config: Optional[StreamConfig] = None, **fields: Any) -> Stream:
        """Update a stream's configuration."""
        return Stream(self._api, self._api.update_stream(config, **fields))

    def create_or_update_stream(self, config: Optional[StreamConfig] = None, **fields: Any) -> Stream:
        """Update the stream if it exists, else create it."""
        return Stream(self._api, self._api.create_or_update_stream(config, **fields))

    def stream(self, name: str) -> Stream:
        """A handle on an existing stream; raises StreamNotFoundError."""
        return Stream(self._api, self._api.stream_info(name))

    def stream_info(
        self, name: str, *, subjects_filter: Optional[str] = None, deleted_details: bool = False
    ) -> StreamInfo:
        """Info of a stream. ``subjects_filter`` (wildcards allowed) fills
        ``state.subjects`` with the message count per matching subject (all
        pages); ``deleted_details`` fills ``state.deleted`` with the deleted
        sequences."""
        return self._api.stream_info(name, subjects_filter=subjects_filter, deleted_details=deleted_details)

    def delete_stream(self, name: str) -> None:
        """Delete a stream and all its messages and consumers."""
        return self._api.delete_stream(name)

    def stream_names(self, subject: Optional[str] = None) -> List[str]:
        """Names of all streams, or of those whose subjects overlap ``subject``."""
        return self._api.stream_names(subject)

    def streams(self, subject: Optional[str] = None) -> List[StreamInfo]:
        """Info of all streams (or those overlapping ``subject``)."""
        return self._api.streams(subject)

    def purge_stream(
        self, stream: str, subject: Optional[str] = None, seq: Optional[int] = None, keep: Optional[int] = None
    ) -> int:
        """Remove messages of ``stream`` (see :meth:`Stream.purge`); returns how many."""
        return self._api.purge_stream(stream, subject, seq, keep)

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
        return self._api.get_msg(stream, seq, last_by_subject, next_by_subject=next_by_subject, direct=direct)

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
        return self._api.get_msgs(stream, seq=seq, next_by_subject=next_by_subject, start_time=start_time, batch=batch, max_bytes=max_bytes)

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
        return self._api.get_last_msgs(stream, subjects, up_to_seq=up_to_seq, up_to_time=up_to_time, batch=batch)

    def delete_msg(self, stream: str, seq: int, erase: bool = False) -> None:
        """Delete one message of ``stream``; raises MsgNotFoundError if it is not there."""
        return self._api.delete_msg(stream, seq, erase)

    # -- consumers ----------------------------------------------------------------

    # A pull Consumer and a PushConsumer are different handles, each made by
    # its own calls (nats.go's CreateConsumer / CreatePushConsumer), so every
    # call has one return type: the pull creators refuse a deliver subject,
    # given as a keyword or in a config, before anything is sent.

    def create_consumer(self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any) -> Consumer:
        """Create a pull consumer; fails (APIError 10148) if one with that name
        but a different config exists. Without ``name``/``durable_name`` it is
        ephemeral, with a generated name. A ``deliver_subject`` (keyword or in
        the config) makes a push consumer and is refused here
        (InvalidOptionError: use :meth:`create_push_consumer`)."""
        return make_consumer(self._api, stream, config, fields, "create")

    def update_consumer(self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any) -> Consumer:
        """Update an existing pull consumer; fails if it does not exist. Push
        consumers: :meth:`update_push_consumer` (as :meth:`create_consumer`)."""
        return make_consumer(self._api, stream, config, fields, "update")

    def create_or_update_consumer(self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any) -> Consumer:
        """Update the pull consumer if it exists, else create it (as :meth:`create_consumer`)."""
        return make_consumer(self._api, stream, config, fields, "")

    def create_push_consumer(self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any) -> PushConsumer:
        """Create a push consumer: its config needs a ``deliver_subject``
        (InvalidOptionError otherwise); otherwise as :meth:`create_consumer`."""
        return make_push_consumer(self._api, stream, config, fields, "create")

    def update_push_consumer(self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any) -> PushConsumer:
        """Update an existing push consumer; fails if it does not exist."""
        return make_push_consumer(self._api, stream, config, fields, "update")

    def create_or_update_push_consumer(
        self, stream: str, config: Optional[ConsumerConfig] = None, **fields: Any
    ) -> PushConsumer:
        """Update the push consumer if it exists, else create it."""
        return make_push_consumer(self._api, stream, config, fields, "")

    def consumer(self, stream: str, name: str) -> Consumer:
        """A handle on an existing pull consumer; raises ConsumerNotFoundError,
        or ConsumerPushBasedError when it has a deliver subject (use
        :meth:`push_consumer` for that one)."""
        return pull_consumer(self._api, stream, name)

    def push_consumer(self, stream: str, name: str) -> PushConsumer:
        """A handle on an existing push consumer; raises ConsumerNotFoundError,
        or ConsumerPullBasedError when it has no deliver subject (use
        :meth:`consumer` for that one)."""
        return push_consumer(self._api, stream, name)

    def ordered_consumer(self, stream: str, **config: Any) -> OrderedConsumer:
        """An ordered consumer on ``stream`` (which must exist: StreamNotFoundError
        otherwise); options as :meth:`Stream.ordered_consumer`."""
        oc = OrderedConsumer(self._api, stream, **config)  # validates before asking the server
        self.stream_info(stream)
        return oc

    def consumer_info(self, stream: str, name: str) -> ConsumerInfo:
        return self._api.consumer_info(stream, name)

    def delete_consumer(self, stream: str, name: str) -> None:
        return self._api.delete_consumer(stream, name)

    def consumer_names(self, stream: str) -> List[str]:
        return self._api.consumer_names(stream)

    def consumers(self, stream: str) -> List[ConsumerInfo]:
        return self._api.consumers(stream)

    def pause_consumer(
        self, stream: str, name: str, until: Union[datetime.datetime, float]
    ) -> ConsumerPauseResponse:
        """Pause a consumer until ``until`` (an aware datetime, or seconds from
        now): it delivers nothing meanwhile; pulls wait (server 2.11+)."""
        return self._api.pause_consumer(stream, name, until)

    def resume_consumer(self, stream: str, name: str) -> ConsumerPauseResponse:
        """Resume a paused consumer now (server 2.11+). The server serves
        pulls that were already waiting at its next wake-up for them (their
        next idle heartbeat, a new message, or a new pull), not at once."""
        return self._api.resume_consumer(stream, name)

    def reset_consumer(self, stream: str, name: str, seq: Optional[int] = None) -> ConsumerResetResponse:
        """Move a consumer back to its ack floor, or to stream sequence ``seq``
        (not below its configured start); what was delivered and not acked is
        forgotten and delivered again from there (server 2.14+)."""
        return self._api.reset_consumer(stream, name, seq)

    def unpin_consumer(self, stream: str, name: str, group: str) -> None:
        """Release the pin of priority ``group`` of a pinned_client consumer;
        the server pins the next puller (server 2.11+)."""
        return self._api.unpin_consumer(stream, name, group)

    def account_info(self) -> AccountInfo:
        """Usage and limits of this account's JetStream."""
        return self._api.account_info()

    # -- the subscribe workflow (nats-py's names and arguments) --------------------

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
        if headers_only is not None:
            options.flag("headers_only", headers_only)
        given = {"deliver_policy": deliver_policy, "headers_only": headers_only, "inactive_threshold": inactive_threshold}
        norm = build_config(ConsumerConfig, None, {k: v for k, v in given.items() if v is not None})  # validates
        # Only what was given: ConsumerConfig() has deliver_policy "all" by default.
        extra = {k: getattr(norm, k) for k, v in given.items() if v is not None}
        return sub.subscribe(
            self._api, subject, queue, cb, durable, stream, config, manual_ack, ordered_consumer,
            idle_heartbeat, flow_control, extra, error_handler,
        )  # fmt: skip

    def subscribe_bind(
        self,
        stream: str,
        config: Union[ConsumerConfig, str, None] = None,
        consumer: Optional[str] = None,
        cb: Optional[Callable[[Msg], Any]] = None,
        manual_ack: bool = False,
        *,
        queue: Optional[str] = None,
        error_handler: Optional[Callable[[BaseException], Any]] = None,
    ) -> "PushSubscription":
        """A push subscription on an existing consumer (ConsumerNotFoundError
        if there is none); never created, never deleted. nats-py's argument
        order: ``subscribe_bind(stream, config, consumer, cb)``; ``config`` may
        also be just the consumer's name. A ``config`` given is checked
        against the consumer's (SubscribeError on a difference)."""
        if isinstance(config, str) and consumer is None:
            config, consumer = None, config
        config, name = options.bind_config(config, consumer)
        return sub.subscribe(
            self._api, "", queue, cb, name, stream, config, manual_ack, False, None, False, {}, error_handler, bind=True
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
        return sub.pull_subscribe(self._api, subject, durable, stream, config)

    def pull_subscribe_bind(self, durable: str, stream: str) -> "PullSubscription":
        """A pull subscription on an existing consumer (ConsumerNotFoundError
        if there is none); never created, never deleted."""
        return sub.pull_subscribe(self._api, "", durable, stream, None, bind=True)


    # -- partitioned consumer groups (orbit.go pcgroups) ------------------------------

    def create_static_group(
        self, stream: str, group: str, max_members: int, *, members: Optional[List[str]] = None,
        member_mappings: Any = None, filters: Optional[List[str]] = None,
    ) -> "pcg.StaticGroup":
        """Create a static partitioned consumer group on ``stream``, whose
        subjects start with a partition number (see
        :func:`jetstream_sync.partition_transform`). ``max_members`` is the
        number of partitions; give ``members`` (partitions spread evenly) or
        ``member_mappings`` (``{member: [partitions]}``, each partition once);
        ``filters`` (default ``>``) select subjects after the partition token.
        The config is stored as orbit.go stores it (bucket
        ``static-consumer-groups``, key ``<stream>.<group>``). Idempotent for
        the same config; ConsumerGroupError for another one."""
        return pcg.create_static(self._api, stream, group, max_members, members, member_mappings, filters)

    def static_group(self, stream: str, group: str) -> "pcg.StaticGroup":
        """The handle of an existing static group; ConsumerGroupNotFoundError."""
        return pcg.open_static(self._api, stream, group)

    def static_groups(self, stream: str) -> List[str]:
        """Names of the static groups of ``stream``."""
        return pcg.static_group_names(self._api, stream)

    def delete_static_group(self, stream: str, group: str) -> None:
        """Delete a static group's config and its members' consumers."""
        pcg.delete_static(self._api, stream, group)

    def join_static_group(self, stream: str, group: str, member: str, handler: Any = None, **options: Any) -> Any:
        """``static_group(stream, group).join(member, handler, **options)``:
        see :meth:`jetstream_sync.StaticGroup.join`."""
        return pcg.open_static(self._api, stream, group).join(member, handler, **options)

    def create_elastic_group(
        self, stream: str, group: str, max_members: int, *, partitioning_filters: Any = None,
        max_buffered_msgs: int = 0, max_buffered_bytes: int = 0,
    ) -> "pce.ElasticGroup":
        """Create an elastic partitioned consumer group on any ``stream``:
        ``max_members`` partitions; ``partitioning_filters`` (default: every
        subject, partitioned on the whole subject) as ``[(filter, [wildcard
        indexes])]``, e.g. ``[("orders.*", [1])]``; the group's work-queue
        stream ``<stream>-<group>`` holds at most ``max_buffered_msgs`` /
        ``max_buffered_bytes`` (0: no limit). Members are added later
        (:meth:`jetstream_sync.ElasticGroup.add_members`). Stored as orbit.go
        stores it (bucket ``elastic-consumer-groups``)."""
        return pce.create_elastic(self._api, stream, group, max_members, partitioning_filters, max_buffered_msgs, max_buffered_bytes)

    def elastic_group(self, stream: str, group: str) -> "pce.ElasticGroup":
        """The handle of an existing elastic group; ConsumerGroupNotFoundError."""
        return pce.open_elastic(self._api, stream, group)

    def elastic_groups(self, stream: str) -> List[str]:
        """Names of the elastic groups of ``stream``."""
        return pce.elastic_group_names(self._api, stream)

    def delete_elastic_group(self, stream: str, group: str) -> None:
        """Delete an elastic group's config and its work-queue stream."""
        pce.delete_elastic(self._api, stream, group)

    # -- key-value buckets and object stores ---------------------------------------

    def create_key_value(
        self, bucket: Union[str, "KeyValueConfig", None] = None, config: Optional["KeyValueConfig"] = None, **fields: Any
    ) -> "KeyValue":
        """Create a key-value bucket from a name or :class:`KeyValueConfig`
        plus its fields as keywords (``history=1``, ``ttl=None`` seconds,
        ``max_value_size``, ``max_bytes``, ``replicas=1``, ``storage="file"``,
        ``description``, ``republish``, ``placement``, ``compression=False``,
        ``limit_marker_ttl=None`` seconds, ``metadata``, ``mirror=None``,
        ``sources=None``: see :class:`KeyValueConfig`). Idempotent for the
        same configuration; BucketExistsError for another one. The handle
        has no codecs: ``.with_codecs(key_codec=, value_codec=)`` gives one that has."""
        return kv.upsert_bucket(self._api, bucket, config, fields, "create")

    def update_key_value(
        self, bucket: Union[str, "KeyValueConfig", None] = None, config: Optional["KeyValueConfig"] = None, **fields: Any
    ) -> "KeyValue":
        """Replace a bucket's configuration (fields as :meth:`create_key_value`); BucketNotFoundError."""
        return kv.upsert_bucket(self._api, bucket, config, fields, "update")

    def create_or_update_key_value(
        self, bucket: Union[str, "KeyValueConfig", None] = None, config: Optional["KeyValueConfig"] = None, **fields: Any
    ) -> "KeyValue":
        """Update a bucket, or create it when there is none (fields as :meth:`create_key_value`)."""
        return kv.upsert_bucket(self._api, bucket, config, fields, "")

    def key_value(self, bucket: str, *, key_codec: Any = None, value_codec: Any = None) -> "KeyValue":
        """A handle on an existing bucket; BucketNotFoundError, BadBucketError.
        ``key_codec`` / ``value_codec`` (default None: as stored) encode keys
        and values before they are sent and decode them when read (ADR-54,
        see :mod:`jetstream_sync.kv.codecs`); checked before anything is sent.
        On a bucket that mirrors another, reads go to the mirror and writes
        to the origin bucket."""
        return kv.open_bucket(self._api, bucket, key_codec, value_codec)

    def delete_key_value(self, bucket: str) -> None:
        """Delete a bucket and all its keys; BucketNotFoundError."""
        kv.delete_bucket(self._api, bucket)

    def key_value_names(self) -> List[str]:
        """Names of all buckets."""
        return kv.bucket_names(self._api)

    def key_value_buckets(self) -> List["KeyValueStatus"]:
        """Status of every bucket."""
        return kv.bucket_statuses(self._api)

    def create_object_store(
        self, bucket: Union[str, "ObjectStoreConfig", None] = None, config: Optional["ObjectStoreConfig"] = None,
        **fields: Any,
    ) -> "ObjectStore":  # fmt: skip
        """Create an object store (ADR-20) from a bucket name and/or an
        :class:`ObjectStoreConfig`, fields as keywords: ``description``,
        ``ttl`` (seconds), ``max_bytes``, ``storage`` ("file"), ``replicas``
        (1), ``placement``, ``compression`` (False), ``metadata``. The same
        config again is a no-op; another raises ObjectStoreExistsError."""
        return obs.upsert(self._api, obm.store_config(config, bucket, fields), "create")

    def update_object_store(
        self, bucket: Union[str, "ObjectStoreConfig", None] = None, config: Optional["ObjectStoreConfig"] = None,
        **fields: Any,
    ) -> "ObjectStore":  # fmt: skip
        """Replace an object store's config (fields left out get their
        defaults); ObjectStoreNotFoundError if it does not exist."""
        return obs.upsert(self._api, obm.store_config(config, bucket, fields), "update")

    def create_or_update_object_store(
        self, bucket: Union[str, "ObjectStoreConfig", None] = None, config: Optional["ObjectStoreConfig"] = None,
        **fields: Any,
    ) -> "ObjectStore":  # fmt: skip
        return obs.upsert(self._api, obm.store_config(config, bucket, fields), "")

    def object_store(self, bucket: str) -> "ObjectStore":
        """A handle on an existing object store; ObjectStoreNotFoundError otherwise."""
        return obs.bind(self._api, bucket)

    def delete_object_store(self, bucket: str) -> None:
        """Delete an object store and every object in it."""
        obs.delete(self._api, bucket)

    def object_store_names(self) -> List[str]:
        return obs.names(self._api)

    def object_stores(self) -> List["ObjectStoreStatus"]:
        """The status of every object store."""
        return obs.statuses(self._api)

