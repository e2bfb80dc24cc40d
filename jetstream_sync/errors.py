"""Every error jetstream_sync raises, in one hierarchy.

Catch :class:`JetStreamError` for anything from this library, or a subclass
for one condition. Where a builtin exception describes the same condition the
class also derives from it (``InvalidOptionError`` is a ``ValueError``,
``TimeoutError`` is the builtin ``TimeoutError``), so code written against the
builtins keeps working. Errors translated from nats-py keep it as ``__cause__``.

::

    JetStreamError
    ├── APIError (code, err_code: ErrorCode | int, description)
    │   └── NotFoundError
    │       ├── StreamNotFoundError   (10059)
    │       ├── ConsumerNotFoundError (10014)
    │       └── MsgNotFoundError      (10037)
    ├── NoRespondersError
    │   └── JetStreamNotEnabledError
    ├── PullStatusError (status, description)
    │   ├── ConsumerDeletedError
    │   ├── ConsumerPushBasedError
    │   ├── BadRequestError
    │   └── PinIdMismatchError
    ├── NoHeartbeatError
    ├── ConsumerSequenceMismatchError (expected, received)
    ├── ConsumerAlreadyConsumingError
    ├── ConsumerPullBasedError
    ├── ConnectionClosedError
    │   └── ConnectionDrainingError: a new subscription while the client drains
    ├── NoServersError (also ConnectionError)
    │   └── AuthorizationError
    ├── PermissionDeniedError (also PermissionError)
    ├── SlowConsumerError
    ├── InvalidOptionError (also ValueError)
    ├── MsgAlreadyAckedError
    ├── NotJSMessageError
    ├── RespondError
    ├── ServiceError (code, description, data): a service's error answer (ADR-32)
    ├── TimeoutError (also the builtin TimeoutError)
    ├── FeatureNotSupportedError (feature, server_version, needed)
    ├── FastBatchError (batch_id, stored, sent, last_seq, failed_seq): a fast batch ended early
    ├── BatchClosedError
    ├── ForkedProcessError (also RuntimeError)
    ├── DeadlockError (also RuntimeError)
    ├── ConsumerStoppedError
    ├── SubscribeError
    ├── SubscriptionClosedError
    ├── OrderedConsumerError
    ├── OrderedConsumerResetError
    ├── KeyValueError
    │   ├── BucketNotFoundError      (also StreamNotFoundError)
    │   ├── BucketExistsError        (also APIError, 10058)
    │   ├── BadBucketError
    │   ├── KeyNotFoundError         (also NotFoundError; entry, operation)
    │   │   └── KeyDeletedError
    │   ├── KeyWrongLastSequenceError (also APIError, 10071)
    │   │   └── KeyExistsError
    │   ├── InvalidBucketNameError   (also InvalidOptionError)
    │   ├── InvalidKeyError          (also InvalidOptionError)
    │   └── KeyValueCodecError       (a key or value codec failed; ADR-54)
    │   (object store, ADR-20)
    ├── ObjectStoreExistsError         (APIError 10058)
    ├── ObjectStoreNotFoundError       (a StreamNotFoundError)
    ├── ObjectNotFoundError            (a NotFoundError)
    │   └── ObjectDeletedError
    ├── ObjectChangedError
    ├── ObjectAlreadyExistsError
    ├── DigestMismatchError (expected, actual)
    ├── BadObjectMetaError
    ├── ConsumerGroupError             (partitioned consumer groups)
    │   └── ConsumerGroupNotFoundError
    └── InvalidOptionError subclasses: InvalidObjectStoreNameError,
        InvalidObjectNameError, ObjectLinkError
"""

from __future__ import annotations

import builtins
import enum
from typing import Any, Dict, Optional, Type

