"""The worker's handler: ``flask --app app jetstream-worker handlers:handle ...``."""

import jetstream_sync as jss

from app import get_db


def handle(msg: jss.Msg) -> None:
    """Record the message. Returning acks it; raising NAKs it (redelivered).

    Runs inside ``app.app_context()``, so ``get_db()`` works and the
    connection is closed by the app's teardown after each message.
    """
    meta = msg.metadata
    msg_id = (msg.headers or {}).get("Nats-Msg-Id") or f"{meta.stream}:{meta.sequence.stream}"
    db = get_db()
    db.execute(
        "INSERT INTO handled (msg_id, subject, stream_seq, payload) VALUES (?, ?, ?, ?)",
        (msg_id, msg.subject, meta.sequence.stream, msg.data),
    )
    db.commit()
