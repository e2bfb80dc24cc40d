"""The config buckets both kinds of group keep their configs in: open or
create one, read a group's config (with its revision), list a stream's groups."""

from __future__ import annotations

from typing import Callable, List, Tuple, TypeVar

from .. import errors, options
from ..options import pcgroups as checks
from .._core.jsapi import JsApi
from ..kv import manage as kv_manage
from ..kv.bucket import KeyValue
from ..models import StorageType, StreamInfo
from .model import group_key

T = TypeVar("T")


def config_bucket(api: JsApi, bucket: str) -> KeyValue:
    """The config bucket; ConsumerGroupNotFoundError when it does not exist."""
    try:
        return kv_manage.open_bucket(api, bucket)
    except errors.BucketNotFoundError as exc:
        raise errors.ConsumerGroupNotFoundError(f"no consumer groups: bucket {bucket!r} does not exist") from exc


def bucket_for(api: JsApi, bucket: str, replicas: int) -> KeyValue:
    """The config bucket, made as orbit.go makes it (file storage, the
    stream's replicas) when missing."""
    try:
        return kv_manage.open_bucket(api, bucket)
    except errors.BucketNotFoundError:
        return kv_manage.upsert_bucket(api, bucket, None, {"replicas": replicas, "storage": StorageType.FILE}, "")


def read(kv: KeyValue, stream: str, group: str, parse: Callable[[bytes], T]) -> Tuple[T, int]:
    """A group's config and its revision; ConsumerGroupNotFoundError, or
    ConsumerGroupError when what is stored is not a valid config."""
    try:
        entry = kv.get(group_key(stream, group))
    except errors.KeyNotFoundError as exc:
        raise errors.ConsumerGroupNotFoundError(f"no consumer group {group!r} on stream {stream!r} in {kv.bucket!r}") from exc
    try:
        return parse(entry.value), entry.revision
    except errors.InvalidOptionError as exc:
        raise errors.ConsumerGroupError(f"the stored config of group {stream}.{group} is not valid: {exc}") from None


def group_names(api: JsApi, bucket: str, stream: str) -> List[str]:
    """The groups of ``stream`` (keys ``<stream>.<group>``); [] without a bucket."""
    try:
        keys = config_bucket(api, bucket).keys()
    except errors.ConsumerGroupNotFoundError:
        return []
    return sorted(k.split(".")[1] for k in keys if k.split(".")[0] == stream and len(k.split(".")) >= 2)


def group_bucket(api: JsApi, bucket: str, stream: str, group: str) -> KeyValue:
    """The names checked, then the config bucket (ConsumerGroupNotFoundError without one)."""
    options.name("stream", stream)
    checks.consumer_group_name(group)
    return config_bucket(api, bucket)


def drop_config(api: JsApi, bucket: str, stream: str, group: str) -> None:
    """Delete a group's config (a delete marker members see); none is fine."""
    try:
        group_bucket(api, bucket, stream, group).delete(group_key(stream, group))
    except errors.ConsumerGroupNotFoundError:
        pass


def create_config(
    api: JsApi, bucket: str, stream: str, group: str, data: bytes, same: Callable[[KeyValue], bool]
) -> Tuple[KeyValue, StreamInfo]:
    """Store a new group's config (the bucket made when missing, with the
    stream's replicas); when one is there already, ``same(kv)`` must say it
    matches, else ConsumerGroupError. Returns the bucket and the stream's info."""
    info = api.stream_info(stream)
    kv = bucket_for(api, bucket, info.config.num_replicas or 1)
    try:
        kv.create(group_key(stream, group), data)
    except errors.KeyExistsError:
        if not same(kv):
            raise errors.ConsumerGroupError(f"group {stream}.{group} exists in {bucket!r} with another config; delete it first") from None
    return kv, info