__all__ = [
    "ConsumerGroupError",
    "ConsumerGroupNotFoundError",
    "ErrorCode",
    "JetStreamError",
    "APIError",
    "NotFoundError",
    "StreamNotFoundError",
    "ConsumerNotFoundError",
    "MsgNotFoundError",
    "JetStreamNotEnabledError",
    "NoRespondersError",
    "ConsumerDeletedError",
    "ConsumerPushBasedError",
    "BadRequestError",
    "PinIdMismatchError",
    "NoHeartbeatError",
    "ConsumerSequenceMismatchError",
    "ConsumerAlreadyConsumingError",
    "ConsumerPullBasedError",
    "PullStatusError",
    "ConnectionClosedError",
    "ConnectionDrainingError",
    "NoServersError",
    "InvalidOptionError",
    "MsgAlreadyAckedError",
    "NotJSMessageError",
    "TimeoutError",
    "FeatureNotSupportedError",
    "FastBatchError",
    "BatchClosedError",
    "ForkedProcessError",
    "DeadlockError",
    "ConsumerStoppedError",
    "OrderedConsumerError",
    "SubscribeError",
    "SubscriptionClosedError",
    "RespondError",
    "ServiceError",
    "OrderedConsumerResetError",
    "AuthorizationError",
    "PermissionDeniedError",
    "SlowConsumerError",
    "KeyValueError",
    "KeyValueCodecError",
    "BucketNotFoundError",
    "BucketExistsError",
    "BadBucketError",
    "KeyNotFoundError",
    "KeyDeletedError",
    "KeyWrongLastSequenceError",
    "KeyExistsError",
    "InvalidBucketNameError",
    "InvalidKeyError",
    # object store
    "ObjectStoreExistsError",
    "ObjectStoreNotFoundError",
    "ObjectNotFoundError",
    "ObjectDeletedError",
    "ObjectChangedError",
    "ObjectAlreadyExistsError",
    "DigestMismatchError",
    "BadObjectMetaError",
    "InvalidObjectStoreNameError",
    "InvalidObjectNameError",
    "ObjectLinkError",
]


class ErrorCode(enum.IntEnum):
    """JetStream API error codes (``err_code``) this library acts on by name."""

    JETSTREAM_NOT_ENABLED_FOR_ACCOUNT = 10039
    JETSTREAM_NOT_ENABLED = 10076
    BAD_REQUEST = 10003
    STREAM_NOT_FOUND = 10059
    STREAM_NAME_IN_USE = 10058
    STREAM_WRONG_LAST_SEQUENCE = 10071
    STREAM_WRONG_LAST_MSG_ID = 10070
    STREAM_NOT_MATCH = 10060
    STREAM_MSG_DELETE_FAILED = 10057
    CONSUMER_NOT_FOUND = 10014
    CONSUMER_NAME_EXISTS = 10013
    CONSUMER_ALREADY_EXISTS = 10148
    CONSUMER_DOES_NOT_EXIST = 10149
    CONSUMER_CREATE = 10012
    MSG_NOT_FOUND = 10037
    MAXIMUM_CONSUMERS_LIMIT = 10026
    MAXIMUM_STREAMS_LIMIT = 10027
    INSUFFICIENT_RESOURCES = 10023
    MESSAGE_SCHEDULES_DISABLED = 10188
    BATCH_PUBLISH_DISABLED = 10205
    BATCH_PUBLISH_ID_UNKNOWN = 10208


class JetStreamError(Exception):
    """Base class of every error raised by jetstream_sync."""


class APIError(JetStreamError):
    """The JetStream API answered a request with an error.

    ``code`` is the HTTP-like status (404, 400, 503 …), ``err_code`` the
    server's numeric JetStream error code (10059 stream not found …) and
    ``description`` its text.
    """

    def __init__(self, code: int = 0, err_code: int = 0, description: str = "") -> None:
        self.code = code
        self.err_code = err_code
        self.description = description
        super().__init__(code, err_code, description)

    def __str__(self) -> str:
        return f"{self.description} (code={self.code}, err_code={self.err_code})"

    def with_hint(self, hint: str) -> "APIError":
        """The same error (same class and codes) with ``hint`` after the description."""
        return type(self)(self.code, self.err_code, f"{self.description}: {hint}")

    @staticmethod
    def from_error(err: Dict[str, Any]) -> "APIError":
        """Build the most specific subclass for an API ``error`` object."""
        raw = int(err.get("err_code") or 0)
        err_code: int
        try:
            err_code = ErrorCode(raw)
        except ValueError:  # a code this library has no name for
            err_code = raw
        cls = _BY_ERR_CODE.get(err_code)
        code = int(err.get("code") or 0)
        if cls is None:
            cls = NotFoundError if code == 404 else APIError
        return cls(code, err_code, str(err.get("description", "")))


