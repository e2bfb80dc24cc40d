"""The graceful end of connections, for ``Client.drain()`` and the SIGTERM
helper: every live resource drains first (a service answers the requests it
received, a subscription callback or ``consume()`` handler finishes what
arrived, a ``messages()`` iterator hands out its buffer), while the client
still works for them; then each connection is closed, which sends what is
queued and ends whatever is left as ``close()`` does. One bound for all of it.
"""

from __future__ import annotations

import logging
import time
from typing import Sequence

from .connection import Connection
from .logfields import log_fields

__all__ = ["drain_and_close", "CLOSE_SHARE"]

_log = logging.getLogger("jetstream_sync._connection")  # the logger name users configure, kept from before the move

# The part of the timeout kept for the close (send what is queued, drain and
# close the socket); the resources have the rest. Half of it is grace for the
# last answers a resource sends when its own time is up (a service's 503s).
CLOSE_SHARE = 0.2


def drain_and_close(conns: Sequence[Connection], timeout: float) -> None:
    """Drain every resource of ``conns``, then close them, within ``timeout``
    seconds (plus the close's minimum of half a second). A resource asked
    from one of its own handler threads does not wait for that thread."""
    deadline = time.monotonic() + timeout
    reserve = timeout * CLOSE_SHARE
    for conn in conns:
        conn.begin_drain()
    events = [e for conn in conns for e in conn.drain_resources(timeout - reserve)]
    for event in events:
        event.wait(max(deadline - reserve / 2 - time.monotonic(), 0.0))
    for conn in conns:
        try:
            conn.close(max(deadline - time.monotonic(), 0.5), drain=True)
        except Exception:
            _log.exception("closing a client after draining it failed", extra=log_fields(server=conn.last_url))
