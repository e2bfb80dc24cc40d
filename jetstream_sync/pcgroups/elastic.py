"""Elastic partitioned consumer groups (orbit.go ``elastic_stream_consumer_group.go``).

The stream needs no partition token: the group has a work-queue stream of
its own, ``<stream>-<group>``, that sources the stream through the
partitioning transform (the partition number becomes the first token). Its
config is a JSON value under ``<stream>.<group>`` in the bucket
``elastic-consumer-groups``. Each member consumes through a consumer named
after it on that stream (priority group ``PCG``, ``pinned_client``, removed
by the server after ``ack_wait`` without a puller). Members can be added and
removed at any time: every joined instance watches the config and, when its
partitions change, re-creates its consumer with the new filters (the pinned
instance deletes the old consumer; the others back off 400-500 ms), as
orbit.go does. An instance whose member is not (yet) in the group waits and
starts when the member is added.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from .. import errors, options
from .._core.logfields import log_fields
from .._core.jsapi import JsApi
from .._core.message import Msg
from ..contexts import ConsumeContext
from ..kv.bucket import KeyValue, KeyValueOp
from ..models import StreamSource
from ..options import pcgroups as checks
from ..stream import make_consumer
from . import store
from .model import ELASTIC_BUCKET, PIN_HEADER, PRIORITY_GROUP, ElasticGroupConfig, MemberMapping, elastic_stream_name, group_key

__all__ = ["ElasticGroup", "ElasticMember", "create_elastic", "delete_elastic", "elastic_group_names", "open_elastic"]

log = logging.getLogger("jetstream_sync.pcgroups")

WATCH_POLL = 0.5  # seconds between two looks at whether the instance was stopped
WQ_NOT_UNIQUE = 10100  # "filtered consumer not unique on workqueue stream": a member's old consumer is still there


def _read(kv: KeyValue, stream: str, group: str) -> ElasticGroupConfig:
    config, revision = store.read(kv, stream, group, ElasticGroupConfig.from_json)
    return _with(config, revision=revision)


class ElasticMember:
    """One instance of a member of an elastic group: calls ``handler(msg)``
    on a worker thread for the member's partitions (as ``consume()``), and
    follows membership changes. Ends on :meth:`stop`, when the group is
    deleted, or when its fixed config changed (``error`` says so)."""

    def __init__(self, group: "ElasticGroup", member: str, handler: Callable[[Msg], Any], error_handler: Any,
                 ack_wait: float, max_ack_pending: Optional[int], consume: Dict[str, Any]) -> None:  # fmt: skip
        self._group, self.member = group, member
        self._handler, self._error_handler = handler, error_handler
        self._ack_wait, self._max_ack_pending, self._consume = ack_wait, max_ack_pending, consume
        self._inner: Optional[ConsumeContext] = None
        self._pin = ""
        self.error: Optional[errors.ConsumerGroupError] = None
        self._stopped = threading.Event()
        self._done = threading.Event()
        self.config = _read(group.kv, group.stream, group.name)
        self._watcher = group.kv.watch(group_key(group.stream, group.name))
        if self.config.is_member(member):
            self._join()
        self._thread = threading.Thread(target=self._run, name=f"jetstream-sync-pcg-{member}", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"<jetstream_sync.ElasticMember {self.member!r} partitions={self.partitions}>"

    @property
    def partitions(self) -> List[int]:
        """The partitions this member owns in the config this instance follows."""
        return self.config.partitions_of(self.member)

    @property
    def consuming(self) -> bool:
        """Whether this instance has its member's consumer and pulls on it (pinned or standby)."""
        return self._inner is not None and not self._inner.closed

    def _handle(self, msg: Msg) -> Any:
        pin = (msg.headers or {}).get(PIN_HEADER)
        if pin:
            self._pin = pin
        return self._handler(msg)

    def _join(self) -> None:
        """Create (or re-create) the member's consumer with its current filters and pull."""
        g = self._group
        filters = self.config.member_filters(self.member)
        if not filters:
            return
        fields: Dict[str, Any] = dict(name=self.member, ack_policy="explicit", ack_wait=self._ack_wait,
                                      filter_subjects=filters, priority_groups=[PRIORITY_GROUP],
                                      priority_policy="pinned_client", inactive_threshold=self._ack_wait,
                                      priority_timeout=max(self._ack_wait, checks.MIN_PIN_TTL))  # fmt: skip
        if self._max_ack_pending is not None:
            fields["max_ack_pending"] = self._max_ack_pending
        try:
            try:
                consumer = make_consumer(g.api, g.work_stream, None, fields, "create")
            except errors.APIError as exc:
                if exc.err_code != errors.ErrorCode.CONSUMER_ALREADY_EXISTS:
                    raise
                g.api.delete_consumer(g.work_stream, self.member)  # another view of the membership made it
                consumer = make_consumer(g.api, g.work_stream, None, fields, "create")
        except errors.APIError as exc:
            if exc.err_code != WQ_NOT_UNIQUE:  # expected while members catch up with a change
                log.warning("member %s could not create its consumer (retrying): %r", self.member, exc, extra=log_fields(consumer=self.member))
            return
        except errors.JetStreamError as exc:
            log.warning("member %s could not create its consumer (retrying): %r", self.member, exc, extra=log_fields(consumer=self.member))
            return
        expires = max(self._ack_wait / 2, checks.MIN_PIN_TTL)
        self._inner = consumer.consume(self._handle, error_handler=self._error_handler, group=PRIORITY_GROUP,
                                       expires=expires, **self._consume)  # fmt: skip

    def _stop_inner(self) -> None:
        if self._inner is not None:
            self._inner.stop()
            self._inner = None

    def _pinned(self) -> bool:
        g = self._group
        try:
            groups = g.api.consumer_info(g.work_stream, self.member).extra.get("priority_groups") or []
        except errors.JetStreamError:
            return False
        return any(p.get("group") == PRIORITY_GROUP and self._pin and p.get("pinned_client_id") == self._pin for p in groups)

    def _rebalance(self) -> None:
        if self._inner is not None:
            pinned = self._pinned()
            self._stop_inner()
            if pinned:
                try:
                    self._group.api.delete_consumer(self._group.work_stream, self.member)
                except errors.JetStreamError:
                    pass
            elif self._stopped.wait(random.uniform(0.4, 0.5)):  # let the pinned one delete it first
                return
        self._join()

    def _changed(self, entry_value: bytes) -> Optional[ElasticGroupConfig]:
        """The new config, or None (with ``error`` set) when it cannot be followed."""
        try:
            new = ElasticGroupConfig.from_json(entry_value)
        except errors.InvalidOptionError as exc:
            self.error = errors.ConsumerGroupError(f"the group's config was replaced by an invalid one: {exc}")
            return None
        old = self.config
        if (new.max_members, new.partitioning_filters, new.max_buffered_msgs, new.max_buffered_bytes) != (
            old.max_members, old.partitioning_filters, old.max_buffered_msgs, old.max_buffered_bytes
        ):
            self.error = errors.ConsumerGroupError("the elastic group's partitions, filters or buffer limits changed")
            return None
        return new

    def _run(self) -> None:
        retry_every = self._ack_wait + 0.5  # orbit.go: re-join when out of a consumer and in the membership
        retry_at = time.monotonic() + retry_every
        try:
            while not self._stopped.is_set():
                try:
                    entry = self._watcher.next(WATCH_POLL)
                except errors.TimeoutError:
                    entry = None
                if entry is None:
                    if time.monotonic() >= retry_at:
                        retry_at = time.monotonic() + retry_every
                        if not self.consuming and self.config.is_member(self.member):
                            self._stop_inner()
                            self._join()
                    continue
                if entry.operation is not KeyValueOp.PUT:
                    return  # the group was deleted
                new = self._changed(entry.value)
                if new is None:
                    return
                if self.consuming and (new.members, new.member_mappings) == (self.config.members, self.config.member_mappings):
                    continue
                self.config = new
                self._rebalance()
        except errors.JetStreamError as exc:  # stopped, or the connection went
            log.debug("elastic member %s ended: %r", self.member, exc, extra=log_fields(consumer=self.member))
        finally:
            self._stop_inner()
            self._watcher.stop()
            self._done.set()

    def stop(self) -> None:
        """End this instance (buffered messages are NAK'd); its consumer is
        left for other instances (the server removes it after ``ack_wait``
        without pulls)."""
        self._stopped.set()
        self._stop_inner()
        self._watcher.stop()

    @property
    def closed(self) -> bool:
        """Whether this instance has ended."""
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait up to ``timeout`` seconds (None: no limit) for the end; True when ended."""
        t = options.optional_timeout("timeout", timeout)
        self._group.api.connection.check_wait("the member to end", ready=self._done.is_set())
        return self._done.wait(t)

    def __enter__(self) -> "ElasticMember":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class ElasticGroup:
    """An elastic partitioned consumer group: ``config`` (as read when the
    handle was made; :meth:`refresh` reads it again), :meth:`join`, and
    membership management."""

    def __init__(self, api: JsApi, kv: KeyValue, stream: str, name: str, config: ElasticGroupConfig) -> None:
        self.api, self.kv = api, kv
        self.stream, self.name, self.config = stream, name, config

    def __repr__(self) -> str:
        return f"<jetstream_sync.ElasticGroup {self.stream}.{self.name} max_members={self.config.max_members}>"

    @property
    def work_stream(self) -> str:
        """The group's work-queue stream, ``<stream>-<group>``."""
        return elastic_stream_name(self.stream, self.name)

    def refresh(self) -> ElasticGroupConfig:
        """Read the stored config again (and keep it in ``config``)."""
        self.config = _read(self.kv, self.stream, self.name)
        return self.config

    def join(self, member: str, handler: Callable[[Msg], Any], *, error_handler: Optional[Callable[[BaseException], Any]] = None,
             ack_wait: Optional[float] = None, max_ack_pending: Optional[int] = None, **consume: Any) -> ElasticMember:  # fmt: skip
        """Join as ``member`` with ``handler(msg)`` (ack each message: explicit
        acks). The instance consumes while ``member`` is in the group, follows
        membership changes, and waits while it is not a member. ``ack_wait``
        (seconds, default 5): ack wait, pin timeout (at least 1 s) and the
        consumer's inactivity threshold; pulls expire after half of it.
        ``max_ack_pending`` (1 keeps order per key across a failover),
        ``max_messages``, ``max_bytes``, ``threshold_*``: as ``consume()``."""
        checks.member_name(member)
        options.handler("join handler", handler)
        options.handler("error_handler", error_handler, optional=True)
        wait, pending = checks.join_options(ack_wait, max_ack_pending, consume)
        return ElasticMember(self, member, handler, error_handler, wait, pending, consume)

    def _write(self, change: Callable[[ElasticGroupConfig], ElasticGroupConfig]) -> ElasticGroupConfig:
        current = self.refresh()
        new = change(current)
        self.kv.update(group_key(self.stream, self.name), new.to_json(), current.revision)
        return self.refresh()

    def add_members(self, members: List[str]) -> List[str]:
        """Add members (existing ones stay); returns the membership.
        ConsumerGroupError when the group uses member mappings;
        KeyWrongLastSequenceError when the config changed meanwhile."""
        names = checks.member_names(members)

        def change(c: ElasticGroupConfig) -> ElasticGroupConfig:
            if c.member_mappings:
                raise errors.ConsumerGroupError("this elastic group uses member mappings: set them instead")
            return _with(c, members=tuple(dict.fromkeys([*c.members, *names])))

        return list(self._write(change).members)

    def delete_members(self, members: List[str]) -> List[str]:
        """Remove members; returns the membership (errors as :meth:`add_members`)."""
        names = set(checks.member_names(members))

        def change(c: ElasticGroupConfig) -> ElasticGroupConfig:
            if c.member_mappings:
                raise errors.ConsumerGroupError("this elastic group uses member mappings: set them instead")
            return _with(c, members=tuple(m for m in c.members if m not in names))

        return list(self._write(change).members)

    def set_member_mappings(self, mappings: Any) -> None:
        """Replace the membership with explicit mappings (``{member: [partitions]}``)."""
        maps = checks.member_mappings(mappings, self.config.max_members)
        self._write(lambda c: _with(c, members=(), member_mappings=tuple(MemberMapping(m, tuple(p)) for m, p in maps)))

    def delete_member_mappings(self) -> None:
        """Remove the member mappings (no member is left)."""
        self._write(lambda c: _with(c, member_mappings=()))

    def active_members(self) -> List[str]:
        """Members whose consumer exists on the work-queue stream."""
        config = self.refresh()
        names = list(config.members) or [m.member for m in config.member_mappings]
        present = set(self.api.consumer_names(self.work_stream))
        return [m for m in names if m in present]

    def step_down(self, member: str) -> None:
        """Unpin the member's current instance: the server pins another."""
        self.api.unpin_consumer(self.work_stream, checks.member_name(member), PRIORITY_GROUP)

    def delete(self) -> None:
        """Delete the group's config and its work-queue stream."""
        delete_elastic(self.api, self.stream, self.name)


