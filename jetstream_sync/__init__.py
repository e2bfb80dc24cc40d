"""jetstream_sync: a synchronous, thread-safe NATS JetStream client on nats-py.

Importing the package starts no thread and imports no pyspark.
"""

import typing

from .worker.shared import close_shared_clients, shared_client
from .worker.signals import install_signal_handlers
from .client import Client, connect
from .core import Subscription
from .options import DEFAULT
from ._core.otel import instrument, uninstrument
from ._engines.push import PushStats
from .consumer import BaseConsumer, Consumer, PullConsumer
from .contexts import ConsumeContext, FetchResult, MessagesContext, PullStats
from .errors import (
    APIError,
    AuthorizationError,
    BadRequestError,
    ConnectionClosedError,
    ConnectionDrainingError,
    ConsumerDeletedError,
    ConsumerNotFoundError,
    ConsumerAlreadyConsumingError,
    ConsumerPullBasedError,
    ConsumerPushBasedError,
    ConsumerSequenceMismatchError,
    ConsumerStoppedError,
    DeadlockError,
    ErrorCode,
    ForkedProcessError,
    InvalidOptionError,
    JetStreamError,
    JetStreamNotEnabledError,
    MsgAlreadyAckedError,
    MsgNotFoundError,
    NoHeartbeatError,
    NoRespondersError,
    NoServersError,
    OrderedConsumerError,
    OrderedConsumerResetError,
    NotFoundError,
    NotJSMessageError,
    RespondError,
    PermissionDeniedError,
    PinIdMismatchError,
    PullStatusError,
    SlowConsumerError,
    StreamNotFoundError,
    SubscribeError,
    SubscriptionClosedError,
    TimeoutError,
    FeatureNotSupportedError,
    FastBatchError,
    BatchClosedError,
)
from .jetstream import JetStream
from ._core.fastbatch import FastBatch
from ._core.message import Metadata, Msg, SequencePair
from .models import (
    AccountInfo,
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPauseResponse,
    ConsumerResetResponse,
    DeliverPolicy,
    DiscardPolicy,
    PubAck,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoredMsg,
    StreamConfig,
    StreamInfo,
    Schedule,
    FastPubAck,
)
from .ordered import OrderedConsumer
from .push import PushConsumer
from .stream import Stream
from .subscriptions import PullSubscription, PushSubscription
from .worker.runner import Worker, WorkerStats, run_worker

from .errors import (
    BadBucketError,
    BucketExistsError,
    BucketNotFoundError,
    InvalidBucketNameError,
    InvalidKeyError,
    KeyDeletedError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValueCodecError,
    KeyValueError,
    KeyWrongLastSequenceError,
)
from .kv import codecs  # key and value codecs (ADR-54): codecs.Base64Codec(), codecs.chain(...)
from .kv.bucket import KeyValue, KeyValueConfig, KeyValueEntry, KeyValueOp, KeyValueStatus, KeyWatcher
# object store (ADR-20)
from .errors import (
    BadObjectMetaError,
    DigestMismatchError,
    InvalidObjectNameError,
    InvalidObjectStoreNameError,
    ObjectAlreadyExistsError,
    ObjectChangedError,
    ObjectDeletedError,
    ObjectLinkError,
    ObjectNotFoundError,
    ObjectStoreExistsError,
    ObjectStoreNotFoundError,
)
# partitioned consumer groups (orbit.go pcgroups)
from .errors import ConsumerGroupError, ConsumerGroupNotFoundError
from .pcgroups import (
    ElasticGroup,
    ElasticGroupConfig,
    ElasticMember,
    PartitioningFilter,
    GroupConsumeContext,
    GroupMessagesContext,
    MemberMapping,
    StaticGroup,
    StaticGroupConfig,
    partition_transform,
    strip_partition,
)
# services (ADR-32) and request_many
from .errors import ServiceError
from .replies import Replies
from .services import EndpointInfo, EndpointStats, Service, ServiceGroup, ServiceInfo, ServiceRequest, ServiceStats
# operations: NATS contexts (ADR-21) and the system client (its answers: jetstream_sync.system)
from .options.natscontext import NatsContext
from .system import SystemClient
from .object_store.store import (
    ObjectInfo,
    ObjectLink,
    ObjectMeta,
    ObjectMetaOptions,
    ObjectResult,
    ObjectStore,
    ObjectStoreConfig,
    ObjectStoreStatus,
    ObjectWatcher,
)

__version__ = "0.1.0"

