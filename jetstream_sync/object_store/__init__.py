"""Object stores (ADR-20): the store handle and bucket management
(``store.py``), reads and watches (``read.py``), the info model and chunking
(``model.py``). Layer 5: built on the handles, given the JsApi."""

from .store import (
    ObjectStore,
    ObjectResult,
    ObjectWatcher,
    ObjectInfo,
    ObjectMeta,
    ObjectMetaOptions,
    ObjectLink,
    ObjectStoreConfig,
    ObjectStoreStatus,
)

__all__ = [
    "ObjectStore",
    "ObjectResult",
    "ObjectWatcher",
    "ObjectInfo",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectLink",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
]
