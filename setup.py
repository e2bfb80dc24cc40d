"""The optional C accelerator (jetstream_sync/_core/_speedups.c); everything else is in setup.cfg.

``optional=True``: where it cannot be compiled (no compiler, no Python
headers) the package installs without it and runs its pure-Python parser.
Set JETSTREAM_SYNC_NO_EXT=1 to skip building it.
"""

import os

from setuptools import Extension, setup

ext = [] if os.environ.get("JETSTREAM_SYNC_NO_EXT") else [
    Extension("jetstream_sync._core._speedups", ["jetstream_sync/_core/_speedups.c"], optional=True)
]
setup(ext_modules=ext)
