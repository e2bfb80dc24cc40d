"""The transition matrix's table covers the public API: a new public method
fails here until it has a row in tests/transition_table.py (or a reason
there why it is not in the matrix)."""

from __future__ import annotations

import inspect
from collections import Counter

import jetstream_sync as jss

from .. import transition_table as table


def public_methods() -> set[str]:
    out = set()
    for name in jss.__all__:
        cls = getattr(jss, name)
        if not inspect.isclass(cls) or issubclass(cls, BaseException) or cls.__module__ != "jetstream_sync":
            continue
        if name in table.VALUE_CLASSES or name in table.BASE_CLASSES or cls.__name__ != name:
            continue  # PullConsumer is Consumer: one name
        for attr, value in inspect.getmembers(cls):
            if not attr.startswith("_") and inspect.isfunction(value):
                out.add(f"{name}.{attr}")
    for cls_name, methods in table.UNNAMED_CLASSES.items():
        out.update(f"{cls_name}.{m}" for m in methods)
    return out


def test_every_public_method_has_a_row_or_a_reason():
    rows = {row.target for row in table.ROWS}
    missing = public_methods() - rows - set(table.NOT_IN_THE_MATRIX)
    assert not missing, "public methods with no row in tests/transition_table.py: " + ", ".join(sorted(missing))


def test_rows_name_methods_that_exist_once_each():
    counts = Counter(row.target for row in table.ROWS)
    assert [t for t, n in counts.items() if n > 1] == []
    stale = {t for t in counts if "." in t and not t.split(".", 1)[1].startswith("__")} - public_methods()
    assert not stale, "rows for methods that are not public: " + ", ".join(sorted(stale))


def test_every_kind_says_what_happens_in_every_state():
    for row in table.ROWS:
        for state in table.State:
            for caller in table.Caller:
                assert row.expected(state, caller), (row.target, state, caller)
