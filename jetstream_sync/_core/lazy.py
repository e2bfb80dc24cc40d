"""Modules imported at their first use, not when the package is imported.

A process that only reads a stream (each Spark executor, the data source
planner) imports ``jetstream_sync`` but never the key-value, object store,
consumer group, service or system client modules; importing them would cost
every such process tens of milliseconds. A module that needs one only in
some of its methods names it at its top, as the import it is::

    if TYPE_CHECKING:
        from .kv import manage as kv
    else:
        kv = lazy_module("jetstream_sync.kv.manage")

and the module is imported at the first read of one of its attributes
(``kv.open_bucket``). Type checkers see the import; the package's layout test
(tests/unit/test_structure.py) reads the declaration as the module-level
import it is (layers, cycles) and checks that both branches name the same
module. This is the only module that calls ``importlib`` on a package module
but for the package root's ``__getattr__`` (its public names load the same way).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable, List, Optional

__all__ = ["lazy_module", "on_load"]

# Called after each module a stand-in imported: the package root's, which
# makes the public names of what was just loaded report "jetstream_sync".
_hooks: List[Callable[[], None]] = []


def on_load(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback()`` after every module a :func:`lazy_module` stand-in
    imports (it must import no module that is not imported yet). Returns ``callback``."""
    _hooks.append(callback)
    return callback


class _LazyModule:
    """A module's stand-in: the first attribute read imports the module
    (thread-safe: the import system's lock), every read is the module's."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: Optional[ModuleType] = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            module = importlib.import_module(self._name)
            self._module = module
            for hook in list(_hooks):
                hook()
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, {'imported' if self._module is not None else 'imported at first use'}>"


def lazy_module(name: str) -> Any:
    """A stand-in for the module ``name`` (absolute, ``jetstream_sync.kv.manage``),
    imported at the first read of one of its attributes."""
    return _LazyModule(name)
