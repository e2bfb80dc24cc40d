"""jetstream_sync: a synchronous, thread-safe NATS JetStream client on nats-py.

Importing the package starts no thread and imports no pyspark. Nor does it
import the feature modules a process may never use (key-value buckets, object
stores, consumer groups, services, the system client, NATS contexts, the
worker runner): their public names below are imported at their first use
(``__getattr__``), so that a process that only reads a stream, such as each
Spark Python worker, starts faster.
"""

import importlib as _importlib
import sys as _sys
import typing

from .worker.shared import close_shared_clients, shared_client
from .worker.signals import install_signal_handlers
from .client import Client, connect
from .core import Subscription
from .options import DEFAULT
from ._core import lazy as _lazy
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

# The features' errors are cheap (errors.py is imported anyway): imported now.
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
# services (ADR-32) and request_many (replies.py: core.py imports it anyway)
from .errors import ServiceError
from .replies import Replies

# The names imported at their first use: what type checkers and readers see.
# _LAZY below holds the same names and modules (tests/unit/test_lazy_import.py checks it).
if typing.TYPE_CHECKING:
    from .kv import codecs  # key and value codecs (ADR-54): codecs.Base64Codec(), codecs.chain(...)
    from .kv.bucket import KeyValue, KeyValueConfig, KeyValueEntry, KeyValueOp, KeyValueStatus, KeyWatcher
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
    from .worker.runner import Worker, WorkerStats, run_worker

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


# Each name imported at its first use, and the module it is imported from.
_LAZY: typing.Dict[str, str] = {
    "codecs": "jetstream_sync.kv",
    **dict.fromkeys(
        ["KeyValue", "KeyValueConfig", "KeyValueEntry", "KeyValueOp", "KeyValueStatus", "KeyWatcher"],
        "jetstream_sync.kv.bucket",
    ),
    **dict.fromkeys(
        ["ElasticGroup", "ElasticGroupConfig", "ElasticMember", "PartitioningFilter", "GroupConsumeContext",
         "GroupMessagesContext", "MemberMapping", "StaticGroup", "StaticGroupConfig", "partition_transform",
         "strip_partition"],
        "jetstream_sync.pcgroups",
    ),  # fmt: skip
    **dict.fromkeys(
        ["EndpointInfo", "EndpointStats", "Service", "ServiceGroup", "ServiceInfo", "ServiceRequest", "ServiceStats"],
        "jetstream_sync.services",
    ),
    "NatsContext": "jetstream_sync.options.natscontext",
    "SystemClient": "jetstream_sync.system",
    **dict.fromkeys(
        ["ObjectInfo", "ObjectLink", "ObjectMeta", "ObjectMetaOptions", "ObjectResult", "ObjectStore",
         "ObjectStoreConfig", "ObjectStoreStatus", "ObjectWatcher"],
        "jetstream_sync.object_store.store",
    ),  # fmt: skip
    **dict.fromkeys(["Worker", "WorkerStats", "run_worker"], "jetstream_sync.worker.runner"),
}
# Subpackages that were attributes of the package as soon as it was imported,
# when it imported them: they still are, imported at first read.
_SUBPACKAGES = frozenset({"kv", "object_store", "pcgroups", "services", "system"})


def __getattr__(name: str) -> typing.Any:
    """A public name of a feature module, imported at its first use (then
    kept here: this runs once per name), or one of ``_SUBPACKAGES``."""
    if name in _LAZY:
        module = _importlib.import_module(_LAZY[name])
        value = getattr(module, name) if hasattr(module, name) else _importlib.import_module(f"{module.__name__}.{name}")
        _public_home(value)
        globals()[name] = value
        _publish_loaded()  # the module's other public names, and what it imported
        return value
    if name in _SUBPACKAGES:
        module = _importlib.import_module(f"{__name__}.{name}")  # binds it here
        _publish_loaded()
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> typing.List[str]:
    return sorted(set(__all__) | set(globals()))


def _public_home(obj: typing.Any) -> None:
    """Public classes and functions report the package they are imported
    from (``jetstream_sync.Msg``), not the private module that defines them.
    A class's own annotations are resolved first, in the module that wrote
    them, so ``typing.get_type_hints`` keeps working after the move."""
    if not getattr(obj, "__module__", "").startswith("jetstream_sync.") or isinstance(obj, type(DEFAULT)):
        return
    if isinstance(obj, type) and obj.__dict__.get("__annotations__"):
        hints = typing.get_type_hints(obj, include_extras=True)
        obj.__annotations__ = {k: hints.get(k, v) for k, v in obj.__dict__["__annotations__"].items()}
    obj.__module__ = "jetstream_sync"


@_lazy.on_load
def _publish_loaded() -> None:
    """Give their public home to the names of _LAZY whose module is imported
    by now (by ``__getattr__``, or by a module of the package at its first
    use: ``js.key_value()``), and keep them here, as if read once."""
    for name, module_name in _LAZY.items():
        if name not in globals() and module_name in _sys.modules:
            # Imports nothing new; waits if another thread is still importing it.
            module = _importlib.import_module(module_name)
            if hasattr(module, name):
                value = getattr(module, name)
                _public_home(value)
                globals()[name] = value


for _name in __all__:
    if _name in globals():
        _public_home(globals()[_name])
del _name
_publish_loaded()
