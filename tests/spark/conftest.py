"""One local[2] SparkSession for the whole run, stopped before the server."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Iterator

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")
if shutil.which("java") is None:  # pragma: no cover
    pytest.skip("Spark needs Java 17+", allow_module_level=True)

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark(server) -> Iterator[object]:
    from pyspark.sql import SparkSession

    # Workers must run this interpreter (with pyarrow and this package); all traffic on loopback.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("jetstream-sync-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    from jetstream_sync.spark import register

    register(session)  # explicit, as the docs advise (it checks the workers' interpreter)
    yield session
    session.stop()
