"""The layout of the package (DESIGN.md section 3), read from its source.

Layers, lowest first; a module may import its own layer and those below:

    0 errors, models                         leaves
    1 options/                               every option's default and check
    2 _core/                                 the connection core, the JetStream API
    3 _engines/                              loop-side consumer engines, pull protocol
    4 contexts consumer push ordered stream  the handles
      subscriptions subscribe core replies
    5 kv/ object_store/ services/ system/    features built on the handles
      pcgroups/
    6 jetstream client                       the entry points that compose it all
    7 worker/ spark/ contrib/ _tools/        integrations and tools, the test kit
      testing/
      __main__ and the package itself

Each rule is a function over a package directory; every rule runs on the real
package and on a small package written here with one fault in it, so a rule
that could not fail would show.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

PKG = Path(__file__).resolve().parents[2] / "jetstream_sync"

LAYERS: Tuple[Tuple[str, ...], ...] = (
    ("errors", "models"),
    ("options",),
    ("_core",),
    ("_engines",),
    ("contexts", "consumer", "push", "ordered", "stream", "subscriptions", "subscribe", "core", "replies"),
    ("kv", "object_store", "services", "system", "pcgroups"),
    ("jetstream", "client"),
    ("worker", "spark", "contrib", "_tools", "testing", "__main__", ""),
)
# Imports inside functions that are allowed: the optional C accelerator.
FUNCTION_IMPORTS_ALLOWED = {("_core.wire", "_core._speedups")}
MAX_LINES = 600
MAX_FUNCTION_LINES = 60
LONG_FUNCTIONS_CHECKED_IN = ("_core", "_engines")
# Modules that may touch nats-py or asyncio internals (private attributes).
INTERNALS_ALLOWED = {"_core.wire", "_core.writer", "_core.connection", "_core.loop"}
# Private names of other libraries that are the only way to what a module needs: the
# module allowed to read each (None: any module).
FOREIGN_PRIVATE_ALLOWED = {
    # Flask documents _get_current_object() as the way to unwrap its proxies.
    "_get_current_object": None,
    # os._exit() is public: the way a forked child ends without running the parent's cleanup.
    "_exit": None,
    # pyspark's JVM session: the only way to ask Spark's data source manager
    # whether a source is registered (register() must not replace one: Spark warns).
    "_jsparkSession": "spark",
}


# -- reading a package ------------------------------------------------------------------


def dotted(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path) -> Dict[str, Path]:
    return {dotted(root, p): p for p in sorted(root.rglob("*.py"))}


def layer(name: str) -> int:
    head = name.split(".")[0]
    for i, names in enumerate(LAYERS):
        if head in names:
            return i
    raise AssertionError(f"module {name!r} is in no layer: add its folder to LAYERS and to DESIGN.md")


class Import:
    def __init__(self, target: str, line: int, in_function: bool, type_only: bool) -> None:
        self.target, self.line, self.in_function, self.type_only = target, line, in_function, type_only


def package_of(name: str, path: Path) -> List[str]:
    """The package a module's relative imports start from, as parts ([] for the root)."""
    if name == "":
        return []
    return name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]


def bindings(root: Path, base: List[str], node: ast.AST, known: Set[str]) -> List[Tuple[str, str]]:
    """(the name it binds, the package module) of each package module or name an
    import statement imports (``from . import x`` of a module is x); [] for any other node."""
    found = []
    if isinstance(node, ast.ImportFrom) and node.level >= 1:
        at = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        mod = ".".join([*at, *(node.module.split(".") if node.module else [])])
    elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == root.name:
        mod = ".".join(node.module.split(".")[1:])
    elif isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] == root.name:
                found.append((alias.asname or root.name, ".".join(alias.name.split(".")[1:])))
        return found
    else:
        return found
    for alias in node.names:
        sub = f"{mod}.{alias.name}" if mod else alias.name
        found.append((alias.asname or alias.name, sub if sub in known else mod))
    return found


