"""The ready worker and process helpers: ``run_worker``/``Worker``
(``runner.py``), the worker CLI (``cli.py``), SIGTERM handling
(``signals.py``) and ``shared_client()`` (``shared.py``). Layer 7.

``runner.py`` is imported at the first use of its names: a process that only
needs ``shared_client()`` (a Spark Python worker) never imports it."""

from typing import TYPE_CHECKING, Any

from .._core.lazy import lazy_module

if TYPE_CHECKING:
    from . import runner as _runner
    from .runner import Worker, WorkerStats, run_worker
else:
    _runner = lazy_module("jetstream_sync.worker.runner")

__all__ = ["Worker", "WorkerStats", "run_worker"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(_runner, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
