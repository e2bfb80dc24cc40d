"""See bucket.py."""

from .bucket import *  # noqa: F401,F403
