"""Direct get (ADR-31): reading stored messages from any replica of a stream
with ``allow_direct``, one message per request or a batch per request.

Loop thread only. Replies carry the message as stored, with its position in
``Nats-Stream`` / ``Nats-Subject`` / ``Nats-Sequence`` / ``Nats-Time-Stamp``
headers; a batch ends with a ``204 EOB`` status, a miss is ``404``.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from .. import errors
from .message import parse_header_block
from .nats_errors import request_timed_out
from ..models import StoredMsg, parse_utc_iso

if TYPE_CHECKING:  # pragma: no cover
    from .connection import Connection

# Headers the server adds to a direct-get reply (not part of the stored message).
_META = frozenset(
    {"Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending", "Nats-Last-Sequence", "Nats-UpTo-Sequence"}
)


def stored(headers: Mapping[str, str], data: bytes) -> StoredMsg:
    """A StoredMsg from a direct-get reply's headers and payload."""
    user = {k: v for k, v in headers.items() if k not in _META and k not in ("Status", "Description")}
    when = headers.get("Nats-Time-Stamp")
    return StoredMsg(
        stream=headers.get("Nats-Stream", ""),
        subject=headers.get("Nats-Subject", ""),
        seq=int(headers.get("Nats-Sequence", 0)),
        data=data,
        headers=user or None,
        time=parse_utc_iso(when) if when else None,
    )


def _missing(about: str) -> errors.MsgNotFoundError:
    return errors.MsgNotFoundError(404, errors.ErrorCode.MSG_NOT_FOUND, f"no message found: {about}")


async def get_one(conn: "Connection", subject: str, body: Dict[str, Any], timeout: float, about: str) -> StoredMsg:
    """One message by a direct-get request; MsgNotFoundError on a miss."""
    try:
        msg = await conn.request(subject, json.dumps(body).encode(), timeout)
    except asyncio.TimeoutError as exc:  # nats-py's is one
        raise request_timed_out(f"direct get on {subject}", timeout) from exc
    hdrs = msg.headers or {}
    status = str(hdrs.get("Status", ""))
    if status == "404":
        raise _missing(about)
    if status:
        raise errors.APIError(int(status) if status.isdigit() else 0, 0, f"direct get: {status} {_description(hdrs)}")
    return stored(hdrs, msg.data)


def _description(hdrs: Mapping[Any, Any]) -> str:
    for key, value in hdrs.items():  # nats-py keys the description by an enum
        if str(getattr(key, "value", key)) == "Description":
            return str(value)
    return ""


async def get_batch(
    conn: "Connection", subject: str, body: Dict[str, Any], timeout: float, limit: int
) -> List[StoredMsg]:
    """The messages of one batch request, up to its ``204 EOB`` (a ``404``
    means none); ``timeout`` bounds the whole batch."""
    out: List[StoredMsg] = []
    done = asyncio.get_running_loop().create_future()

    def on_msg(subj: bytes, reply: bytes, data: bytes, hdr: Optional[bytes]) -> None:
        if done.done():
            return
        code = hdr[9:12] if hdr and len(hdr) >= 12 and hdr[8:9] == b" " else b""
        if code:  # a status ends the batch: 204 EOB, 404 none, or an error
            if code in (b"204", b"404"):
                done.set_result(None)
            elif code == b"503":
                done.set_exception(errors.NoRespondersError(f"no direct get on {subject}"))
            else:
                line = hdr.split(b"\r\n", 1)[0].decode(errors="replace")  # type: ignore[union-attr]
                done.set_exception(errors.APIError(int(code), 0, f"direct get: {line[9:]}"))
            return
        out.append(stored(parse_header_block(hdr) or {} if hdr else {}, data))
        if len(out) >= limit:
            done.set_result(None)

    inbox = conn.new_inbox()
    sid = await conn.subscribe(inbox, on_msg)
    try:
        conn.send_pub(subject, inbox, json.dumps(body).encode())
        try:
            async with asyncio.timeout(timeout):
                await done
        except TimeoutError as exc:
            raise request_timed_out(f"direct batch get on {subject}", timeout) from exc
    finally:
        await conn.unsubscribe(sid)
    return out
