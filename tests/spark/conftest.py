"""The local[2] SparkSession of the spark tests, stopped before the server.

A process holds one SparkContext at a time: the standalone-cluster tests stop
the local session to run a driver against their cluster, and the next test
that asks for ``spark`` gets a fresh local one.
"""

from __future__ import annotations

import shutil
from typing import Any, Dict, Iterator

import pytest

from .standalone import session_options

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")
if shutil.which("java") is None:  # pragma: no cover
    pytest.skip("Spark needs Java 17+", allow_module_level=True)

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def local_spark_holder(server) -> Iterator[Dict[str, Any]]:
    """Holds the local session (key ``"session"``) and stops it at the end of the run."""
    holder: Dict[str, Any] = {}
    yield holder
    if holder.get("session") is not None:
        holder["session"].stop()


@pytest.fixture
def spark(local_spark_holder) -> object:
    from pyspark.sql import SparkSession

    session = local_spark_holder.get("session")
    if session is None or session.sparkContext._jsc is None:  # none yet, or stopped for a cluster's driver
        builder = SparkSession.builder.master("local[2]").appName("jetstream-sync-tests")
        for key, value in session_options().items():
            builder = builder.config(key, value)
        session = local_spark_holder["session"] = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        from jetstream_sync.spark import register

        register(session)  # explicit, as the docs advise (it checks the workers' interpreter)
    return session