class NotFoundError(APIError):
    """A JetStream resource (stream, consumer, message) does not exist."""


class StreamNotFoundError(NotFoundError):
    """The stream does not exist (err_code 10059)."""


class ConsumerNotFoundError(NotFoundError):
    """The consumer does not exist (err_code 10014)."""


class MsgNotFoundError(NotFoundError):
    """No message matched a get request (err_code 10037)."""


_BY_ERR_CODE: Dict[int, Type["APIError"]] = {
    ErrorCode.STREAM_NOT_FOUND: StreamNotFoundError,
    ErrorCode.CONSUMER_NOT_FOUND: ConsumerNotFoundError,
    ErrorCode.CONSUMER_DOES_NOT_EXIST: ConsumerNotFoundError,
    ErrorCode.MSG_NOT_FOUND: MsgNotFoundError,
}


class NoRespondersError(JetStreamError):
    """Nobody answered a request (503 no responders)."""


class JetStreamNotEnabledError(NoRespondersError):
    """No JetStream API answered: JetStream is off for this account/server or
    the domain/API prefix is wrong."""


class PullStatusError(JetStreamError):
    """A pull request ended with a server status that is an error.

    ``status`` is the numeric code (409, 400 …), ``description`` its text.
    """

    def __init__(self, status: int = 0, description: str = "") -> None:
        self.status = status
        self.description = description
        text = f"{status} {description}".strip()
        super().__init__(text or self.__class__.__doc__)


class ConsumerDeletedError(PullStatusError):
    """The consumer was deleted while pulls were waiting (409 Consumer Deleted)."""


class ConsumerPushBasedError(PullStatusError):
    """The consumer has a deliver subject; it cannot be pulled (409 Consumer is push based)."""


class BadRequestError(PullStatusError):
    """The server rejected a pull request (400 Bad Request)."""


class PinIdMismatchError(PullStatusError):
    """A pull of a pinned_client consumer carried a pin id that is no longer
    the current one (423): another puller holds the pin. The pin id is
    forgotten, so the next pull competes for the pin afresh."""


class NoHeartbeatError(JetStreamError):
    """No message, status or heartbeat arrived in time: twice the idle
    heartbeat for pulls, three times the consumer's idle heartbeat for push
    consumers (ADR-15)."""


class ConsumerSequenceMismatchError(JetStreamError):
    """A push consumer skipped consumer sequences: messages were lost on the
    way (a reconnect, a slow-consumer drop). ``expected`` is the consumer
    sequence the client expected next, ``received`` the one that came (for a
    heartbeat, its ``Nats-Last-Consumer`` + 1); ``missed`` is how many
    deliveries never arrived. Reported to the error handler; never terminal."""

    def __init__(self, expected: int, received: int) -> None:
        self.expected = expected
        self.received = received
        super().__init__(expected, received)

    @property
    def missed(self) -> int:
        return self.received - self.expected

    def __str__(self) -> str:
        return f"consumer sequence mismatch: expected {self.expected}, got {self.received}"


class ConsumerAlreadyConsumingError(JetStreamError):
    """A push consumer handle already has an active messages()/consume(): a
    second one would subscribe its deliver subject twice (each message
    delivered to both). Stop the first, or give the consumer a deliver_group."""


class ConsumerPullBasedError(JetStreamError):
    """A push consumer handle was asked for (``push_consumer()``) on a consumer
    without a deliver subject: it is a pull consumer, use ``consumer()``."""


class ConnectionClosedError(JetStreamError):
    """The connection is closed (by close(), drain() or after giving up reconnecting)."""


class ConnectionDrainingError(ConnectionClosedError):
    """The client is draining: what it received is still handled and calls
    still work, but nothing new may subscribe (a context, a fetch, a watch,
    an endpoint); the client closes when the drain is done."""


class NoServersError(JetStreamError, ConnectionError):
    """No server in the list could be connected to."""


class AuthorizationError(NoServersError):
    """The server refused the credentials (authorization violation)."""


class PermissionDeniedError(JetStreamError, PermissionError):
    """The server refused a publish or subscription on a subject (permissions violation)."""


class SlowConsumerError(JetStreamError):
    """A subscription's pending limit was reached; messages were dropped."""


