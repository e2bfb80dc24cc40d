"""See store.py."""

from .store import *  # noqa: F401,F403
