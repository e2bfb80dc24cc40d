"""Settings of the example project: SQLite, the orders app, and the worker command."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-a-secret")
DEBUG = False
ALLOWED_HOSTS = ["localhost", "127.0.0.1"]

INSTALLED_APPS = [
    "jetstream_sync.contrib.django",  # adds `manage.py jetstream_worker`
    "orders",
]

ROOT_URLCONF = "shop.urls"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": BASE_DIR / "db.sqlite3",
        # Handler threads write at the same time: wait for SQLite's write lock
        # instead of failing at once.
        "OPTIONS": {"timeout": 20},
    }
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True

# The NATS server(s) of the worker; `--server` on the command line wins.
JETSTREAM_SYNC = {
    "servers": [os.environ.get("NATS_URL", "nats://127.0.0.1:4222")],
    "connect_options": {"name": "shop-worker"},
}
