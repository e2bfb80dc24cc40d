"""Static partitioned consumer groups (orbit.go ``static_stream_consumer_group.go``).

The stream's subjects already start with a partition number (a stream
subject transform puts it there: :func:`partition_transform`). The group's
config is a JSON value under ``<stream>.<group>`` in the key-value bucket
``static-consumer-groups``; each member has a durable consumer
``<group>-<member>`` on the stream, filtered to its partitions, with priority
group ``PCG`` and policy ``pinned_client``: of the instances that join as one
member, the server delivers to one (the pinned one) and moves the pin to
another when the pinned one stops pulling for ``priority_timeout``
(= ``ack_wait``). A static group's membership never changes; delete and
re-create it to change it.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Union

from .. import errors, options
from .._core.jsapi import JsApi
from .._core.message import Msg
from ..kv.bucket import KeyValue
from ..options import pcgroups as checks
from ..stream import make_consumer
from . import store
from .member import GroupConsumeContext, GroupMessagesContext
from .model import PRIORITY_GROUP, STATIC_BUCKET, StaticGroupConfig, group_key, static_consumer_name

__all__ = ["StaticGroup", "create_static", "delete_static", "open_static", "static_group_names"]


def _read(kv: KeyValue, stream: str, group: str) -> StaticGroupConfig:
    return store.read(kv, stream, group, StaticGroupConfig.from_json)[0]


class StaticGroup:
    """A static partitioned consumer group on a stream: its ``config``
    (:class:`StaticGroupConfig`, as stored), ``join`` for members, and the
    management orbit.go has (delete, active members, step down)."""

    def __init__(self, api: JsApi, kv: KeyValue, stream: str, name: str, config: StaticGroupConfig) -> None:
        self._api, self._kv = api, kv
        self.stream, self.name, self.config = stream, name, config

    def __repr__(self) -> str:
        return f"<jetstream_sync.StaticGroup {self.stream}.{self.name} max_members={self.config.max_members}>"

    def consumer_name(self, member: str) -> str:
        """The durable consumer of ``member`` (``<group>-<member>``)."""
        return static_consumer_name(self.name, checks.member_name(member))

    def join(
        self,
        member: str,
        handler: Optional[Callable[[Msg], Any]] = None,
        *,
        error_handler: Optional[Callable[[BaseException], Any]] = None,
        ack_wait: Optional[float] = None,
        max_ack_pending: Optional[int] = None,
        **consume: Any,
    ) -> Union[GroupMessagesContext, GroupConsumeContext]:
        """Join as ``member``: create (or bind to) its consumer and pull.

        Without ``handler`` a :class:`GroupMessagesContext` to iterate (as
        ``consumer.messages()``); with one a :class:`GroupConsumeContext` that
        calls ``handler(msg)`` on a worker thread (as ``consumer.consume()``).
        Either way the member gets only its partitions' messages, in stream
        order per subject; ack them (ack policy explicit).

        ``ack_wait`` (seconds, default 5) is the consumer's ack wait and its
        pin timeout (``priority_timeout``, at least 1 s); pulls expire after
        half of it (at least 1 s), as orbit.go derives them: an instance that
        dies loses its pin, and its partitions move to another instance of the
        same member, within about ``ack_wait``. ``max_ack_pending`` (default:
        the server's) caps unacked messages (1: strictly one at a time).
        ``max_messages``, ``max_bytes``, ``threshold_messages``,
        ``threshold_bytes``: as for ``messages()``. The member's consumer must
        not exist with another config (ConsumerGroupError if it does: another
        config of the same group name). Bad arguments raise InvalidOptionError
        before anything is sent; ConsumerGroupError when ``member`` is not in
        the group or owns no partition.
        """
        name = self.consumer_name(member)
        wait, pending = checks.join_options(ack_wait, max_ack_pending, consume)
        options.handler("join handler", handler, optional=True)
        options.handler("error_handler", error_handler, optional=True)
        config = _read(self._kv, self.stream, self.name)
        filters = config.member_filters(member)
        if not config.is_member(member) or not filters:
            raise errors.ConsumerGroupError(f"{member!r} is not a member of static group {self.stream}.{self.name} (or owns no partition)")
        fields = dict(durable_name=name, ack_policy="explicit", ack_wait=wait, filter_subjects=filters,
                      priority_groups=[PRIORITY_GROUP], priority_policy="pinned_client",
                      priority_timeout=max(wait, checks.MIN_PIN_TTL))  # fmt: skip
        if pending is not None:
            fields["max_ack_pending"] = pending
        try:
            consumer = make_consumer(self._api, self.stream, None, fields, "create")
        except errors.APIError as exc:
            if exc.err_code != errors.ErrorCode.CONSUMER_ALREADY_EXISTS:
                raise
            raise errors.ConsumerGroupError(f"consumer {name!r} exists with another config: {exc.description}") from exc
        opts = dict(consume, group=PRIORITY_GROUP, expires=max(wait / 2, checks.MIN_PIN_TTL))
        key = group_key(self.stream, self.name)

        def delete() -> None:
            self._api.delete_consumer(self.stream, name)

        if handler is None:
            return GroupMessagesContext(consumer.messages(error_handler=error_handler, **opts), self._kv, key, config, member, delete)
        inner = consumer.consume(handler, error_handler=error_handler, **opts)
        return GroupConsumeContext(inner, self._kv, key, config, member, delete)

    def delete(self) -> None:
        """Delete the group: its config, then every consumer ``<group>-*`` on the stream."""
        delete_static(self._api, self.stream, self.name)

    def active_members(self) -> List[str]:
        """Members whose consumer has a pull waiting (an instance is joined)."""
        config = _read(self._kv, self.stream, self.name)
        names = list(config.members) or [m.member for m in config.member_mappings]
        waiting = {c.name for c in self._api.consumers(self.stream) if c.num_waiting}
        return [m for m in names if static_consumer_name(self.name, m) in waiting]

    def step_down(self, member: str) -> None:
        """Unpin the member's current instance: the server pins another one."""
        self._api.unpin_consumer(self.stream, self.consumer_name(member), PRIORITY_GROUP)


def create_static(
    api: JsApi, stream: str, group: str, max_members: int, members: Any = None, member_mappings: Any = None, filters: Any = None
) -> StaticGroup:
    """Store a static group's config (the bucket is made with the stream's
    replicas when missing); an existing identical config is fine, a
    different one raises ConsumerGroupError."""
    checks.consumer_group_name(group)
    options.name("stream", stream)
    config = StaticGroupConfig.checked(max_members, filters, members, member_mappings)
    kv, _ = store.create_config(api, STATIC_BUCKET, stream, group, config.to_json(), lambda kv: _read(kv, stream, group) == config)
    return StaticGroup(api, kv, stream, group, config)


def open_static(api: JsApi, stream: str, group: str) -> StaticGroup:
    """The handle of an existing static group (ConsumerGroupNotFoundError if none)."""
    kv = store.group_bucket(api, STATIC_BUCKET, stream, group)
    return StaticGroup(api, kv, stream, group, _read(kv, stream, group))


def delete_static(api: JsApi, stream: str, group: str) -> None:
    """Delete the group's config and its members' consumers (``<group>-*``)."""
    store.drop_config(api, STATIC_BUCKET, stream, group)
    for name in api.consumer_names(stream):
        if name.startswith(group + "-"):
            try:
                api.delete_consumer(stream, name)
            except errors.ConsumerNotFoundError:
                pass


def static_group_names(api: JsApi, stream: str) -> List[str]:
    """The static groups of ``stream`` (from the config bucket's keys)."""
    options.name("stream", stream)
    return store.group_names(api, STATIC_BUCKET, stream)
