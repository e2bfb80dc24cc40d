"""The README's quick start and CI run the same commands."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    test_cmd, fallback = [line.strip() for line in ci.splitlines() if "pytest" in line and not line.startswith("#")]
    assert test_cmd in readme
    # The second pass runs the integration tier with the fast paths off.
    assert fallback.startswith("JETSTREAM_SYNC_FAST_PATHS=0 ") and "tests/integration" in fallback


def test_readme_quick_start_has_two_commands():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^    (\S.*)$", section, re.M)
    assert len(commands) == 2
    assert "demo" in commands[0] and "pytest" in commands[1]
