"""A WSGI app (no framework) that publishes one JetStream message per request.

    NATS_URL=nats://127.0.0.1:4222 gunicorn --preload --chdir examples gunicorn_app:app

Nothing connects at import, so ``--preload`` forks no connection: each worker
process gets its own client from ``jss.shared_client`` on its first request.
Works the same with ``-k gthread --threads 8`` and ``-k gevent``.
Add ``-c examples/gunicorn_app.py`` to use the ``worker_exit`` hook below.
"""

import json
import os
import threading

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
STREAM, SUBJECT = "EX_GUNICORN", "ex.gunicorn.requests"

_stream_ready = threading.Event()


def app(environ, start_response):
    js = jss.shared_client(NATS_URL).jetstream()  # this process's client, made on first use
    if not _stream_ready.is_set():
        js.create_or_update_stream(name=STREAM, subjects=[SUBJECT])
        _stream_ready.set()
    ack = js.publish(SUBJECT, environ.get("PATH_INFO", "/").encode(), timeout=5.0)
    body = json.dumps({"stream": ack.stream, "seq": ack.seq, "pid": os.getpid()}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def worker_exit(server, worker):
    """gunicorn hook: after the worker's last request, send what is queued and close."""
    jss.close_shared_clients(timeout=10)
