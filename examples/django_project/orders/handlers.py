"""The worker's handler: ``python manage.py jetstream_worker orders.handlers:handle ...``."""

import jetstream_sync as jss

from .models import HandledMessage


def handle(msg: jss.Msg) -> None:
    """Record the message. Returning acks it; raising NAKs it (redelivered)."""
    meta = msg.metadata
    msg_id = (msg.headers or {}).get("Nats-Msg-Id") or f"{meta.stream}:{meta.sequence.stream}"
    HandledMessage.objects.create(
        msg_id=msg_id,
        subject=msg.subject,
        stream_seq=meta.sequence.stream,
        payload=msg.data,
    )
