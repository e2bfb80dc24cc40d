"""Reference data from a key-value bucket on the executors: read once per
Python worker process, kept current by a watch, for joins in
``foreachPartition``, ``mapInPandas`` or a UDF."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Dict, Iterator, Optional, Tuple

import jetstream_sync as jss

from ..options import buckets, duration
from ..options.connection import ConnectionSettings, connection_settings
from ._clients import CLOSE_HOOKS, Connection, shared_client

__all__ = ["KVLookup"]

_SNAPSHOTS: Dict[Tuple[Any, ...], "_Snapshot"] = {}
_SNAPSHOTS_LOCK = threading.Lock()


class KVLookup:
    """A key-value bucket as a local dictionary in every Python worker process.

    Make it on the driver and use it in the functions Spark runs::

        rates = KVLookup(conn, "fx_rates")

        def enrich(batches):
            for pdf in batches:
                pdf["rate"] = [float(rates.get(c, b"0")) for c in pdf["currency"]]
                yield pdf

        df.mapInPandas(enrich, schema).write...

    Only the connection settings and the bucket name travel to the executors.
    The first :meth:`get` in a process reads every key of the bucket (one
    watch, waiting up to ``timeout`` seconds, default 30); later calls,
    from any task or thread of that process, are dictionary lookups. With
    ``watch=True`` (the default) the watch stays open and applies every
    change in revision order while the process lives, so long streaming
    queries see new reference data within the watch's delivery delay; with
    ``watch=False`` the first reading is kept as it is.

    ``connection``: the servers, or a mapping of the data source's connection
    options (as :func:`publish_partition`). Values are the stored bytes.
    """

    def __init__(self, connection: Connection, bucket: str, *, watch: bool = True, timeout: float = 30.0) -> None:
        self._settings: ConnectionSettings = connection_settings(connection)  # checked here, on the driver
        self.bucket = buckets.kv_bucket(bucket)
        self.watch = bool(watch)
        self.timeout = duration("timeout", timeout)

    def __repr__(self) -> str:
        return f"<KVLookup bucket={self.bucket!r} watch={self.watch}>"

    def _snapshot(self) -> "_Snapshot":
        key = (self._settings, self.bucket, self.watch, os.getpid())  # a forked child reads its own
        snap = _SNAPSHOTS.get(key)  # the common case, once per row: no lock (a dict read is atomic)
        if snap is not None and snap.loaded and snap.error is None:
            return snap
        with _SNAPSHOTS_LOCK:
            snap = _SNAPSHOTS.get(key)
            if snap is None or snap.error is not None:  # none yet, or its watch failed: read afresh
                snap = _SNAPSHOTS[key] = _Snapshot(self._settings, self.bucket, self.watch)
        snap.wait_loaded(self.timeout)
        return snap

    def get(self, key: str, default: Optional[bytes] = None) -> Optional[bytes]:
        """The value of ``key`` in this process's copy, or ``default``."""
        return self._snapshot().get(key, default)

    def __getitem__(self, key: str) -> bytes:
        value = self._snapshot().get(key, None)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return self._snapshot().get(key, None) is not None  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self._snapshot().values)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._snapshot().values))

    @property
    def revision(self) -> int:
        """The bucket revision this process's copy has reached (0: empty bucket)."""
        return self._snapshot().revision

    def wait_for(self, revision: int, timeout: float = 10.0) -> bool:
        """Wait up to ``timeout`` seconds until this process's copy holds
        ``revision`` (a put's return value): read-your-writes. False on timeout."""
        return self._snapshot().wait_revision(revision, duration("timeout", timeout))

    def snapshot(self) -> Dict[str, bytes]:
        """A copy of this process's dictionary, key -> value."""
        snap = self._snapshot()
        with snap.cond:
            return dict(snap.values)


def close_lookups() -> None:
    """Stop every watch of this process's lookups; the next lookup reads afresh."""
    with _SNAPSHOTS_LOCK:
        snaps = list(_SNAPSHOTS.values())
        _SNAPSHOTS.clear()
    for snap in snaps:
        snap.stop()


CLOSE_HOOKS.append(close_lookups)


class _Snapshot:
    """One process's copy of a bucket and the thread that keeps it."""

    def __init__(self, settings: ConnectionSettings, bucket: str, watch: bool) -> None:
        self._stop = threading.Event()
        self.values: Dict[str, bytes] = {}
        self.revision = 0
        self.cond = threading.Condition()
        self.loaded = False
        self.error: Optional[BaseException] = None  # the watch ended with it
        self._watch = watch
        self._thread = threading.Thread(
            target=self._run, args=(settings, bucket), name=f"jetstream-sync-kvlookup-{bucket}", daemon=True
        )
        self._thread.start()

    def _run(self, settings: ConnectionSettings, bucket: str) -> None:
        try:
            kv = shared_client(settings).jetstream().key_value(bucket)
            with kv.watch_all() as watcher:
                self._watcher = watcher
                if self._stop.is_set():
                    return
                for entry in watcher:
                    with self.cond:
                        if entry is None:  # every key read: ready
                            self.loaded = True
                        else:
                            if entry.operation is jss.KeyValueOp.PUT:
                                self.values[entry.key] = entry.value
                            else:
                                self.values.pop(entry.key, None)
                            self.revision = entry.revision
                        self.cond.notify_all()
                    if self.loaded and not self._watch:
                        return
        except Exception as exc:  # the lookup that waits raises it; the next one reads afresh
            with self.cond:
                self.error = exc
                self.cond.notify_all()

    def stop(self) -> None:
        self._stop.set()
        watcher = getattr(self, "_watcher", None)
        if watcher is not None:
            watcher.stop()

    def wait_loaded(self, timeout: float) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.loaded or self.error is not None, timeout):
                raise jss.TimeoutError(f"key-value bucket not read within {timeout:g}s")
            if self.error is not None:
                raise self.error

    def get(self, key: str, default: Optional[bytes]) -> Optional[bytes]:
        return self.values.get(key, default)  # a dict read is atomic under the GIL

    def wait_revision(self, revision: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.revision < revision:
                left = deadline - time.monotonic()
                if left <= 0 or (self.error is not None and not self._thread.is_alive()):
                    return False
                self.cond.wait(left)
            return True