def _with(c: ElasticGroupConfig, **changes: Any) -> ElasticGroupConfig:
    fields = {f: getattr(c, f) for f in ElasticGroupConfig.__dataclass_fields__}
    fields.update(changes)
    return ElasticGroupConfig(**fields)


def create_elastic(api: JsApi, stream: str, group: str, max_members: int, filters: Any = None,
                   max_buffered_msgs: int = 0, max_buffered_bytes: int = 0) -> ElasticGroup:  # fmt: skip
    """Store an elastic group's config and create its work-queue stream
    (same replicas and storage as ``stream``). The same config again is fine;
    another one raises ConsumerGroupError."""
    options.name("stream", stream)
    checks.consumer_group_name(group)
    config = ElasticGroupConfig.checked(max_members, filters, max_buffered_msgs, max_buffered_bytes)
    fixed = ("max_members", "partitioning_filters", "max_buffered_msgs", "max_buffered_bytes")

    def same(kv: KeyValue) -> bool:
        existing = _read(kv, stream, group)
        return all(getattr(existing, f) == getattr(config, f) for f in fixed)

    kv, info = store.create_config(api, ELASTIC_BUCKET, stream, group, config.to_json(), same)
    source = StreamSource(name=stream, subject_transforms=list[Any](config.transforms()))
    api.create_stream(name=elastic_stream_name(stream, group), retention="workqueue", num_replicas=info.config.num_replicas,
                      storage=info.config.storage, max_msgs=config.max_buffered_msgs or -1,
                      max_bytes=config.max_buffered_bytes or -1, discard="new", sources=[source], allow_direct=True)  # fmt: skip
    return ElasticGroup(api, kv, stream, group, _read(kv, stream, group))


def open_elastic(api: JsApi, stream: str, group: str) -> ElasticGroup:
    """The handle of an existing elastic group (ConsumerGroupNotFoundError if none)."""
    kv = store.group_bucket(api, ELASTIC_BUCKET, stream, group)
    return ElasticGroup(api, kv, stream, group, _read(kv, stream, group))


def delete_elastic(api: JsApi, stream: str, group: str) -> None:
    """Delete the group's config, then its work-queue stream."""
    store.drop_config(api, ELASTIC_BUCKET, stream, group)
    try:
        api.delete_stream(elastic_stream_name(stream, group))
    except errors.StreamNotFoundError:
        pass


def elastic_group_names(api: JsApi, stream: str) -> List[str]:
    """The elastic groups of ``stream``."""
    options.name("stream", stream)
    return store.group_names(api, ELASTIC_BUCKET, stream)
