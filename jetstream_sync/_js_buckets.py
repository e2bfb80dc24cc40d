"""Key-value buckets and object stores on JetStream: bucket management
entry points (the buckets themselves are in ``kv.py`` and ``object_store.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Union, cast

if TYPE_CHECKING:  # pragma: no cover
    from .jetstream import JetStream
    from .kv.bucket import KeyValue, KeyValueConfig, KeyValueStatus
    from .object_store.store import ObjectStore, ObjectStoreConfig, ObjectStoreStatus


class Buckets:
    """Key-value and object-store management (mixed into JetStream)."""

    @property
    def _js(self) -> "JetStream":
        return cast("JetStream", self)  # mixed into JetStream only

    # -- key-value ------------------------------------------------------------------

    def create_key_value(
        self, bucket: Union[str, "KeyValueConfig", None] = None, config: Optional["KeyValueConfig"] = None, **fields: Any
    ) -> "KeyValue":
        """Create a key-value bucket from a name or :class:`KeyValueConfig`
        plus its fields as keywords (``history=1``, ``ttl=None`` seconds,
        ``max_value_size``, ``max_bytes``, ``replicas=1``, ``storage="file"``,
        ``description``, ``republish``, ``placement``, ``compression=False``,
        ``limit_marker_ttl=None`` seconds, ``metadata``). Idempotent for the
        same configuration; BucketExistsError for another one."""
        from .kv import manage as kv

        return kv.upsert_bucket(self._js, bucket, config, fields, "create")

    def update_key_value(
        self, bucket: Union[str, "KeyValueConfig", None] = None, config: Optional["KeyValueConfig"] = None, **fields: Any
    ) -> "KeyValue":
        """Replace a bucket's configuration (fields as :meth:`create_key_value`); BucketNotFoundError."""
        from .kv import manage as kv

        return kv.upsert_bucket(self._js, bucket, config, fields, "update")

    def create_or_update_key_value(
        self, bucket: Union[str, "KeyValueConfig", None] = None, config: Optional["KeyValueConfig"] = None, **fields: Any
    ) -> "KeyValue":
        """Update a bucket, or create it when there is none (fields as :meth:`create_key_value`)."""
        from .kv import manage as kv

        return kv.upsert_bucket(self._js, bucket, config, fields, "")

    def key_value(self, bucket: str) -> "KeyValue":
        """A handle on an existing bucket; BucketNotFoundError, BadBucketError."""
        from .kv import manage as kv

        return kv.open_bucket(self._js, bucket)

    def delete_key_value(self, bucket: str) -> None:
        """Delete a bucket and all its keys; BucketNotFoundError."""
        from .kv import manage as kv

        kv.delete_bucket(self._js, bucket)

    def key_value_names(self) -> List[str]:
        """Names of all buckets."""
        from .kv import manage as kv

        return kv.bucket_names(self._js)

    def key_value_buckets(self) -> List["KeyValueStatus"]:
        """Status of every bucket."""
        from .kv import manage as kv

        return kv.bucket_statuses(self._js)

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
        from .object_store import store as obs
        from .object_store.model import store_config

        return obs.upsert(self._js, store_config(config, bucket, fields), "create")

    def update_object_store(
        self, bucket: Union[str, "ObjectStoreConfig", None] = None, config: Optional["ObjectStoreConfig"] = None,
        **fields: Any,
    ) -> "ObjectStore":  # fmt: skip
        """Replace an object store's config (fields left out get their
        defaults); ObjectStoreNotFoundError if it does not exist."""
        from .object_store import store as obs
        from .object_store.model import store_config

        return obs.upsert(self._js, store_config(config, bucket, fields), "update")

    def create_or_update_object_store(
        self, bucket: Union[str, "ObjectStoreConfig", None] = None, config: Optional["ObjectStoreConfig"] = None,
        **fields: Any,
    ) -> "ObjectStore":  # fmt: skip
        from .object_store import store as obs
        from .object_store.model import store_config

        return obs.upsert(self._js, store_config(config, bucket, fields), "")

    def object_store(self, bucket: str) -> "ObjectStore":
        """A handle on an existing object store; ObjectStoreNotFoundError otherwise."""
        from .object_store import store as obs

        return obs.bind(self._js, bucket)

    def delete_object_store(self, bucket: str) -> None:
        """Delete an object store and every object in it."""
        from .object_store import store as obs

        obs.delete(self._js, bucket)

    def object_store_names(self) -> List[str]:
        from .object_store import store as obs

        return obs.names(self._js)

    def object_stores(self) -> List["ObjectStoreStatus"]:
        """The status of every object store."""
        from .object_store import store as obs

        return obs.statuses(self._js)
