"""The worker's command-line pieces that need no server."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jetstream_sync.worker.cli import UsageError, load_handler, resolve_servers


def test_importing_the_package_imports_no_framework():
    code = "import jetstream_sync, sys; print(sorted(m for m in ('django', 'flask') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_servers_come_from_the_option_then_the_setting_then_nats_url(monkeypatch):
    monkeypatch.setenv("NATS_URL", "nats://env:4222")
    assert resolve_servers(["nats://a:1,nats://b:2", "nats://c:3"], ["nats://conf:1"]) == [
        "nats://a:1", "nats://b:2", "nats://c:3",
    ]  # fmt: skip
    assert resolve_servers(None, "nats://conf:1") == ["nats://conf:1"]
    assert resolve_servers((), None) == ["nats://env:4222"]
    monkeypatch.delenv("NATS_URL")
    with pytest.raises(UsageError, match="NATS_URL"):
        resolve_servers(None, [])


def test_a_handler_is_found_by_module_and_dotted_attribute():
    import os.path

    assert load_handler("os.path:join") is os.path.join
    assert load_handler("collections:OrderedDict.fromkeys") == __import__("collections").OrderedDict.fromkeys
    for spec, match in [("os.path", "module:function"), (":join", "module:function"), ("os:", "module:function")]:
        with pytest.raises(UsageError, match=match):
            load_handler(spec)


def test_help_says_how_the_worker_stops_and_its_exit_statuses(capsys):
    from jetstream_sync.worker.cli import main

    assert main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "SIGTERM or SIGINT stops gracefully within --shutdown-timeout" in out
    assert "Exit status: 0 after a stop, 1 when consuming could not start" in out and "2 for a bad command line" in out
    assert "above 1 the handler must be thread-safe" in out
