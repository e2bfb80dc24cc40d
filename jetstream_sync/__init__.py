"""jetstream_sync: a synchronous, thread-safe NATS JetStream client on nats-py.

Importing the package starts no thread and imports no pyspark.
"""

from .client import Client, Subscription, connect
from .consumer import Consumer
from .contexts import ConsumeContext, FetchResult, MessagesContext, PullStats
from .errors import (
    APIError,
    BadRequestError,
    ConnectionClosedError,
    ConsumerDeletedError,
    ConsumerNotFoundError,
    ConsumerPushBasedError,
    ConsumerStoppedError,
    DeadlockError,
    ForkedProcessError,
    InvalidOptionError,
    JetStreamError,
    JetStreamNotEnabledError,
    MsgAlreadyAckedError,
    MsgNotFoundError,
    NoHeartbeatError,
    NoRespondersError,
    NoServersError,
    NotFoundError,
    NotJSMessageError,
    PullStatusError,
    StreamNotFoundError,
    TimeoutError,
)
from .jetstream import JetStream
from .message import Metadata, Msg, SequencePair
from .models import (
    AccountInfo,
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    DiscardPolicy,
    PubAck,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoredMsg,
    StreamConfig,
    StreamInfo,
)
from .stream import Stream

__version__ = "0.1.0"

__all__ = [
    "connect",
    "Client",
    "Subscription",
    "JetStream",
    "Stream",
    "Consumer",
    "MessagesContext",
    "ConsumeContext",
    "FetchResult",
    "PullStats",
    "Msg",
    "Metadata",
    "SequencePair",
    "AccountInfo",
    "AckPolicy",
    "ConsumerConfig",
    "ConsumerInfo",
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
    "ConsumerDeletedError",
    "ConsumerNotFoundError",
    "ConsumerPushBasedError",
    "ConsumerStoppedError",
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
    "PullStatusError",
    "StreamNotFoundError",
    "TimeoutError",
]
