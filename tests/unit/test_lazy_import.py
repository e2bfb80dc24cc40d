"""Importing the package, or the Spark data source every executor imports,
imports no feature module a reader never uses; their public names load at
first use and are what they were (``jetstream_sync.KeyValue``, pickles, hints).

Each check runs in a fresh interpreter: this one has imported everything.
"""

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import jetstream_sync

CHECKOUT = Path(jetstream_sync.__file__).resolve().parents[1]

# What a process that only reads streams never needs (each was imported with the package before).
FEATURES = [
    "jetstream_sync.kv",
    "jetstream_sync.object_store",
    "jetstream_sync.pcgroups",
    "jetstream_sync.services",
    "jetstream_sync.system",
    "jetstream_sync.worker.runner",
    "jetstream_sync.options.natscontext",
]


def fresh(code: str) -> dict:
    """Run ``code`` in a new interpreter on the package this process imported
    (a checkout, or an installed copy when the tests run from an unpacked
    sdist: started there, ``-c`` would put the sdist's own sources first);
    the JSON it printed last."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CHECKOUT), os.environ.get("PYTHONPATH", "")])}
    script = "import json, sys\n" + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=CHECKOUT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


LOADED = """
features = {features!r}
def loaded():
    return sorted(m for m in sys.modules if any(m == f or m.startswith(f + ".") for f in features))
"""


def test_importing_the_package_imports_no_feature_module():
    out = fresh(LOADED.format(features=FEATURES) + """
import jetstream_sync
after_import = loaded()
key_value = jetstream_sync.KeyValue
print(json.dumps({"file": jetstream_sync.__file__, "after_import": after_import, "after_use": loaded(),
                  "module": key_value.__module__, "dir": sorted(dir(jetstream_sync)),
                  "all": jetstream_sync.__all__}))
""")
    assert Path(out["file"]).resolve().parents[1] == CHECKOUT
    assert out["after_import"] == []
    assert {"jetstream_sync.kv", "jetstream_sync.kv.bucket"} <= set(out["after_use"])
    assert out["module"] == "jetstream_sync"
    assert set(out["all"]) <= set(out["dir"])


def test_importing_the_spark_data_source_imports_no_feature_module():
    pytest.importorskip("pyspark.sql.datasource", reason="pyspark is not installed (the spark extra)")
    out = fresh(LOADED.format(features=FEATURES) + """
import jetstream_sync.spark.datasource
print(json.dumps({"loaded": loaded()}))
""")
    assert out["loaded"] == []


def test_a_feature_loaded_by_the_package_itself_reports_its_public_home():
    """js.key_value() imports kv/ at its first call: its classes report
    jetstream_sync.KeyValue at once, as when the package imported them."""
    out = fresh("""
import jetstream_sync.jetstream as js_module
js_module.kv.open_bucket  # what js.key_value() reaches first
import jetstream_sync.kv.bucket as bucket
print(json.dumps({"module": bucket.KeyValue.__module__, "config": bucket.KeyValueConfig.__module__,
                  "cached": "KeyValue" in vars(sys.modules["jetstream_sync"])}))
""")
    assert out == {"module": "jetstream_sync", "config": "jetstream_sync", "cached": True}


def test_lazy_names_pickle_and_their_subpackages_are_still_attributes():
    """A pickle names jetstream_sync.KeyValueConfig; a process that never used
    it loads it from there. jetstream_sync.kv and friends are still attributes."""
    pickled = fresh("""
import pickle, jetstream_sync as jss
print(json.dumps({"config": pickle.dumps(jss.KeyValueConfig(bucket="b", history=3), 0).decode("latin-1"),
                  "worker": pickle.dumps(jss.run_worker, 0).decode("latin-1")}))
""")
    assert "jetstream_sync\nKeyValueConfig" in pickled["config"]
    out = fresh(f"""
import pickle, typing, jetstream_sync as jss
config = pickle.loads({pickled["config"]!r}.encode("latin-1"))
worker = pickle.loads({pickled["worker"]!r}.encode("latin-1"))
modules = [jss.kv.codecs.__name__, jss.object_store.__name__, jss.pcgroups.__name__, jss.services.__name__,
           jss.system.Varz.__module__, jss.worker.Worker.__name__]
import jetstream_sync.kv as kv_package
print(json.dumps({{"history": config.history, "same": type(config) is jss.KeyValueConfig,
                  "worker": worker is jss.run_worker, "modules": modules, "kv": kv_package.KeyValue is jss.KeyValue,
                  "hints": sorted(typing.get_type_hints(jss.KeyValueConfig))[:2]}}))
""")
    assert out["history"] == 3 and out["same"] and out["worker"] and out["kv"]
    assert out["modules"][:4] == ["jetstream_sync.kv.codecs", "jetstream_sync.object_store", "jetstream_sync.pcgroups",
                                  "jetstream_sync.services"]
    assert out["modules"][5] == "Worker" and out["hints"]


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'KeyValu'"):
        jetstream_sync.KeyValu  # noqa: B018
    assert not hasattr(jetstream_sync, "spark_and_more")


def test_the_lazy_table_is_what_type_checkers_see():
    """_LAZY holds the names the package imports under TYPE_CHECKING, from the same modules."""
    tree = ast.parse(Path(jetstream_sync.__file__).read_text())
    typed = {}
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in ast.walk(node):
                if isinstance(stmt, ast.ImportFrom):
                    typed.update({a.asname or a.name: f"jetstream_sync.{stmt.module}" for a in stmt.names})
    assert typed == jetstream_sync._LAZY
    assert set(typed) <= set(jetstream_sync.__all__)
