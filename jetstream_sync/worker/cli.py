"""``jetstream-sync worker module:handler ...``: the worker's command line, and
the pieces the Django and Flask commands share with it (options, handler
loading, servers, logging)."""

from __future__ import annotations

import argparse
import importlib
import inspect
import logging
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from .. import errors, options
from .runner import Worker

__all__ = ["OPTIONS", "Option", "UsageError", "add_arguments", "build_worker", "creds_option", "load_handler", "main"]

ENV_URL = "NATS_URL"
LOG_FORMAT = "%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"


class UsageError(Exception):
    """A bad command line: one line for the user, exit status 2."""


@dataclass(frozen=True)
class Option:
    """One worker option, declared once for argparse (CLI, Django) and click (Flask)."""

    flag: str
    help: str
    type: Callable[[str], Any] = str
    default: Any = None
    metavar: Optional[str] = None
    required: bool = False
    multiple: bool = False  # repeatable: a list of values


HANDLER_HELP = "the handler to call per message, as module:function"
OPTIONS = (
    Option("--server", f"NATS server URL (repeat or comma-separate for several; default: the framework's "
           f"setting, then ${ENV_URL})", metavar="URL", multiple=True),
    Option("--stream", "the stream of the consumer", required=True),
    Option("--consumer", "a durable pull consumer of the stream", required=True),
    Option("--concurrency", "handler threads (default 1); above 1 the handler must be thread-safe", int, 1, "N"),
    Option("--shutdown-timeout", "seconds for a graceful stop on SIGTERM/SIGINT (default 10)", float, 10.0, "S"),
    Option("--stats-interval", "seconds between stats log lines (default 60; 0: none)", float, 60.0, "S"),
    Option("--max-messages", "messages pulled ahead of the handlers (default 500)", int, None, "N"),
    Option("--nak-delay", "redeliver a failed message after S seconds (0: at once; default 1 s doubling per "
           "delivery, max 60)", float, None, "S"),
    Option("--creds", "NATS credentials file", metavar="FILE"),
    Option("--log-level", "DEBUG, INFO, WARNING … (default INFO)", str, "INFO", "LEVEL"),
)  # fmt: skip


EPILOG = (
    "SIGTERM or SIGINT stops gracefully within --shutdown-timeout (a second one ends the process at once). "
    "Exit status: 0 after a stop, 1 when consuming could not start or ended by an error (logged), "
    "2 for a bad command line."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The worker's options on an argparse parser (the CLI, the Django command)."""
    parser.add_argument("handler", help=HANDLER_HELP)
    for o in OPTIONS:
        if o.multiple:
            parser.add_argument(o.flag, action="append", metavar=o.metavar, help=o.help)
        else:
            parser.add_argument(
                o.flag, type=o.type, default=o.default, metavar=o.metavar, required=o.required, help=o.help
            )


def load_handler(spec: str) -> Callable[..., Any]:
    """``package.module:function`` (or ``module:object.method``) -> the callable."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"handler must be given as module:function, got {spec!r}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import {module_name!r} for handler {spec!r}: {exc}") from None
    except Exception as exc:  # the module itself failed (a syntax error, a raise at import): show where
        traceback.print_exc()
        raise UsageError(f"importing {module_name!r} for handler {spec!r} failed: {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"module {module_name!r} has no {attr!r} (handler {spec!r})") from None
    if not callable(obj):
        raise UsageError(f"handler {spec!r} is not callable: {obj!r}")
    if inspect.iscoroutinefunction(obj):
        raise UsageError(f"handler {spec!r} is an async def function: the worker calls plain functions on threads")
    return obj  # type: ignore[no-any-return]


def resolve_servers(given: Optional[Sequence[str]], configured: Any = None, setting: Optional[str] = None) -> List[str]:
    """``--server`` values, else the framework's setting (named ``setting``), else $NATS_URL."""
    if configured is not None and not isinstance(configured, (str, list, tuple)):
        raise UsageError(f"{setting or 'the servers setting'} must be a URL or a list of URLs, got a {type(configured).__name__}")  # no repr: URLs hold passwords
    for source in (given, configured, os.environ.get(ENV_URL)):
        if isinstance(source, str):
            source = [source]
        urls = [u.strip() for s in source or () for u in str(s).split(",") if u.strip()]
        if urls:
            return urls
    where = f", {setting}" if setting else ""
    raise UsageError(f"no NATS server: give --server URL{where} or set {ENV_URL}")


def setup_logging(level: str) -> None:
    """Log to stderr at ``level`` unless logging is configured already."""
    value = logging.getLevelName(str(level).upper())
    if not isinstance(value, int):
        raise UsageError(f"unknown log level {level!r}: use DEBUG, INFO, WARNING, ERROR or CRITICAL")
    logging.basicConfig(level=value, format=LOG_FORMAT)
    logging.getLogger("jetstream_sync").setLevel(value)


def creds_option(path: str) -> Dict[str, Any]:
    """``--creds FILE`` as connect options, once the file is read and checked
    (UsageError naming the option and the file)."""
    try:
        options.check_credentials({"user_credentials": path}, {"user_credentials": "--creds"})
    except errors.InvalidOptionError as exc:
        raise UsageError(str(exc)) from None
    return {"user_credentials": path}


def build_worker(
    values: Mapping[str, Any],
    *,
    configured_servers: Any = None,
    setting: Optional[str] = None,
    connect_options: Optional[Mapping[str, Any]] = None,
    **hooks: Any,
) -> Worker:
    """A Worker from the parsed options (argparse's or click's names); bad
    values raise UsageError before anything is sent. ``hooks``: around, thread_exit."""
    setup_logging(values.get("log_level") or "INFO")
    handler = load_handler(values["handler"])
    if connect_options is not None and not isinstance(connect_options, Mapping):
        raise UsageError(f"the connect options setting must be a mapping, got {type(connect_options).__name__}")
    opts: Dict[str, Any] = {"name": "jetstream-sync-worker", **(connect_options or {})}
    if values.get("creds"):
        opts.update(creds_option(values["creds"]))
    pull: Dict[str, Any] = {}
    if values.get("max_messages") is not None:
        pull["max_messages"] = values["max_messages"]
    try:
        return Worker(
            handler,
            stream=values["stream"],
            consumer=values["consumer"],
            servers=resolve_servers(values.get("server"), configured_servers, setting),
            connect_options=opts,
            concurrency=values.get("concurrency", 1),
            shutdown_timeout=values.get("shutdown_timeout", 10.0),
            stats_interval=values.get("stats_interval") or None,
            nak_delay=values.get("nak_delay"),
            **hooks,
            **pull,
        )
    except errors.InvalidOptionError as exc:
        raise UsageError(str(exc)) from None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="jetstream-sync worker",
        description="Call a handler for every message of a JetStream pull consumer (ack on return, NAK on raise).",
        epilog=EPILOG,
    )
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage
        return int(exc.code or 0)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # handlers next to where the worker is started, as gunicorn does
    try:
        worker = build_worker(vars(args))
    except UsageError as exc:
        print(f"jetstream-sync worker: error: {exc}", file=sys.stderr)
        return 2
    return worker.run()
