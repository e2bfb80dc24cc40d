"""``python manage.py jetstream_worker app.handlers:handle --stream S --consumer C``.

The server comes from ``--server``, else ``settings.JETSTREAM_SYNC["servers"]``,
else ``$NATS_URL``; ``settings.JETSTREAM_SYNC["connect_options"]`` passes
through to ``connect()``. Like Celery, stale database connections are closed
before and after each message, and each handler thread closes its own
connections when it ends (Django's connections are per thread).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Dict, Iterator

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections, connections

from jetstream_sync.worker.cli import UsageError, add_arguments, build_worker

SETTING_KEYS = ("servers", "connect_options")


@contextlib.contextmanager
def db_connections_checked() -> Iterator[None]:
    """Drop connections that are broken or past CONN_MAX_AGE, before and after a message."""
    close_old_connections()
    try:
        yield
    finally:
        close_old_connections()


def close_thread_connections() -> None:
    connections.close_all()  # this thread's connections only


def jetstream_settings() -> Dict[str, Any]:
    conf = getattr(settings, "JETSTREAM_SYNC", None) or {}
    if not isinstance(conf, dict):
        raise UsageError(f"settings.JETSTREAM_SYNC must be a dict, got {conf!r}")
    unknown = set(conf) - set(SETTING_KEYS)
    if unknown:
        raise UsageError(f"settings.JETSTREAM_SYNC: unknown key(s) {sorted(unknown)}; known: {list(SETTING_KEYS)}")
    return conf


class Command(BaseCommand):
    help = "Call a handler for every message of a JetStream pull consumer (ack on return, NAK on raise)."

    def add_arguments(self, parser: CommandParser) -> None:
        add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            conf = jetstream_settings()
            worker = build_worker(
                options,
                configured_servers=conf.get("servers"),
                setting='settings.JETSTREAM_SYNC["servers"]',
                connect_options=conf.get("connect_options"),
                around=db_connections_checked,
                thread_exit=close_thread_connections,
            )
        except UsageError as exc:
            raise CommandError(str(exc), returncode=2) from None
        status = worker.run()
        if status:
            sys.exit(status)
