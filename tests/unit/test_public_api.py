"""The public names: everything importable before the layout change still
imports, and public classes report the package, not a private module."""

import importlib

import pytest

import jetstream_sync as jss

# Taken from the package as it was before the modules moved into layer folders
# (issue 19); a name may be added here, never dropped.
PUBLIC = {
    "jetstream_sync": [
        "APIError", "AccountInfo", "AckPolicy", "AuthorizationError", "BadBucketError", "BadObjectMetaError",
        "BadRequestError", "BaseConsumer", "BucketExistsError", "BucketNotFoundError", "Client",
        "ConnectionClosedError", "ConsumeContext", "Consumer", "ConsumerAlreadyConsumingError",
        "ConsumerConfig", "ConsumerDeletedError", "ConsumerInfo", "ConsumerNotFoundError",
        "ConsumerPauseResponse", "ConsumerPullBasedError", "ConsumerPushBasedError", "ConsumerResetResponse",
        "ConsumerSequenceMismatchError", "ConsumerStoppedError", "DeadlockError", "DeliverPolicy",
        "DigestMismatchError", "DiscardPolicy", "ErrorCode", "FetchResult", "ForkedProcessError",
        "InvalidBucketNameError", "InvalidKeyError", "InvalidObjectNameError", "InvalidObjectStoreNameError",
        "InvalidOptionError", "JetStream", "JetStreamError", "JetStreamNotEnabledError", "KeyDeletedError",
        "KeyExistsError", "KeyNotFoundError", "KeyValue", "KeyValueConfig", "KeyValueEntry", "KeyValueError",
        "KeyValueOp", "KeyValueStatus", "KeyWatcher", "KeyWrongLastSequenceError", "MessagesContext",
        "Metadata", "Msg", "MsgAlreadyAckedError", "MsgNotFoundError", "NoHeartbeatError",
        "NoRespondersError", "NoServersError", "NotFoundError", "NotJSMessageError",
        "ObjectAlreadyExistsError", "ObjectChangedError", "ObjectDeletedError", "ObjectInfo", "ObjectLink",
        "ObjectLinkError", "ObjectMeta", "ObjectMetaOptions", "ObjectNotFoundError", "ObjectResult",
        "ObjectStore", "ObjectStoreConfig", "ObjectStoreExistsError", "ObjectStoreNotFoundError",
        "ObjectStoreStatus", "ObjectWatcher", "OrderedConsumer", "OrderedConsumerError",
        "OrderedConsumerResetError", "PermissionDeniedError", "PinIdMismatchError", "PubAck", "PullConsumer",
        "PullStats", "PullStatusError", "PullSubscription", "PushConsumer", "PushStats", "PushSubscription",
        "ReplayPolicy", "RespondError", "RetentionPolicy", "SequencePair", "SlowConsumerError",
        "StorageType", "StoredMsg", "Stream", "StreamConfig", "StreamInfo", "StreamNotFoundError",
        "SubscribeError", "Subscription", "SubscriptionClosedError", "TimeoutError", "Worker", "WorkerStats",
        "close_shared_clients", "connect", "install_signal_handlers", "run_worker", "shared_client",
        # issue 21: services (ADR-32) and request_many
        "EndpointInfo", "EndpointStats", "Replies", "Service", "ServiceError", "ServiceGroup", "ServiceInfo",
        "ServiceRequest", "ServiceStats",
        # issue 21: message schedules (ADR-51) and fast-ingest batches (ADR-50)
        "Schedule", "FastBatch", "FastPubAck", "FeatureNotSupportedError", "FastBatchError", "BatchClosedError",
        # issue 21: KV codecs (ADR-54)
        "KeyValueCodecError", "codecs",
        # issue 22: NATS contexts and the system client
        "NatsContext", "SystemClient",
        # issue 22: OpenTelemetry
        "instrument", "uninstrument",
        # issue 21: partitioned consumer groups
        "ConsumerGroupError", "ConsumerGroupNotFoundError", "GroupConsumeContext", "GroupMessagesContext",
        "MemberMapping", "StaticGroup", "StaticGroupConfig", "partition_transform", "strip_partition",
        "ElasticGroup", "ElasticGroupConfig", "ElasticMember", "PartitioningFilter",
    ],
    "jetstream_sync.kv.codecs": [
        "Base64Codec", "ChainCodec", "FuncCodec", "NoOpCodec", "PathCodec", "chain",
    ],
    "jetstream_sync.system": [
        "Accountz", "Connz", "Gatewayz", "Healthz", "Jsz", "Leafz", "Routez", "ServerInfo", "Statsz", "Subsz",
        "SystemClient", "SystemReply", "Varz",
    ],
    "jetstream_sync.errors": [
        "APIError", "AuthorizationError", "BadBucketError", "BadObjectMetaError", "BadRequestError",
        "BucketExistsError", "BucketNotFoundError", "ConnectionClosedError", "ConsumerAlreadyConsumingError",
        "ConsumerDeletedError", "ConsumerNotFoundError", "ConsumerPullBasedError", "ConsumerPushBasedError",
        "ConsumerSequenceMismatchError", "ConsumerStoppedError", "DeadlockError", "DigestMismatchError",
        "ErrorCode", "ForkedProcessError", "InvalidBucketNameError", "InvalidKeyError",
        "InvalidObjectNameError", "InvalidObjectStoreNameError", "InvalidOptionError", "JetStreamError",
        "JetStreamNotEnabledError", "KeyDeletedError", "KeyExistsError", "KeyNotFoundError", "KeyValueError",
        "KeyWrongLastSequenceError", "MsgAlreadyAckedError", "MsgNotFoundError", "NoHeartbeatError",
        "NoRespondersError", "NoServersError", "NotFoundError", "NotJSMessageError",
        "ObjectAlreadyExistsError", "ObjectChangedError", "ObjectDeletedError", "ObjectLinkError",
        "ObjectNotFoundError", "ObjectStoreExistsError", "ObjectStoreNotFoundError", "OrderedConsumerError",
        "OrderedConsumerResetError", "PermissionDeniedError", "PinIdMismatchError", "PullStatusError",
        "KeyValueCodecError", "RespondError", "ServiceError", "SlowConsumerError", "StreamNotFoundError", "SubscribeError",
        "SubscriptionClosedError", "TimeoutError",
        "FeatureNotSupportedError", "FastBatchError", "BatchClosedError",
        "ConsumerGroupError", "ConsumerGroupNotFoundError",
    ],
    "jetstream_sync.spark": [
        "DataLossError", "JetStreamDataSource", "PartitionIncompleteError", "PublishCounts", "SCHEMA",
        "close_all", "connect_options", "publish_partition", "register", "shared_client",
    ],
    "jetstream_sync.contrib.flask": [
        "init_app", "worker_command",
    ],
    "jetstream_sync.contrib.django": [],
    "pyspark_jetstream": [
        "DefaultSource",
    ],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_public_name_still_imports(module):
    mod = importlib.import_module(module)
    missing = [n for n in PUBLIC[module] if not hasattr(mod, n)]
    assert not missing, f"{module} lost {missing}"


def test_the_package_exports_what_it_lists():
    assert set(PUBLIC["jetstream_sync"]) <= set(jss.__all__)
    assert jss.__version__


def test_public_classes_and_functions_report_the_package():
    # nats-py's own classes re-exported here (Metadata, AccountInfo, ...) keep theirs.
    ours = [getattr(jss, n) for n in jss.__all__ if isinstance(getattr(jss, n), type) or callable(getattr(jss, n))]
    private = {o.__qualname__: o.__module__ for o in ours if o.__module__.startswith("jetstream_sync.")}
    assert not private, private
    assert jss.PushStats.__module__ == "jetstream_sync"


def test_type_hints_of_public_classes_still_resolve():
    import typing

    for name in jss.__all__:
        obj = getattr(jss, name)
        if isinstance(obj, type):
            typing.get_type_hints(obj)  # raises NameError if the move broke them
