"""Key-value buckets (ADR-8, ADR-48, codecs ADR-54): the bucket handle
(``bucket.py``), its watcher (``watch.py``), the entry, configuration and
status (``model.py``), key and value codecs (``codecs.py``) and bucket
management (``manage.py``, what ``js.key_value()`` and friends call, mirrors
and sources included). Layer 5: built on the handles, given the JsApi."""

from .bucket import KeyValue, KeyValueConfig, KeyValueEntry, KeyValueOp, KeyValueStatus, KeyWatcher

__all__ = ["KeyValue", "KeyValueConfig", "KeyValueEntry", "KeyValueOp", "KeyValueStatus", "KeyWatcher"]
