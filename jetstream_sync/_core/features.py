"""What the connected server supports, read from its INFO (its ``version``)."""

from __future__ import annotations

import re
from typing import Tuple

from .. import errors
from .connection import Connection
from .wire import server_info


def server_version(conn: Connection) -> Tuple[Tuple[int, int, int], str]:
    """The connected server's version as numbers and as it said it (``2.15.1``);
    (0, 0, 0) and "unknown" when it cannot be read."""
    nc = conn.nc
    info = server_info(nc) if nc is not None else None
    text = str((info or {}).get("version") or "unknown")
    m = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text)
    return ((int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (0, 0, 0)), text


def require(conn: Connection, feature: str, since: Tuple[int, int]) -> None:
    """FeatureNotSupportedError unless the server is at least ``since``
    (major, minor). A server whose version cannot be read is let through:
    its own answer then says what it lacks."""
    version, text = server_version(conn)
    if version != (0, 0, 0) and version[:2] < since:
        raise errors.FeatureNotSupportedError(feature, text, f"{since[0]}.{since[1]}")
