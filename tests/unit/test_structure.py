"""The import structure: the connection core at the bottom of everything that
talks to NATS, arrows only into it, and no module reading another's privates."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Set

PKG = Path(__file__).resolve().parents[2] / "jetstream_sync"

# The core and what it is built from: none of them may import anything above.
CORE = "_core.connection"
BELOW_CORE = {
    "_core.loop", "_core.wire", "_core.outbox", "_core.publisher", "_core.fork", "_core.nats_errors",
    "_core.connect", "_core.events", "_core.permissions", "_core.subscriptions", "_core.ack_order",
    "errors", "options", "models",
}  # fmt: skip


def dotted(path: Path) -> str:
    parts = list(path.relative_to(PKG).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path) -> Set[str]:
    """Package modules imported by ``path`` at run time (TYPE_CHECKING blocks excluded)."""
    tree = ast.parse(path.read_text())
    here = dotted(path).split(".")
    base = here if path.name == "__init__.py" else here[:-1]
    found: Set[str] = set()

    def visit(nodes: list) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.ImportFrom) and node.level >= 1:
                root = base[: len(base) - (node.level - 1)]
                if node.module:
                    found.add(".".join([*root, node.module]))
                else:
                    found.update(".".join([*root, alias.name]) for alias in node.names)
            for child in ast.iter_child_nodes(node):
                visit([child])

    visit(tree.body)
    return found


def modules() -> Dict[str, Path]:
    return {dotted(p): p for p in PKG.rglob("*.py") if dotted(p)}


def test_nothing_below_the_core_imports_above_it():
    mods = modules()
    allowed = BELOW_CORE | {"_core._speedups"}  # the parser's C accelerator
    for name in BELOW_CORE:
        above = runtime_imports(mods[name]) - allowed
        assert not above, f"{name} imports {above}, which sit above the connection core"


def test_the_core_uses_only_what_is_below_it():
    assert runtime_imports(modules()[CORE]) <= BELOW_CORE


def test_engines_and_contexts_reach_nats_py_only_through_the_core():
    for name in (
        "client", "jetstream", "stream", "consumer", "contexts", "_engines.receiver", "_engines.engine",
        "_engines.pull", "_engines.push", "_engines.ordered", "ordered", "push", "subscribe", "_core.direct",
        "_core.message", "worker.signals",
    ):  # fmt: skip
        source = modules()[name].read_text()
        assert "nats.aio.client" not in source or name in ("client", "_core.message"), name
        assert "import nats.errors" not in source or name in ("jetstream", "_core.publish"), name


def test_no_module_reads_another_modules_private_attributes():
    """``x._name`` only for private names the module defines itself (on its
    own classes' instances); nats-py, asyncio and gevent internals only in
    _wire, _connection and _loop, where they are listed."""
    for name, path in modules().items():
        if name in ("_core.wire", "_core.connection", "_core.loop", "_tools.server"):
            continue
        tree = ast.parse(path.read_text())
        defined = {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and ast.unparse(node.value) in ("self", "cls")
        }
        defined |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = ast.unparse(node.value)
                # Flask documents _get_current_object() as the way to unwrap its proxies.
                public_anyway = node.attr == "_get_current_object"
                assert node.attr in defined or public_anyway or base.startswith("_futures_base"), (
                    f"{name}.py:{node.lineno} reads {base}.{node.attr}, not defined in {name}.py"
                )


def test_core_modules_and_functions_fit_a_screen_or_say_why():
    """No _core module over ~600 lines, no _core function over ~60, without
    a reason at its top (a function's: a comment starting with ``# Long:``)."""
    for name, path in modules().items():
        if not name.startswith("_core."):
            continue
        source = path.read_text()
        lines = source.splitlines()
        assert len(lines) <= 600 or "Long:" in (ast.get_docstring(ast.parse(source)) or ""), name
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                if node.end_lineno - node.lineno + 1 > 60:
                    has_doc = ast.get_docstring(node) is not None and len(node.body) > 1
                    first = node.body[1] if has_doc else node.body[0]  # the reason comes before it
                    top = "\n".join(lines[node.lineno - 1 : first.lineno])
                    assert "# Long:" in top, f"{name}.{node.name} has {node.end_lineno - node.lineno + 1} lines"


def test_one_fork_hook_and_one_module_that_maps_nats_py_errors():
    """os.register_at_fork only in _core.fork; nats.errors only where errors
    are mapped (the wire parser raises nats-py's own ProtocolError inside nats-py's reader)."""
    for name, path in modules().items():
        source = path.read_text()
        assert "register_at_fork" not in source or name == "_core.fork", name
        if name.startswith("_core."):
            assert "nats.errors" not in source or name in ("_core.nats_errors", "_core.wire"), name