class InvalidOptionError(JetStreamError, ValueError):
    """An argument is invalid; raised before anything is sent."""


class MsgAlreadyAckedError(JetStreamError):
    """The message was already acknowledged with a terminal ack (ack, nak, term)."""


class NotJSMessageError(JetStreamError):
    """The message is not a JetStream message (no or malformed ``$JS.ACK`` reply)."""


class RespondError(JetStreamError):
    """``msg.respond()`` is not possible: the message has no reply subject,
    or it is a JetStream message (answered with ``ack()`` and friends)."""


class ServiceError(JetStreamError):
    """A service's error answer (ADR-32). Raised in an endpoint's handler,
    the request is answered with this ``code`` (the
    ``Nats-Service-Error-Code`` header, an int or a numeric str),
    ``description`` (``Nats-Service-Error``) and ``data`` as the payload."""

    def __init__(self, code: Any, description: str, data: bytes = b"") -> None:
        super().__init__(f"{code}:{description}")
        self.code = code
        self.description = description
        self.data = data


class TimeoutError(JetStreamError, builtins.TimeoutError):
    """An operation did not complete in time. Also the builtin ``TimeoutError``."""


class FeatureNotSupportedError(JetStreamError):
    """The connected server is too old for a feature: ``feature`` names it,
    ``server_version`` is the server's version string and ``needed`` the
    first version that has it. Raised before anything is sent."""

    def __init__(self, feature: str, server_version: str, needed: str) -> None:
        self.feature = feature
        self.server_version = server_version
        self.needed = needed
        super().__init__(f"{feature} needs nats-server {needed} or later; the server is {server_version}")


class FastBatchError(JetStreamError):
    """A fast-ingest batch (ADR-50) ended before its commit. ``stored`` is
    how many of its messages the stream holds, as far as the server said:
    its count when it ended the batch, else (a restart, a timeout, a closed
    connection) what its flow acks confirmed, never less. In gap mode
    "fail" the stream holds messages 1 to ``stored`` in order, and when the
    server did not say, maybe some of ``stored + 1`` to ``sent`` after them.
    ``sent`` is how many messages of the batch were published,
    ``last_seq`` the stream sequence of message ``stored`` when the server
    said (else None), ``failed_seq`` the batch sequence the server refused
    (None when none was) and ``__cause__`` the server's error, or
    ConnectionClosedError."""

    def __init__(
        self, message: str, batch_id: str, stored: int, last_seq: Any = None, failed_seq: Any = None,
        sent: Optional[int] = None,
    ) -> None:
        self.batch_id = batch_id
        self.stored = stored
        self.last_seq = last_seq
        self.failed_seq = failed_seq
        self.sent = stored if sent is None else sent
        super().__init__(message)


class BatchClosedError(JetStreamError):
    """A fast batch was used after its commit, close or failure."""


class ForkedProcessError(JetStreamError, RuntimeError):
    """A Client created before ``os.fork()`` was used in the child process.

    The child shares the parent's socket; create a new Client in the child.
    """


class DeadlockError(JetStreamError, RuntimeError):
    """A blocking call was made from the client's own event-loop thread."""


class ConsumerStoppedError(JetStreamError):
    """The MessagesContext / ConsumeContext was stopped or drained and is closed."""


class SubscribeError(JetStreamError):
    """``subscribe()`` / ``pull_subscribe()`` cannot bind to the consumer it
    found (ADR-15 checks: push vs pull, deliver group, filter subject,
    config), or the subject is in more than one stream."""


class SubscriptionClosedError(JetStreamError):
    """The JetStream subscription was unsubscribed or drained."""


class OrderedConsumerError(JetStreamError):
    """An ordered consumer was used in a way it cannot serve: fetch and
    messages()/consume() mixed, or a second read started while one is open."""


class OrderedConsumerResetError(JetStreamError):
    """An ordered consumer could not recreate its server consumer within
    ``max_reset_attempts`` tries (the last failure is the cause)."""


# -- key-value (ADR-8) -------------------------------------------------------------


class KeyValueError(JetStreamError):
    """Base class of the key-value errors."""


class BucketNotFoundError(KeyValueError, StreamNotFoundError):
    """The bucket (its ``KV_<bucket>`` stream) does not exist."""


