"""Key-value bucket management (ADR-8): the ``KV_<bucket>`` stream a bucket
configuration stands for, and create / update / open / delete / list, which
JetStream's key-value methods delegate to."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .. import errors, options
from .._core.jsapi import JsApi
from .bucket import KeyValue
from .model import STREAM_PREFIX, KeyValueConfig, KeyValueStatus
from .codecs import Codecs
from ..models import DiscardPolicy, Placement, RePublish, StoreCompression, StreamConfig, StreamInfo

_MAX_DUPLICATE_WINDOW = 120.0  # seconds; ADR-8: min(ttl, 2 minutes)



def kv_config(bucket: Any, config: Optional[KeyValueConfig], fields: Dict[str, Any]) -> KeyValueConfig:
    """A validated KeyValueConfig from a bucket name or config plus keyword overrides."""
    if isinstance(bucket, KeyValueConfig):
        options.config_once(config)
        bucket, config = None, bucket
    options.config_type(config, KeyValueConfig)
    if bucket is not None:
        fields = {**fields, "bucket": bucket}
    cfg: KeyValueConfig = options.dataclass_from(KeyValueConfig, config, fields, "invalid KeyValueConfig field")
    options.kv_bucket(cfg.bucket)
    options.kv_history(cfg.history)
    options.kv_replicas(cfg.replicas)
    if cfg.ttl is not None:
        options.duration("ttl", cfg.ttl, none_means="no limit")
    if cfg.limit_marker_ttl is not None:
        options.duration("limit_marker_ttl", cfg.limit_marker_ttl, minimum=options.MIN_MSG_TTL)
    options.optional_size("max_value_size", cfg.max_value_size)
    options.optional_size("max_bytes", cfg.max_bytes)
    options.string_map("metadata", cfg.metadata)
    options.kv_description(cfg.description)
    options.flag("compression", cfg.compression)
    cfg.placement = options.model_or_dict("placement", cfg.placement, Placement)
    cfg.republish = options.model_or_dict("republish", cfg.republish, RePublish)
    options.kv_mirror_sources(cfg.mirror, cfg.sources)
    if cfg.mirror is not None:
        cfg.mirror = options.kv_origin("mirror", cfg.mirror, cfg.bucket)
    if cfg.sources is not None:
        cfg.sources = [options.kv_origin(f"sources[{i}]", s, cfg.bucket) for i, s in enumerate(cfg.sources)]
    return cfg


def stream_config(cfg: KeyValueConfig) -> StreamConfig:
    """The stream of a bucket, as ADR-8 lays it out (validated). A mirror
    has no subjects of its own and answers direct gets for its origin
    (``mirror_direct``), as nats.go sets it up."""

    ttl = cfg.ttl or 0.0
    marker = cfg.limit_marker_ttl
    return options.build_config(StreamConfig, None, dict(
        name=STREAM_PREFIX + cfg.bucket,
        description=cfg.description,
        subjects=None if cfg.mirror else [f"$KV.{cfg.bucket}.>"],
        max_msgs_per_subject=cfg.history,
        max_msgs=-1,
        max_bytes=cfg.max_bytes or -1,
        max_msg_size=cfg.max_value_size or -1,
        max_age=ttl,
        duplicate_window=min(ttl, _MAX_DUPLICATE_WINDOW) if ttl else _MAX_DUPLICATE_WINDOW,
        max_consumers=-1,
        storage=cfg.storage,
        num_replicas=cfg.replicas,
        placement=cfg.placement,
        republish=cfg.republish,
        discard=DiscardPolicy.NEW,
        allow_rollup_hdrs=True,
        deny_delete=True,
        allow_direct=True,
        compression=StoreCompression.S2 if cfg.compression else None,
        allow_msg_ttl=True if marker else None,
        subject_delete_marker_ttl=marker,
        metadata=cfg.metadata,
        mirror=cfg.mirror,
        mirror_direct=True if cfg.mirror else None,
        sources=cfg.sources or None,
    ))  # fmt: skip


def upsert_bucket(js: JsApi, bucket: Any, config: Optional[KeyValueConfig], fields: Dict[str, Any], action: str) -> "KeyValue":
    """create / update / create-or-update (``action`` "create", "update", "") a bucket."""
    cfg = kv_config(bucket, config, fields)
    scfg = stream_config(cfg)
    if cfg.limit_marker_ttl:
        _require_api_level(js, 1, "limit_marker_ttl")
    if action == "create":
        return _create(js, cfg, scfg)
    try:
        stream = js.update_stream(scfg)
    except errors.StreamNotFoundError as exc:
        if action == "update":
            raise errors.BucketNotFoundError(exc.code, exc.err_code, f"bucket {cfg.bucket!r} not found") from exc
        return _create(js, cfg, scfg)
    return KeyValue(js, stream)


def _create(js: JsApi, cfg: KeyValueConfig, scfg: StreamConfig) -> "KeyValue":
    try:
        return KeyValue(js, js.create_stream(scfg))
    except errors.APIError as exc:
        if exc.err_code != errors.ErrorCode.STREAM_NAME_IN_USE:
            raise
        existing = js.stream_info(scfg.name).config  # type: ignore[arg-type]
        if not _only_repairs_differ(existing, scfg):
            raise errors.BucketExistsError(exc.code, exc.err_code, f"bucket {cfg.bucket!r} exists with another configuration") from exc
    # A bucket of an older client (discard old, no direct get): bring it up to date.
    return KeyValue(js, js.update_stream(scfg))


def _only_repairs_differ(existing: StreamConfig, wanted: StreamConfig) -> bool:
    have, want = existing.as_dict(), wanted.as_dict()
    # The server leaves out false and zero values the request spelled out.
    return all((have.get(k) or None) == (v or None) for k, v in want.items() if k not in ("discard", "allow_direct"))


def _require_api_level(js: JsApi, level: int, what: str) -> None:
    have = getattr(js.account_info().api, "level", None) or 0
    if have < level:
        raise errors.InvalidOptionError(f"{what} needs a server with JetStream API level {level} (nats-server 2.11+), this one has {have}")


def open_bucket(js: JsApi, bucket: str, key_codec: Any = None, value_codec: Any = None) -> "KeyValue":
    """A handle on an existing bucket, with codecs; BucketNotFoundError / BadBucketError."""
    name = STREAM_PREFIX + options.kv_bucket(bucket)
    with_codecs = Codecs.checked(key_codec, value_codec)
    try:
        info = js.stream_info(name)
    except errors.StreamNotFoundError as exc:
        raise errors.BucketNotFoundError(exc.code, exc.err_code, f"bucket {bucket!r} not found") from exc
    if (info.config.max_msgs_per_subject or 0) < 1:
        raise errors.BadBucketError(f"stream {name!r} is not a key-value bucket (max_msgs_per_subject < 1)")
    return KeyValue(js, info, with_codecs)


def delete_bucket(js: JsApi, bucket: str) -> None:
    try:
        js.delete_stream(STREAM_PREFIX + options.kv_bucket(bucket))
    except errors.StreamNotFoundError as exc:
        raise errors.BucketNotFoundError(exc.code, exc.err_code, f"bucket {bucket!r} not found") from exc


def bucket_streams(js: JsApi) -> List[StreamInfo]:
    return [s for s in js.streams(subject="$KV.*.>") if (s.config.name or "").startswith(STREAM_PREFIX)]


def bucket_names(js: JsApi) -> List[str]:
    return [n[len(STREAM_PREFIX) :] for n in js.stream_names(subject="$KV.*.>") if n.startswith(STREAM_PREFIX)]


def bucket_statuses(js: JsApi) -> List[KeyValueStatus]:
    return [KeyValueStatus(s.config.name[len(STREAM_PREFIX) :], s) for s in bucket_streams(js)]  # type: ignore[index]
