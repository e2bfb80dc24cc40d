"""``jetstream-sync service module:factory``: run ADR-32 services until
SIGTERM/SIGINT, then drain them (every request received is answered) and
close, within ``--shutdown-timeout``.

``factory(client)`` is given a connected Client and returns the Service it
added (or a list of them)::

    def make(nc):
        svc = nc.add_service("calc", "1.0.0")
        svc.add_endpoint("add", add)
        return svc
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

from .. import errors, options
from ..client import Client, connect
from ..services import Service
from .cli import UsageError, creds_option, load_handler, resolve_servers, setup_logging
from .signals import catch_signals
from .._core.logfields import log_fields

__all__ = ["run_service", "main"]

_log = logging.getLogger("jetstream_sync.worker")
_SIGNAL_POLL = 0.2  # how often the main thread looks for a signal or for services that ended by themselves

Factory = Callable[[Client], Any]


def run_service(
    factory: Factory,
    *,
    servers: Sequence[str],
    connect_options: Optional[Mapping[str, Any]] = None,
    shutdown_timeout: float = 5.0,
    signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT),
) -> int:
    """Connect, call ``factory(client)`` for the services, run them until one
    of ``signals`` (main thread only) or until they all ended, then drain
    them and close within ``shutdown_timeout`` seconds (default 5). Returns
    the exit status: 0 when everything received was answered in time, 1
    otherwise (logged)."""
    options.handler("factory", factory)
    limit = options.duration("shutdown_timeout", shutdown_timeout)
    sigs = options.signal_numbers(signals)
    nc = connect(list(servers), **{"name": "jetstream-sync-service", **(connect_options or {})})
    deadline = time.monotonic() + limit  # moved on once a stop is asked for
    try:
        services: List[Service] = options.service_list(factory(nc), Service)
        names = ", ".join(f"{s.name} {s.version} ({s.id})" for s in services)
        fired: List[int] = []
        stop = threading.Event()

        def on_signal(signum: int) -> None:
            fired.append(signum)
            stop.set()

        restore = catch_signals(sigs, on_signal)
        try:
            _log.info("serving %s", names, extra=log_fields())
            while not stop.wait(_SIGNAL_POLL) and not all(s.stopped for s in services):
                pass
        finally:
            restore()
        deadline = time.monotonic() + limit
        if fired:
            _log.info("signal %d: draining %s (within %.1fs)", fired[0], names, limit, extra=log_fields())
        drained = all([s.drain(max(deadline - time.monotonic(), 0.01)) for s in services])
        if not drained:
            _log.error("the services did not finish their requests within %.1fs", limit, extra=log_fields())
        return 0 if drained else 1
    finally:
        nc.close(timeout=max(deadline - time.monotonic(), 0.5))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="jetstream-sync service",
        description="Run the ADR-32 services that factory(client) adds, until SIGTERM or SIGINT; then drain and exit.",
        epilog="Exit status: 0 after a graceful stop, 1 when the services could not start or did not drain in time, "
        "2 for a bad command line.",
    )
    parser.add_argument("factory", help="module:function that takes a Client and returns the Service(s) it added")
    parser.add_argument("--server", action="append", metavar="URL", help="NATS server URL (repeatable; default $NATS_URL)")
    parser.add_argument("--creds", metavar="FILE", help="NATS credentials file")
    parser.add_argument("--shutdown-timeout", type=float, default=5.0, metavar="S",
                        help="seconds to drain on SIGTERM/SIGINT (default 5)")  # fmt: skip
    parser.add_argument("--log-level", default="INFO", metavar="LEVEL", help="DEBUG, INFO, WARNING … (default INFO)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage
        return int(exc.code or 0)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # factories next to where the command is started
    try:
        setup_logging(args.log_level)
        factory = load_handler(args.factory)
        servers = resolve_servers(args.server)
        opts: Dict[str, Any] = {}
        if args.creds:
            opts.update(creds_option(args.creds))
        options.duration("--shutdown-timeout", args.shutdown_timeout)
    except (UsageError, errors.InvalidOptionError) as exc:
        print(f"jetstream-sync service: error: {exc}", file=sys.stderr)
        return 2
    try:
        return run_service(factory, servers=servers, connect_options=opts, shutdown_timeout=args.shutdown_timeout)
    except errors.InvalidOptionError as exc:
        _log.error("%s", exc, extra=log_fields())
        return 1
