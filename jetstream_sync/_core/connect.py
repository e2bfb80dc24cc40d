"""Connecting: the options a connect takes, the server URLs, and the first
connect with the reason it failed.

:func:`check_settings` checks what the user passed (in the calling thread, before
the loop thread starts); :func:`first_connect` runs on the loop thread and
says why as soon as every server failed once, rather than after nats-py's
own retries. Passwords in URLs never reach a log or an error: see
:func:`redact_url`.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Dict, List, Optional, Set, Union

from nats.aio.client import Client as _NatsClient

from .. import errors
from ..options import callback, check_credentials, check_servers, connect_durations, inbox_prefix, known_options
from ..options import redact_url
from .nats_errors import InsecureServer, connect_error, most_specific
from .wire import server_info

__all__ = [
    "NATS_OPTIONS",
    "OWN_OPTIONS",
    "USER_CALLBACKS",
    "FAST_PATHS_ENV",
    "Settings",
    "check_settings",
    "fast_paths_wanted",
    "check_servers",
    "redact_url",
    "secure_enough",
    "close_quietly",
    "first_connect",
]

NATS_OPTIONS = frozenset(inspect.signature(_NatsClient.connect).parameters) - {"self", "servers"}
# Our own connect() options, not passed to nats-py.
OWN_OPTIONS = frozenset({"retry_on_failed_connect"})
# The user's connection callbacks: run by the connection's Events, not given to nats-py as they are.
USER_CALLBACKS = ("error_cb", "disconnected_cb", "closed_cb", "discovered_server_cb", "reconnected_cb")
# JETSTREAM_SYNC_FAST_PATHS=0 forces the public nats-py API (CI runs the
# integration tier both ways).
FAST_PATHS_ENV = "JETSTREAM_SYNC_FAST_PATHS"


@dataclass
class Settings:
    """One connect, checked."""

    servers: List[str]
    options: Dict[str, Any]  # for nats-py's connect, without our own options and the user's callbacks
    callbacks: Dict[str, Callable[..., Any]]  # the user's, by option name
    retry: bool  # retry_on_failed_connect
    deadline: Optional[float]  # seconds for the first connect to every server (None: with retry, unbounded)
    tls: bool  # TLS was asked for (tls= or a tls:// URL)
    inbox_prefix: Optional[str]  # checked, when given


def check_settings(servers: Union[str, List[str]], options: Dict[str, Any]) -> Settings:
    """Check the arguments of ``connect(servers, **options)``; InvalidOptionError if one is wrong.
    The credential files named are read and checked here, before anything connects."""
    known_options(options, NATS_OPTIONS | OWN_OPTIONS)
    check_credentials(options)
    options = dict(options)
    connect_durations(options)
    retry = bool(options.pop("retry_on_failed_connect", False))
    callbacks: Dict[str, Callable[..., Any]] = {}
    for name in USER_CALLBACKS:
        cb = options.pop(name, None)
        if cb is not None:
            callbacks[name] = callback(name, cb)
    server_list = check_servers([servers] if isinstance(servers, str) else list(servers))
    prefix = inbox_prefix(options["inbox_prefix"]) if "inbox_prefix" in options else None
    deadline = None
    if not retry:
        deadline = float(options.get("connect_timeout", 2)) * max(1, len(server_list)) + 1.0
    tls = bool(options.get("tls")) or any(s.startswith("tls://") for s in server_list)
    return Settings(server_list, options, callbacks, retry, deadline, tls, prefix)


def fast_paths_wanted() -> bool:
    """False when JETSTREAM_SYNC_FAST_PATHS=0 asks for the public nats-py API only."""
    return os.environ.get(FAST_PATHS_ENV, "1") != "0"


def secure_enough(nc: _NatsClient, tls: bool) -> bool:
    """With ``tls`` (TLS asked for) the connection must be encrypted: nats-py
    would otherwise go on in plain text with a server that does not require
    TLS. Checked where nats-py shows the server's INFO."""
    if not tls:
        return True
    info = server_info(nc)
    return info is None or bool(info.get("tls_required"))


async def close_quietly(nc: _NatsClient) -> None:
    try:
        await nc.close()
    except Exception:
        pass


async def first_connect(
    nc: _NatsClient,
    s: Settings,
    callbacks: Dict[str, Any],
    on_error: Callable[[Exception], Awaitable[None]],
) -> None:
    """Loop thread: connect ``nc`` with ``callbacks`` (nats-py's, error_cb
    aside); raise NoServersError or AuthorizationError saying why it could
    not, as soon as every server failed once (without retry). Errors that
    are not about this first connect go to ``on_error``."""
    failed: "asyncio.Future[BaseException]" = asyncio.get_running_loop().create_future()
    attempts: List[BaseException] = []

    async def error_cb(exc: Exception) -> None:
        if not s.retry and not failed.done() and not nc.is_connected:
            attempts.append(exc)
            if len(attempts) >= len(s.servers):  # every server failed once: say why at once
                failed.set_result(most_specific(attempts))
            return
        await on_error(exc)

    # Any: nats-py checks each keyword's type, not a dict's.
    connecting = asyncio.ensure_future(nc.connect(s.servers, **s.options, error_cb=error_cb, **callbacks))
    try:
        waiting: Set["asyncio.Future[Any]"] = {connecting, failed}
        done, _ = await asyncio.wait(waiting, timeout=s.deadline, return_when=asyncio.FIRST_COMPLETED)
        if connecting in done:
            connecting.result()
            if not secure_enough(nc, s.tls):
                await close_quietly(nc)
                raise _failed(nc, s, InsecureServer())
            return
        cause: Optional[BaseException] = failed.result() if failed in done else None
        connecting.cancel()
    except BaseException as exc:
        connecting.cancel()
        await close_quietly(nc)
        if isinstance(exc, errors.JetStreamError):
            raise
        raise _failed(nc, s, exc) from exc
    await close_quietly(nc)
    raise _failed(nc, s, cause) from cause


def _failed(nc: _NatsClient, s: Settings, cause: Optional[BaseException]) -> errors.JetStreamError:
    where = ", ".join(redact_url(url) for url in s.servers)
    return connect_error(cause, where, server_info(nc), s.tls)
