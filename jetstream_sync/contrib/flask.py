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

from typing import Any, Callable

import click
from flask import Flask, current_app
from flask.cli import with_appcontext

from ..worker.cli import OPTIONS, UsageError, build_worker

__all__ = ["worker_command", "init_app"]


def _worker_options(command: Callable[..., None]) -> Callable[..., None]:
    """The CLI's options (one table in _worker_cli) as click options."""
    for o in reversed(OPTIONS):
        command = click.option(
            o.flag, type=o.type, default=o.default, required=o.required, multiple=o.multiple,
            metavar=o.metavar, help=o.help,
        )(command)  # fmt: skip
    return command


@click.command("jetstream-worker")
@click.argument("handler")
@_worker_options
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
