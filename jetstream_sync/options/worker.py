"""The checks of ``run_worker`` / ``Worker`` arguments that are the
worker's own (the rest go through the generic checks: names, durations,
handlers, consume options).

Pure functions, no I/O; the Client class is given by the caller (the worker
is above options/ in the layers).
"""

from __future__ import annotations

from typing import Any, Iterable, List

from .. import errors


def worker_client(client: Any, client_cls: type, servers: Any, connect_options: Any) -> None:
    """A Client given (when given) is a ``client_cls`` and comes alone, without servers or connect options."""
    if client is not None:
        if not isinstance(client, client_cls):
            raise errors.InvalidOptionError(f"client must be a jetstream_sync.Client, got {client!r}")
        if servers is not None or connect_options:
            raise errors.InvalidOptionError("give either client or servers/connect_options, not both")


def signal_numbers(signals: Iterable[Any]) -> List[int]:
    """The signals a worker stops on, as a list of signal numbers."""
    listed = list(signals)
    for sig in listed:
        if not isinstance(sig, int):
            raise errors.InvalidOptionError(f"signals must be signal numbers, got {sig!r}")
    return listed


def service_list(made: Any, service_cls: type) -> List[Any]:
    """What a service factory returned: one ``service_cls`` or a non-empty
    list or tuple of them, as a list."""
    found = [made] if isinstance(made, service_cls) else list(made) if isinstance(made, (list, tuple)) else []
    if not found or not all(isinstance(s, service_cls) for s in found):
        raise errors.InvalidOptionError(f"the service factory must return a Service or a list of them, got {made!r}")
    return found
