"""Partitioned consumer groups, wire-compatible with Synadia's orbit.go
``pcgroups``: a stream's subjects mapped to N partitions, each member of a
group consuming only its partitions, in order per subject (layer 5).

- ``model``: the config bucket, key and JSON, consumer names, the partition
  filters of a member, the partitioning subject transform;
- ``static``: static groups (create, open, list, delete, join, step down);
- ``elastic``: elastic groups (create with their work-queue stream, add /
  remove members, mappings, join with rebalancing);
- ``store``: the config buckets (open, read with revision, list);
- ``member``: a joined member instance (``messages()``-like or
  ``consume()``-like), ended by a deleted or changed config.
"""

from .elastic import ElasticGroup, ElasticMember, create_elastic, delete_elastic, elastic_group_names, open_elastic
from .member import GroupConsumeContext, GroupMessagesContext
from .model import (
    ELASTIC_BUCKET,
    PRIORITY_GROUP,
    STATIC_BUCKET,
    ElasticGroupConfig,
    MemberMapping,
    PartitioningFilter,
    StaticGroupConfig,
    partition_filters,
    partition_transform,
    strip_partition,
)
from .static import StaticGroup, create_static, delete_static, open_static, static_group_names

__all__ = [
    "ElasticGroup",
    "ElasticGroupConfig",
    "ElasticMember",
    "PartitioningFilter",
    "create_elastic",
    "delete_elastic",
    "elastic_group_names",
    "open_elastic",
    "ELASTIC_BUCKET",
    "PRIORITY_GROUP",
    "STATIC_BUCKET",
    "GroupConsumeContext",
    "GroupMessagesContext",
    "MemberMapping",
    "StaticGroup",
    "StaticGroupConfig",
    "create_static",
    "delete_static",
    "open_static",
    "partition_filters",
    "partition_transform",
    "static_group_names",
    "strip_partition",
]