def lazy_target(root: Path, node: ast.AST) -> Optional[str]:
    """The package module of a ``lazy_module("jetstream_sync.x")`` call (_core/lazy.py), else None."""
    if (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "lazy_module" and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
            and node.args[0].value.split(".")[0] == root.name):  # fmt: skip
        return ".".join(node.args[0].value.split(".")[1:])
    return None


def imports(root: Path, name: str, path: Path, known: Set[str]) -> Iterator[Import]:
    """The package modules ``path`` imports, however (``from . import x`` of a module
    is x; a ``lazy_module()`` declaration is the import it stands for)."""
    tree = ast.parse(path.read_text())
    base = package_of(name, path)

    def visit(node: ast.AST, in_function: bool, type_only: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            f = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            t = type_only or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
            for _, target in bindings(root, base, child, known):
                yield Import(target, child.lineno, in_function, t)
            lazy = lazy_target(root, child)
            if lazy is not None:
                yield Import(lazy, child.lineno, in_function, t)
            yield from visit(child, f, t)

    yield from visit(tree, False, False)


def graph(root: Path) -> Dict[str, List[Import]]:
    mods = modules(root)
    known = set(mods) | {dotted(root, p) for p in root.rglob("*.pyi")}  # compiled modules (_speedups)
    return {name: [i for i in imports(root, name, path, known) if i.target != name] for name, path in mods.items()}


# -- the rules ------------------------------------------------------------------------


def upward_imports(root: Path) -> List[str]:
    """Imports of a higher layer (type-only imports count too)."""
    found = []
    for name, edges in graph(root).items():
        for edge in edges:
            if edge.target and layer(edge.target) > layer(name):
                found.append(f"{name or '__init__'}:{edge.line} imports {edge.target} (a higher layer)")
    return found


def cycles(root: Path) -> List[str]:
    """Import cycles, type-only and function-level imports included. A
    package's ``__init__`` re-exporting its own modules is no cycle of theirs."""
    g = graph(root)
    edges = {
        n: {e.target for e in es if not (n == "" or e.target == "" or (e.target.startswith(n + ".") and "." not in e.target[len(n) + 1:]))}
        for n, es in g.items()
    }
    found: List[str] = []
    state: Dict[str, int] = {}
    stack: List[str] = []

    def walk(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                found.append(" -> ".join(stack[stack.index(m):] + [m]))
            elif m not in state:
                walk(m)
        stack.pop()
        state[n] = 2

    for n in sorted(edges):
        if n not in state:
            walk(n)
    return found


def function_imports(root: Path) -> List[str]:
    """Package modules imported inside a function (they hide cycles)."""
    return [
        f"{name}:{e.line} imports {e.target} inside a function"
        for name, edges in graph(root).items()
        for e in edges
        if e.in_function and (name, e.target) not in FUNCTION_IMPORTS_ALLOWED
    ]


# Where a module may be imported by name (importlib, __import__) rather than by
# an import statement or a lazy_module() declaration, which the rules above read:
DYNAMIC_IMPORTS_ALLOWED = {
    "_core.lazy",  # lazy_module()'s stand-ins, each declared where the rules see it
    "",  # the package's __getattr__: its public names at first use; the top layer, so
         # nothing it imports can be above it or close a cycle (see cycles())
    "worker.cli",  # the user's handler module, named on the command line
}


def lazy_imports(root: Path) -> List[str]:
    """``lazy_module()`` only as the ``else`` of a module-level ``if TYPE_CHECKING:``
    that imports the same module under the same name (what type checkers see is
    what runs); importlib and ``__import__`` only in DYNAMIC_IMPORTS_ALLOWED."""
    mods = modules(root)
    known = set(mods) | {dotted(root, p) for p in root.rglob("*.pyi")}
    found = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        base = package_of(name, path)
        declared = set()
        for node in tree.body:
            if not (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
                continue
            typed = dict(b for stmt in node.body for b in bindings(root, base, stmt, known))
            for stmt in node.orelse:
                lazy = lazy_target(root, stmt.value) if isinstance(stmt, ast.Assign) else None
                if lazy is not None and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    declared.add(id(stmt.value))
                    bound = stmt.targets[0].id
                    if typed.get(bound) != lazy:
                        found.append(f"{name}:{stmt.lineno} {bound} is lazy_module({lazy!r}) but {typed.get(bound)!r} for type checkers")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and lazy_target(root, node) is not None and id(node) not in declared:
                found.append(f"{name}:{node.lineno} lazy_module() outside the else of a module-level `if TYPE_CHECKING:`")
            callee = ast.unparse(node.func).split(".")[-1] if isinstance(node, ast.Call) else ""
            if callee in ("import_module", "__import__", "LazyLoader") and name not in DYNAMIC_IMPORTS_ALLOWED:
                found.append(f"{name}:{node.lineno} imports a module by name ({callee})")
    return found


def private_reads(root: Path) -> List[str]:
    """``x._name`` where this module defines no ``_name`` of its own."""
    found = []
    for name, path in modules(root).items():
        if name in INTERNALS_ALLOWED:
            continue
        tree = ast.parse(path.read_text())
        defined = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and ast.unparse(n.value) in ("self", "cls")}
        defined |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = ast.unparse(node.value)
                foreign = node.attr in FOREIGN_PRIVATE_ALLOWED and FOREIGN_PRIVATE_ALLOWED[node.attr] in (None, name)
                if node.attr not in defined and not foreign and not base.startswith("_futures_base"):
                    found.append(f"{name}:{node.lineno} reads {base}.{node.attr}")
    return found


def mixins(root: Path) -> List[str]:
    """Classes assembled from several of the package's own classes, and
    ``cast(..., self)`` (how a mixin pretends to be its host). Extending a
    foreign class beside one of ours (nats-py's models, pyspark's interfaces)
    is not a mixin."""
    ours = {n.name for p in modules(root).values() for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.ClassDef)}
    found = []
    for name, path in modules(root).items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                own = [b for b in bases if b in ours]
                if len(own) > 1 and not _exception_class(own):
                    found.append(f"{name}:{node.lineno} class {node.name}({', '.join(bases)})")
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("cast") and len(node.args) == 2:
                if ast.unparse(node.args[1]) == "self":
                    found.append(f"{name}:{node.lineno} casts self")
    return found


def _exception_class(bases: List[str]) -> bool:
    """The exception tree joins its branches on purpose (NotFoundError and APIError)."""
    return all(b.endswith(("Error", "Exception")) for b in bases)


def long_modules(root: Path) -> List[str]:
    """Modules over MAX_LINES without a ``Long:`` reason in their first 30 lines."""
    found = []
    for name, path in modules(root).items():
        lines = path.read_text().splitlines()
        if len(lines) > MAX_LINES and not any("Long:" in line for line in lines[:30]):
            found.append(f"{name}: {len(lines)} lines and no 'Long:' reason at its top")
    return found


def long_functions(root: Path) -> List[str]:
    """Functions over MAX_FUNCTION_LINES in _core/ and _engines/ without a ``# Long:`` comment."""
    found = []
    for name, path in modules(root).items():
        if not name.startswith(LONG_FUNCTIONS_CHECKED_IN):
            continue
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                head = lines[node.lineno - 1 : node.lineno + 8]
                if size > MAX_FUNCTION_LINES and not any("# Long:" in line for line in head):
                    found.append(f"{name}:{node.lineno} {node.name} is {size} lines")
    return found


def one_meaning_per_name(root: Path) -> List[str]:
    """A public top-level function name is defined once in the library layers
    (entry points such as ``main`` in layer 7 may repeat)."""
    seen: Dict[str, str] = {}
    found = []
    for name, path in modules(root).items():
        if layer(name) >= len(LAYERS) - 1:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                if node.name in seen:
                    found.append(f"{node.name} is defined in {seen[node.name]} and in {name}")
                seen.setdefault(node.name, name)
    return found


# Outside _core, only models reaches nats-py (its API dataclasses, extended);
# what the handles hand out of it (CoreClient.async_client) they take from _core.
NATS_PY_ALLOWED = {"models"}


def nats_py_outside_the_core(root: Path) -> List[str]:
    """nats-py is reached through _core only."""
    found = []
    for name, path in modules(root).items():
        if name.startswith("_core") or name in NATS_PY_ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            mods = [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for mod in mods:
                if mod.split(".")[0] == "nats":
                    found.append(f"{name}:{node.lineno} imports {mod}")
    return found


def fork_hooks(root: Path) -> List[str]:
    """``os.register_at_fork`` is called in one module only, _core/fork.py."""
    where = [name for name, path in modules(root).items() if "register_at_fork(" in path.read_text()]
    return [f"os.register_at_fork in {name}, not in _core.fork" for name in where if name != "_core.fork"]


# Where nats-py's exceptions may be named: the one module that maps them, and
# the wire parser, which raises nats-py's own ProtocolError inside nats-py's reader.
NATS_ERRORS_ALLOWED = {"_core.nats_errors", "_core.wire"}


def nats_errors_outside_their_map(root: Path) -> List[str]:
    """nats-py's exceptions are mapped to ours in one module (raise ... from exc)."""
    return [
        f"{name} uses nats.errors"
        for name, path in modules(root).items()
        if "nats.errors" in path.read_text() and name not in NATS_ERRORS_ALLOWED
    ]


# Raises of InvalidOptionError outside options/ that are no check of a
# malformed argument but a refusal decided at run time, by state or by what
# the server or the data turned out to be (module:function, nested names dotted):
INVALID_OPTION_ALLOWED = {
    "jetstream:JetStream.client",  # a context made without a Client has none to hand out
    "contexts:FetchResult.__iter__",  # a fetch result iterated a second time
    "core:Subscription.next_msg",  # next_msg() on a subscription whose messages go to its callback
    "core:CoreClient.run_async.call",  # what fn(client) returned, seen on the loop thread when it is called
    "worker.runner:Worker.run",  # a Worker run a second time
    "kv.bucket:KeyValue._check_size",  # a value over the bucket's max_value_size, read from the server
    "kv.bucket:KeyValue._ttl_header",  # a per-key TTL on a bucket whose server config has them off
    "kv.manage:_require_api_level",  # a feature the server's JetStream API level lacks
    # The Spark sink's checks of a DataFrame's columns and rows and of the save
    # mode, made when it is written (the source's option strings are options.spark's).
    "spark._write:row_fields",
    "spark._write:message_headers",  # a row without data
    "spark._write:_columns",
    "spark.datasource:_append_only",
    # The exactly-once sink's checks of its target stream, read from the server
    # (a stream that stores the progress subject and allows atomic batches, a
    # marker nothing else wrote).
    "spark._write:Progress.read",
    "spark._write:progress_stream",
}


def invalid_option_raises(root: Path) -> List[Tuple[str, int]]:
    """(module:function, line) of each ``raise ...InvalidOptionError(...)`` outside options/."""
    found: List[Tuple[str, int]] = []
    for name, path in modules(root).items():
        if name.split(".")[0] == "options":
            continue

        def visit(node: ast.AST, where: List[str]) -> None:
            for child in ast.iter_child_nodes(node):
                inner = where + [child.name] if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else where
                if (isinstance(child, ast.Raise) and isinstance(child.exc, ast.Call)
                        and ast.unparse(child.exc.func).split(".")[-1].endswith("InvalidOptionError")):  # fmt: skip
                    found.append((f"{name or '__init__'}:{'.'.join(where)}", child.lineno))
                visit(child, inner)

        visit(ast.parse(path.read_text()), [])
    return found


def invalid_option_outside_options(root: Path) -> List[str]:
    """``raise ...InvalidOptionError(...)`` in options/ only (DESIGN.md section 3:
    every option's validation is there), but for INVALID_OPTION_ALLOWED."""
    return [
        f"{site}:{line} raises InvalidOptionError (its check belongs in options/)"
        for site, line in invalid_option_raises(root)
        if site not in INVALID_OPTION_ALLOWED
    ]


RULES = [upward_imports, cycles, function_imports, lazy_imports, private_reads, mixins, long_modules, long_functions,
         one_meaning_per_name, nats_py_outside_the_core, fork_hooks, nats_errors_outside_their_map,
         invalid_option_outside_options]  # fmt: skip


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_the_package_keeps_the_rule(rule):
    found = rule(PKG)
    assert not found, "\n".join(found)


def test_every_allowed_invalid_option_raise_is_there():
    """An allow-list entry whose raise moved or went is dropped, not kept to excuse a new one."""
    assert INVALID_OPTION_ALLOWED - {site for site, _ in invalid_option_raises(PKG)} == set()


def test_every_module_sits_in_a_layer():
    for name in modules(PKG):
        layer(name)


# -- each rule catches its fault --------------------------------------------------------

BAD = {
    "upward_imports": {"errors.py": "from .client import x\n", "client.py": "x = 1\n"},
    "cycles": {"stream.py": "from . import consumer\n", "consumer.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import stream\n"},
    "function_imports": {"client.py": "def f():\n    from . import errors\n", "errors.py": ""},
    "lazy_imports": {"client.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import errors\n"
                                  "else:\n    errors = lazy_module('jetstream_sync.models')\n",
                     "errors.py": "", "models.py": ""},
    "private_reads": {"client.py": "def f(conn):\n    return conn._sock\n"},
    "mixins": {"jetstream.py": "class Publishing:\n    pass\nclass Buckets:\n    pass\nclass JetStream(Publishing, Buckets):\n    pass\n"},
    "long_modules": {"client.py": "x = 1\n" * (MAX_LINES + 1)},
    "long_functions": {"_core/__init__.py": "", "_core/wire.py": "def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES},
    "one_meaning_per_name": {"options/__init__.py": "def subject_covers(a, b):\n    pass\n",
                             "_core/__init__.py": "", "_core/wire.py": "def subject_covers(a, b):\n    pass\n"},
    "nats_py_outside_the_core": {"consumer.py": "import nats.errors\n"},
    "nats_errors_outside_their_map": {"jetstream.py": "import nats.errors as _nerr\n"},
    "invalid_option_outside_options": {
        "options/__init__.py": "from .. import errors\ndef flag(name, value):\n    raise errors.InvalidOptionError(name)\n",
        "consumer.py": "from . import errors\nclass Consumer:\n    def fetch(self, batch):\n"
                       "        if batch < 1:\n            raise errors.InvalidOptionError(f'batch {batch}') from None\n",
    },
    "fork_hooks": {"_core/__init__.py": "", "_core/loop.py": "import os\nos.register_at_fork(after_in_child=print)\n",
                   "worker/__init__.py": "", "worker/shared.py": "import os\nos.register_at_fork(after_in_child=print)\n"},
}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_the_rule_catches_its_fault(tmp_path, rule):
    root = tmp_path / "jetstream_sync"
    root.mkdir()
    (root / "__init__.py").write_text("")
    for rel, text in BAD[rule.__name__].items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    assert rule(root), f"{rule.__name__} found nothing in a package made to break it"


def test_a_lazy_import_is_read_as_the_import_it_is(tmp_path):
    """A lazy_module() declaration counts as an import in the layer and function
    rules, and importlib is no way around them."""
    root = tmp_path / "jetstream_sync"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "client.py").write_text("")
    (root / "errors.py").write_text("client = lazy_module('jetstream_sync.client')\n")
    assert upward_imports(root) and lazy_imports(root)
    (root / "errors.py").write_text("def f():\n    return lazy_module('jetstream_sync.models')\n")
    (root / "models.py").write_text("")
    assert function_imports(root) and lazy_imports(root)
    (root / "errors.py").write_text("import importlib\nmodels = importlib.import_module('jetstream_sync.models')\n")
    assert lazy_imports(root)
