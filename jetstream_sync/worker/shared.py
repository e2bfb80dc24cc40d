"""One Client per process and connection settings: :func:`shared_client`.

For code that runs in many processes made by fork (gunicorn ``--preload``,
multiprocessing, Spark's Python workers): each process gets its own client,
made on first use. A client inherited over fork() belongs to the parent (it
shares its socket), so the child forgets it without touching it and makes a
new one. Clients are closed at interpreter exit by the hook every Client
registers (``Connection.close_at_exit``); :func:`close_shared_clients` closes
them earlier.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union

from .. import options
from .._core import fork
from .._core.lazy import lazy_module
from ..client import Client, connect

if TYPE_CHECKING:
    from ..options import natscontext
else:  # read only for a client without servers or with a context: imported then (_core/lazy.py)
    natscontext = lazy_module("jetstream_sync.options.natscontext")

__all__ = ["shared_client", "close_shared_clients"]


# _clients and _connecting are read and written under _lock; all three are reset in a
# forked child (the parent's lock may have been held at the fork).
_lock = threading.Lock()
_clients: Dict[Tuple[Any, ...], Client] = {}
_connecting: Dict[Tuple[Any, ...], "_Connecting"] = {}  # the first connect per key, under way


class _Connecting:
    """One thread's connect, waited for by the others that asked meanwhile."""

    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = threading.Event()  # made at call time: a gevent one in a patched worker
        self.error: Optional[BaseException] = None


# A child keeps its parent's clients referenced, never collected: no
# finalizer then runs on objects that hold the parent's socket and loop.
_inherited: List[Client] = []


class _Same:
    """A key part for an unhashable value (an SSLContext, a callback list):
    equal only to the same object, which it keeps alive so its id is not reused."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return _Same(value)
    return value


def settings_key(servers: Union[str, List[str], None], options: Dict[str, Any]) -> Tuple[Any, ...]:
    """A hashable key for one set of connection settings, the context that
    connect() would take from the environment included."""
    server_list = () if servers is None else (servers,) if isinstance(servers, str) else tuple(servers)
    return (server_list, tuple(sorted((k, _freeze(v)) for k, v in options.items())), _context_from_env(servers, options))


def _context_from_env(servers: Union[str, List[str], None], options: Dict[str, Any]) -> Optional[str]:
    """The name of the context connect() would read because of the environment
    (``$NATS_CONTEXT``, or ``context.txt`` for ``context=True``), else None."""
    context = options.get("context")
    if context is True:
        return natscontext.selected_context()
    if servers is None and context in (None, False):
        return os.environ.get(natscontext.CONTEXT_ENV) or None
    return None


def shared_client(servers: Union[str, List[str], None] = None, **connect_options: Any) -> Client:
    """This process's Client for these settings, connected on first use.

    Arguments are those of :func:`jetstream_sync.connect` (no servers: a
    ``context=``'s, ``NATS_CONTEXT``'s, else ``nats://127.0.0.1:4222``); the same
    arguments (values compared by equality, unhashable ones such as an
    ``SSLContext`` by identity) give the same Client, from any thread; a
    context taken from the environment (``NATS_CONTEXT``, or ``context.txt``
    for ``context=True``) is part of the settings. A
    closed client is replaced by a new one; in a forked child the parent's
    clients are never used or closed, the child makes its own. Don't close
    it per request: it is closed at interpreter exit, or by
    :func:`close_shared_clients`.
    """
    key = settings_key(servers, connect_options)
    fork.check_pid()  # a fork the hook missed: forget the parent's clients first
    while True:
        with _lock:
            client = _clients.get(key)
            if client is not None and not client.is_closed:
                return client
            pending = _connecting.get(key)
            mine = pending is None
            if pending is None:
                pending = _connecting[key] = _Connecting()
        if not mine:
            # Another thread is connecting: wait for its client (bounded by its
            # connect timeout; with retry_on_failed_connect, by the server
            # coming up), then look again. Its failure is ours too, rather than
            # each waiter trying again in turn, N connect timeouts for the Nth.
            pending.done.wait()
            if pending.error is not None:
                raise pending.error
            continue
        # Connecting outside _lock: under gevent that lock may be a real one
        # (made before monkey-patching), and a greenlet blocking on it while
        # the holder waits for the server would stop the whole worker.
        try:
            client = connect(servers, **connect_options)
            with _lock:
                _clients[key] = client
            return client
        except BaseException as exc:
            pending.error = exc
            raise
        finally:
            with _lock:
                if _connecting.get(key) is pending:
                    del _connecting[key]
            pending.done.set()


def close_shared_clients(timeout: float = 5.0) -> None:
    """Close every shared client of this process (queued acks and publishes
    are sent first, within ``timeout`` each); later calls make new ones."""
    options.duration("timeout", timeout)  # before any is forgotten
    fork.check_pid()
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close(timeout=timeout)


@fork.on_child
def _after_fork_in_child() -> None:
    """Forget the parent's clients (run by the fork hook, after the
    connections are marked; or by fork.check_pid() where the hook missed the fork)."""
    global _lock, _clients, _connecting
    _lock = threading.Lock()
    _inherited.extend(_clients.values())
    _clients = {}  # the parent's clients are never used or closed here
    _connecting = {}  # a parent's thread connecting at the fork does not exist here
