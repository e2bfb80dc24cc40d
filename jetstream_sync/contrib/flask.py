"""Flask integration: ``flask --app myapp jetstream-worker app.handlers:handle --stream S --consumer C``.

The command is found through the ``flask.commands`` entry point once
jetstream-sync is installed, or registered by hand with
``app.cli.add_command(worker_command)`` / :func:`init_app`. Each handler call
runs inside ``app.app_context()`` (so ``current_app``, ``g`` and
``teardown_appcontext`` work as in a request). The server comes from
``--server``, else ``app.config["JETSTREAM_SYNC_SERVERS"]``, else ``$NATS_URL``;
``app.config["JETSTREAM_SYNC_CONNECT_OPTIONS"]`` passes through to ``connect()``.
"""

from __future__ import annotations

from typing import Any

import click
from flask import Flask, current_app
from flask.cli import with_appcontext

from .._worker_cli import UsageError, build_worker

__all__ = ["worker_command", "init_app"]


@click.command("jetstream-worker")
@click.argument("handler")
@click.option("--server", multiple=True, metavar="URL", help="NATS server URL (default: config, then $NATS_URL)")
@click.option("--stream", required=True, help="the stream of the consumer")
@click.option("--consumer", required=True, help="a durable pull consumer of the stream")
@click.option("--concurrency", type=int, default=1, show_default=True, help="handler threads")
@click.option("--shutdown-timeout", type=float, default=10.0, show_default=True, help="seconds for a graceful stop")
@click.option("--stats-interval", type=float, default=60.0, show_default=True, help="seconds between stats lines (0: none)")
@click.option("--max-messages", type=int, default=None, help="messages pulled ahead of the handlers (default 500)")
@click.option(
    "--nak-delay", type=float, default=None,
    help="redeliver a failed message after this many seconds (0: at once; default 1 s doubling per delivery, max 60)",
)  # fmt: skip
@click.option("--creds", default=None, metavar="FILE", help="NATS credentials file")
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING …")
@with_appcontext
def worker_command(**values: Any) -> None:
    """Call HANDLER (module:function) for every message of a JetStream pull consumer."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    try:
        worker = build_worker(
            values,
            configured_servers=app.config.get("JETSTREAM_SYNC_SERVERS"),
            setting='app.config["JETSTREAM_SYNC_SERVERS"]',
            connect_options=app.config.get("JETSTREAM_SYNC_CONNECT_OPTIONS"),
            around=app.app_context,
        )
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    status = worker.run()
    if status:
        raise SystemExit(status)


def init_app(app: Flask) -> None:
    """Register ``flask jetstream-worker`` on ``app`` (not needed when the entry point is installed)."""
    app.cli.add_command(worker_command)
