"""PySpark integration (install the ``spark`` extra).

- ``spark.read.format("jetstream")`` / ``readStream`` / ``write`` /
  ``writeStream``: the ``jetstream`` data source (registered by
  :func:`register`, or found automatically through the ``pyspark_jetstream``
  module).
- :func:`publish_partition` for ``df.foreachPartition``.
- :func:`shared_client` / :func:`close_all`: one client per worker process.

See docs/guides/pyspark.md.
"""

from ._clients import close_all, connect_options, shared_client
from ._read import DataLossError, PartitionIncompleteError
from ._write import PublishCounts, publish_partition
from .datasource import SCHEMA, JetStreamDataSource

__all__ = [
    "JetStreamDataSource",
    "SCHEMA",
    "register",
    "publish_partition",
    "PublishCounts",
    "shared_client",
    "close_all",
    "connect_options",
    "DataLossError",
    "PartitionIncompleteError",
]


def register(spark) -> None:  # type: ignore[no-untyped-def]
    """Register the ``jetstream`` format on a SparkSession."""
    spark.dataSource.register(JetStreamDataSource)
