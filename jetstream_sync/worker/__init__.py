"""The ready worker and process helpers: ``run_worker``/``Worker``
(``runner.py``), the worker CLI (``cli.py``), SIGTERM handling
(``signals.py``) and ``shared_client()`` (``shared.py``). Layer 7."""

from .runner import Worker, WorkerStats, run_worker

__all__ = ["Worker", "WorkerStats", "run_worker"]