__all__ = [
    "connect",
    "instrument",
    "uninstrument",
    "DEFAULT",
    "install_signal_handlers",
    "shared_client",
    "close_shared_clients",
    "Client",
    "Subscription",
    "JetStream",
    "Stream",
    "BaseConsumer",
    "Consumer",
    "OrderedConsumer",
    "PullSubscription",
    "PushSubscription",
    "PullConsumer",
    "PushConsumer",
    "MessagesContext",
    "ConsumeContext",
    "FetchResult",
    "PullStats",
    "PushStats",
    "Msg",
    "Metadata",
    "SequencePair",
    "AccountInfo",
    "AckPolicy",
    "ConsumerConfig",
    "ConsumerInfo",
    "ConsumerPauseResponse",
    "ConsumerResetResponse",
    "DeliverPolicy",
    "DiscardPolicy",
    "PubAck",
    "ReplayPolicy",
    "RetentionPolicy",
    "StorageType",
    "StoredMsg",
    "StreamConfig",
    "StreamInfo",
    "APIError",
    "BadRequestError",
    "ConnectionClosedError",
    "ConnectionDrainingError",
    "ConsumerDeletedError",
    "ConsumerNotFoundError",
    "ConsumerAlreadyConsumingError",
    "ConsumerPullBasedError",
    "ConsumerPushBasedError",
    "ConsumerSequenceMismatchError",
    "ConsumerStoppedError",
    "AuthorizationError",
    "ErrorCode",
    "PermissionDeniedError",
    "SlowConsumerError",
    "DeadlockError",
    "ForkedProcessError",
    "InvalidOptionError",
    "JetStreamError",
    "JetStreamNotEnabledError",
    "MsgAlreadyAckedError",
    "MsgNotFoundError",
    "NoHeartbeatError",
    "NoRespondersError",
    "NoServersError",
    "NotFoundError",
    "NotJSMessageError",
    "RespondError",
    "OrderedConsumerError",
    "OrderedConsumerResetError",
    "PinIdMismatchError",
    "PullStatusError",
    "StreamNotFoundError",
    "SubscribeError",
    "SubscriptionClosedError",
    "TimeoutError",
    # message schedules (ADR-51) and fast-ingest batches (ADR-50)
    "Schedule",
    "FastBatch",
    "FastPubAck",
    "FeatureNotSupportedError",
    "FastBatchError",
    "BatchClosedError",
    "KeyValue",
    "KeyValueConfig",
    "KeyValueEntry",
    "KeyValueOp",
    "KeyValueStatus",
    "KeyWatcher",
    "KeyValueError",
    "BucketNotFoundError",
    "BucketExistsError",
    "BadBucketError",
    "KeyNotFoundError",
    "KeyDeletedError",
    "KeyWrongLastSequenceError",
    "KeyExistsError",
    "InvalidBucketNameError",
    "InvalidKeyError",
    "KeyValueCodecError",
    "codecs",
    # object store (ADR-20)
    "ObjectStore",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
    "ObjectInfo",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectLink",
    "ObjectResult",
    "ObjectWatcher",
    "ObjectStoreExistsError",
    "ObjectStoreNotFoundError",
    "ObjectNotFoundError",
    "ObjectChangedError",
    "ObjectDeletedError",
    "ObjectAlreadyExistsError",
    "DigestMismatchError",
    "BadObjectMetaError",
    "InvalidObjectStoreNameError",
    "InvalidObjectNameError",
    "ObjectLinkError",
    # services (ADR-32) and request_many
    "Service",
    "ServiceGroup",
    "ServiceRequest",
    "ServiceInfo",
    "ServiceStats",
    "EndpointInfo",
    "EndpointStats",
    "ServiceError",
    "Replies",
    # operations: NATS contexts (ADR-21) and the system client
    "NatsContext",
    "SystemClient",
    # partitioned consumer groups
    "ConsumerGroupError",
    "ConsumerGroupNotFoundError",
    "ElasticGroup",
    "ElasticGroupConfig",
    "ElasticMember",
    "PartitioningFilter",
    "GroupConsumeContext",
    "GroupMessagesContext",
    "MemberMapping",
    "StaticGroup",
    "StaticGroupConfig",
    "partition_transform",
    "strip_partition",
    # the ready worker
    "Worker",
    "WorkerStats",
    "run_worker",
]


def _public_home() -> None:
    """Public classes and functions report the package they are imported
    from (``jetstream_sync.Msg``), not the private module that defines them.
    A class's own annotations are resolved first, in the module that wrote
    them, so ``typing.get_type_hints`` keeps working after the move."""
    for name in __all__:
        obj = globals()[name]
        if not getattr(obj, "__module__", "").startswith("jetstream_sync.") or isinstance(obj, type(DEFAULT)):
            continue
        if isinstance(obj, type) and obj.__dict__.get("__annotations__"):
            hints = typing.get_type_hints(obj, include_extras=True)
            obj.__annotations__ = {k: hints.get(k, v) for k, v in obj.__dict__["__annotations__"].items()}
        obj.__module__ = "jetstream_sync"


_public_home()