class BucketExistsError(KeyValueError, APIError):
    """``create_key_value`` found the bucket with a different configuration (10058)."""


class BadBucketError(KeyValueError):
    """The ``KV_<bucket>`` stream is not a key-value bucket (no per-key history)."""


class KeyNotFoundError(KeyValueError, NotFoundError):
    """The key has no value: never put, or its last entry is a delete or purge
    marker (then :class:`KeyDeletedError`). ``entry`` is that marker entry
    (None when there is none) and ``operation`` its ``KeyValueOp``."""

    def __init__(self, description: str = "key not found", entry: Any = None, operation: Any = None) -> None:
        super().__init__(404, ErrorCode.MSG_NOT_FOUND, description)
        self.entry = entry
        self.operation = operation

    def __str__(self) -> str:
        return self.description


class KeyDeletedError(KeyNotFoundError):
    """The key's last entry is a delete or purge marker."""


class KeyWrongLastSequenceError(KeyValueError, APIError):
    """The key's latest revision is not the one the write expected
    (``update(last=)``, ``delete(last=)``, ``purge(last=)``; server 10071)."""


class KeyExistsError(KeyWrongLastSequenceError):
    """``create()`` found a value under the key."""


class InvalidBucketNameError(KeyValueError, InvalidOptionError):
    """A bucket name is not 1+ of ``A-Z a-z 0-9 _ -``; raised before anything is sent."""


class InvalidKeyError(KeyValueError, InvalidOptionError):
    """A key (or key filter) breaks ADR-8's rules; raised before anything is sent."""


class KeyValueCodecError(KeyValueError):
    """A bucket handle's key or value codec (ADR-54) failed or returned the
    wrong type: encoding before anything is sent, or decoding what was read
    (e.g. a key another client stored without the codec). The codec's own
    exception is the cause."""


# Both codes mean "the subject's last sequence is not the expected one".
WRONG_LAST_SEQUENCE_CODES = (ErrorCode.STREAM_WRONG_LAST_SEQUENCE, 10164)
# -- object store (ADR-20) --


class ObjectStoreExistsError(APIError):
    """``create_object_store`` found a bucket of that name with another
    configuration (the stream name is in use, err_code 10058)."""


class ObjectStoreNotFoundError(StreamNotFoundError):
    """The object store (its stream ``OBJ_<bucket>``) does not exist."""


class ObjectNotFoundError(NotFoundError):
    """No object of that name in the bucket (deleted ones count as absent)."""


class ObjectDeletedError(ObjectNotFoundError):
    """The object exists only as a delete marker."""


class ObjectChangedError(JetStreamError):
    """The object was replaced while it was being read (its old chunks are
    gone); get() it again."""


class ObjectAlreadyExistsError(JetStreamError):
    """A rename or a link would replace an object that exists and is not deleted."""


class DigestMismatchError(JetStreamError):
    """An object read back does not match its info: its SHA-256 digest or its
    size differs (a chunk lost, added or corrupted). ``expected`` and
    ``actual`` are the digests ("SHA-256=…") or, for a size mismatch, sizes."""

    def __init__(self, message: str, expected: Any = None, actual: Any = None) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(message)


class BadObjectMetaError(JetStreamError):
    """An object's stored info is unreadable or inconsistent (not ADR-20 JSON,
    no NUID, a link to a link)."""


class InvalidObjectStoreNameError(InvalidOptionError):
    """A bucket name is not 1 or more of A-Z, a-z, 0-9, '-', '_' (ADR-20)."""


class InvalidObjectNameError(InvalidOptionError):
    """An object name is empty, not text, or too long for a subject."""


class ObjectLinkError(InvalidOptionError):
    """A link cannot be made or read that way: to a deleted object, to another
    link, in ``put()``, or a bucket link read as an object."""


# -- partitioned consumer groups (orbit.go pcgroups) --


class ConsumerGroupError(JetStreamError):
    """A partitioned consumer group cannot be used as asked: its stored config
    differs from the one given, is not valid, changed under a member, or the
    member is not in it."""


class ConsumerGroupNotFoundError(ConsumerGroupError):
    """No config is stored for the consumer group (or its bucket does not exist)."""
