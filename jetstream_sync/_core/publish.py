"""JetStream publish: the headers and the checks made in the calling thread
(the windowed publisher, with PubAck parsing and ADR-22 retries, is in
``_publisher``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Dict, Optional

from .. import options

if TYPE_CHECKING:  # pragma: no cover
    from .connection import Connection

_log = logging.getLogger("jetstream_sync._publish")  # the logger name users configure, kept from before the move

# Plain subjects up to this long fit any line: 900 + the sizes + a reply
# inbox on the longest inbox_prefix (options.inbox_prefix) stay under 4096.
_SHORT_SUBJECT = 900


def check_line(conn: "Connection", subject: str) -> None:
    """Refuse a subject whose PUB line, with the connection's longest reply
    inbox, would pass the server's control-line limit."""
    options.control_line(subject, reply_room=conn.reply_room)


def known_subject(subject: str) -> bool:
    """``check_publish`` would accept ``subject`` itself (a plain subject
    checked before, short enough for any reply): the caller may skip those checks."""
    return len(subject) <= _SHORT_SUBJECT and subject in options.checked_subjects


def check_publish(conn: "Connection", subject: str, payload: bytes, headers: Optional[Dict[str, str]]) -> bytes:
    """Validate a publish in the calling thread; returns its header block (b"" if none).

    Anything the server would answer with -ERR (and so close the shared
    connection) is refused here: bad subjects or headers, oversize payloads,
    control lines over the server's limit.
    """
    options.subject(subject)
    hdr = options.header_block(headers) if headers else b""
    if len(subject) > _SHORT_SUBJECT:  # shorter ones fit the control line even in 4-byte UTF-8
        check_line(conn, subject)
    total = len(hdr) + len(payload)
    if total > conn.max_payload:
        options.payload_size(total, conn.max_payload)
    return hdr
