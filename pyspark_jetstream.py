"""Found by pyspark's data source lookup (modules named ``pyspark_*``): makes
``format("jetstream")`` work without ``spark.dataSource.register``."""

from jetstream_sync.spark import JetStreamDataSource as DefaultSource

__all__ = ["DefaultSource"]
