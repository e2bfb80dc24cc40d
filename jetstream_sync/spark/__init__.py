"""PySpark integration (install the ``spark`` extra).

- ``spark.read.format("jetstream")`` / ``readStream`` / ``write`` /
  ``writeStream``: the ``jetstream`` data source (registered by
  :func:`register`, or found automatically through the ``pyspark_jetstream``
  module).
- :func:`publish_partition` for ``df.foreachPartition``.
- :func:`trace_options`: a write's messages continue the driver's trace.
- :class:`KVLookup`: a key-value bucket as a dictionary in every worker process.
- :func:`shared_client` / :func:`close_all`: one client per worker process.

See docs/guides/pyspark.md.
"""

import os
import shutil
import subprocess
import sys
from typing import Optional

from ._clients import close_all, connect_options, shared_client
from ._lookup import KVLookup
from ._read import DataLossError, PartitionIncompleteError
from ._write import PublishCounts, publish_partition, trace_options
from .datasource import SCHEMA, JetStreamDataSource

__all__ = [
    "JetStreamDataSource",
    "SCHEMA",
    "register",
    "publish_partition",
    "trace_options",
    "KVLookup",
    "PublishCounts",
    "shared_client",
    "close_all",
    "connect_options",
    "DataLossError",
    "PartitionIncompleteError",
]


# A session setting that says this session has the source registered: Spark
# warns when a registration replaces another, and a setting, like the
# registrations, belongs to one session (cloneSession copies both, newSession neither).
REGISTERED_SETTING = "jetstream_sync.spark.registered"


def register(spark) -> None:  # type: ignore[no-untyped-def]
    """Make sure the ``jetstream`` format is registered on a SparkSession,
    without a Spark warning about a replaced source: a source Spark already
    knows by that name (found at start-up through the ``pyspark_jetstream``
    module, or registered before) is left alone, and a second call does nothing.

    On a ``local[...]`` master, first check that the interpreter Spark starts
    its Python workers with (``PYSPARK_PYTHON``, default ``python3`` on PATH)
    can import this package: otherwise every task would fail later with a
    ``ModuleNotFoundError`` deep in an executor log. Raises ``RuntimeError``
    saying what to set.
    """
    source = f"{JetStreamDataSource.__module__}.{JetStreamDataSource.__qualname__}"
    if spark.conf.get(REGISTERED_SETTING, None) == source:
        return
    problem = worker_python_problem(_worker_python(spark))
    if problem is not None:
        raise RuntimeError(problem)
    if not _source_known(spark, JetStreamDataSource.name()):
        spark.dataSource.register(JetStreamDataSource)
    spark.conf.set(REGISTERED_SETTING, source)


def _source_known(spark, name: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether the session's data source manager already has ``name``: Spark's
    static lookup registers every ``pyspark_*`` module's ``DefaultSource`` (so
    ``pyspark_jetstream``'s) and logs a WARN when a registration replaces it.
    A Spark Connect session has no JVM on this side to ask: False, so the
    source is registered (once per session: ``REGISTERED_SETTING``)."""
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
    except Exception:  # Spark Connect (no _jsparkSession), or a Spark without the manager
        return False
    return bool(manager.dataSourceExists(name))


def _worker_python(spark) -> Optional[str]:  # type: ignore[no-untyped-def]
    """The workers' interpreter when they run on this machine, else None."""
    try:
        sc = spark.sparkContext
        if not str(sc.master).startswith("local"):
            return None  # executors elsewhere: their interpreter is not ours to check
        return str(spark.conf.get("spark.pyspark.python", None) or sc.pythonExec)
    except Exception:  # Spark Connect sessions have no SparkContext: nothing to check
        return None


def worker_python_problem(python: Optional[str], timeout: float = 60.0) -> Optional[str]:
    """Why ``python`` cannot run this package's Spark code, or None when it can."""
    if python is None:
        return None
    found = shutil.which(python)
    # abspath, not realpath: a venv's python is a symlink to the base
    # interpreter, which cannot import what the venv has.
    if found is not None and os.path.abspath(found) == os.path.abspath(sys.executable):
        return None
    fix = f"set PYSPARK_PYTHON={sys.executable} before the SparkSession is created"
    if found is None:
        return f"Spark's Python workers would run {python!r}, which is not on PATH: {fix}"
    try:
        ok = subprocess.run([found, "-c", "import jetstream_sync, pyarrow"], capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Spark's Python workers would run {found}, which failed to start ({exc}): {fix}"
    if ok.returncode != 0:
        return f"Spark's Python workers would run {found}, which cannot import jetstream_sync and pyarrow: {fix}"
    return None
