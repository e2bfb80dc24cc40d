"""The structured fields of every log record the package writes: one
vocabulary, given as ``extra=log_fields(...)``, so that a JSON log handler
indexes the same names whichever module logged.

Every record has every field; those a record is not about are None:

- ``nats_server``: the server URL, its password or token replaced by ``***``;
- ``nats_subject``: the subject a message or subscription is on;
- ``nats_stream``, ``nats_consumer``: the JetStream stream and consumer;
- ``nats_seq``: the message's stream sequence;
- ``nats_service``: the ADR-32 service's name.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from .. import errors
from ..options import redact_url

__all__ = ["LOG_FIELDS", "log_fields", "message_fields"]

LOG_FIELDS: Tuple[str, ...] = ("nats_server", "nats_subject", "nats_stream", "nats_consumer", "nats_seq", "nats_service")


def log_fields(
    *,
    server: Optional[str] = None,
    subject: Optional[str] = None,
    stream: Optional[str] = None,
    consumer: Optional[str] = None,
    seq: Optional[int] = None,
    service: Optional[str] = None,
) -> Dict[str, Any]:
    """The ``extra=`` of one log record: every field of :data:`LOG_FIELDS`,
    None where not given; ``server`` is shown without its secret."""
    return {
        "nats_server": None if server is None else redact_url(server),
        "nats_subject": subject,
        "nats_stream": stream,
        "nats_consumer": consumer,
        "nats_seq": seq,
        "nats_service": service,
    }


def message_fields(msg: Any) -> Dict[str, Any]:
    """The fields of a record about one message: its subject and, for a
    JetStream message, its stream, consumer and stream sequence."""
    try:
        meta = msg.metadata
    except errors.JetStreamError:  # a core NATS message: no metadata
        return log_fields(subject=msg.subject)
    return log_fields(subject=msg.subject, stream=meta.stream, consumer=meta.consumer, seq=meta.sequence.stream)
