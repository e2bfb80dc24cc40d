"""Parsing a JetStream publish acknowledgement: the usual reply without a
JSON parse (the C accelerator's ``puback`` matches the same), else JSON."""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, Optional, Tuple

from .. import errors
from ..models import PubAck

__all__ = ["parse_puback", "plain_puback"]

_PLAIN_ACK = re.compile(rb'\{"stream":"([^"\\]+)",\s*"seq":(\d+)\}\s*')


_NAMES: Dict[bytes, str] = {}  # stream names as received -> str (a few per process)


def plain_puback(data: bytes) -> Optional[Tuple[bytes, int]]:
    """(stream, seq) of the usual acknowledgement, else None (the C accelerator's
    ``puback`` does the same)."""
    plain = _PLAIN_ACK.fullmatch(data)
    if plain is None:
        return None
    stream, seq = plain.groups()
    return stream, int(seq)


def parse_puback(
    data: bytes, plain_of: Callable[[bytes], Optional[Tuple[bytes, int]]] = plain_puback,
    make: Callable[[str, int], Any] = PubAck,
) -> Any:
    """The PubAck of a reply (APIError for an error reply, JetStreamError for
    one that is not an acknowledgement). ``make(stream, seq)`` builds the usual
    one (default PubAck; the async publisher keeps a compact form, see
    ``publisher.compact_ack``)."""
    plain = plain_of(data)
    if plain is not None:  # the usual reply, without a JSON parse
        stream, seq = plain
        name = _NAMES.get(stream)
        if name is None:
            try:
                name = stream.decode()
            except UnicodeDecodeError:  # raised out of the reply handler, it would leave the future unresolved
                raise errors.JetStreamError(f"invalid publish acknowledgement: {data[:100]!r}") from None
            if len(_NAMES) < 256:
                _NAMES[stream] = name
        return make(name, seq)
    try:
        resp = json.loads(data)
    except ValueError:
        raise errors.JetStreamError(f"invalid publish acknowledgement: {data[:100]!r}") from None
    if "error" in resp:
        raise errors.APIError.from_error(resp["error"])
    return PubAck.from_response(resp)
