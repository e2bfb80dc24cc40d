"""See runner.py."""

from .runner import *  # noqa: F401,F403
