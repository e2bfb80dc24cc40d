"""The framework guides quote the example files verbatim: a block after
``<!-- file: examples/... -->`` must equal that file, so the guides cannot
drift from the code their tests run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUOTE = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```\n", re.S)


@pytest.mark.parametrize("guide", ["docs/guides/django.md", "docs/guides/flask.md"])
def test_guides_quote_the_example_files_as_they_are(guide):
    quotes = QUOTE.findall((ROOT / guide).read_text())
    assert quotes, f"{guide} quotes no example file"
    for path, text in quotes:
        assert (ROOT / path).read_text() == text, f"{guide}: the quote of {path} differs from the file"
