"""The API reference page covers every public name (the mkdocs build checks the rest)."""

import re
from pathlib import Path

import jetstream_sync as jss
from jetstream_sync import errors

ROOT = Path(__file__).resolve().parents[2]


def test_reference_lists_every_public_name():
    page = (ROOT / "docs" / "reference.md").read_text()
    documented = set(re.findall(r"^::: jetstream_sync\.(\w+)$", page, re.M))
    if "errors" in documented:  # the errors module is rendered whole
        documented |= set(errors.__all__)
    assert set(jss.__all__) - documented == set()
    assert documented - {"errors"} <= set(jss.__all__) | set(errors.__all__)


def test_pages_include_only_existing_examples():
    included = {
        m for page in (ROOT / "docs").rglob("*.md") for m in re.findall(r'--8<-- "([^"]+)"', page.read_text())
    }
    assert included, "no page includes an example"
    assert {p for p in included if not (ROOT / p).is_file()} == set()
