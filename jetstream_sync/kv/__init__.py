"""Key-value buckets (ADR-8, ADR-48): the bucket handle and its watcher
(``bucket.py``) and bucket management (``manage.py``, what ``js.key_value()``
and friends call). Layer 5: built on the handles, given the JsApi."""

from .bucket import KeyValue, KeyValueConfig, KeyValueEntry, KeyValueOp, KeyValueStatus, KeyWatcher

__all__ = ["KeyValue", "KeyValueConfig", "KeyValueEntry", "KeyValueOp", "KeyValueStatus", "KeyWatcher"]
