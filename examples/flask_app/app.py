"""A minimal Flask app with a JetStream worker: ``flask --app app jetstream-worker handlers:handle ...``."""

import os
import sqlite3
from pathlib import Path

from flask import Flask, g

from jetstream_sync.contrib.flask import init_app as init_jetstream


def create_app() -> Flask:
    app = Flask(__name__)
    app.config.update(
        DATABASE=os.environ.get("DATABASE", str(Path(app.root_path) / "handled.sqlite3")),
        # The NATS server(s) of the worker; `--server` on the command line wins.
        JETSTREAM_SYNC_SERVERS=[os.environ.get("NATS_URL", "nats://127.0.0.1:4222")],
        JETSTREAM_SYNC_CONNECT_OPTIONS={"name": "flask-example-worker"},
    )
    app.teardown_appcontext(close_db)
    init_jetstream(app)  # `flask jetstream-worker` (also found through the installed entry point)
    with app.app_context():
        init_db()

    @app.get("/handled")
    def handled() -> dict:
        return {"count": get_db().execute("SELECT COUNT(*) FROM handled").fetchone()[0]}

    return app


def get_db() -> sqlite3.Connection:
    """This app context's connection (each handler call has its own app context)."""
    if "db" not in g:
        from flask import current_app

        # timeout: handler threads write at the same time; wait for the lock.
        g.db = sqlite3.connect(current_app.config["DATABASE"], timeout=20)
    return g.db


def close_db(exc: object = None) -> None:
    db = g.pop("db", None)
    if db is not None:
        db.close()


def init_db() -> None:
    # No unique constraint on msg_id: the example's test counts rows per message.
    get_db().execute(
        "CREATE TABLE IF NOT EXISTS handled ("
        " id INTEGER PRIMARY KEY, msg_id TEXT NOT NULL, subject TEXT NOT NULL,"
        " stream_seq INTEGER NOT NULL, payload BLOB, handled_at TEXT DEFAULT CURRENT_TIMESTAMP)"
    )
    get_db().commit()


app = create_app()
