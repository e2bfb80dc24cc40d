"""Structured logs: every log record of the package carries one vocabulary
of fields (``nats_server``, ``nats_subject``, ``nats_stream``,
``nats_consumer``, ``nats_seq``, ``nats_service``) for JSON log handlers, and
a server URL in it never shows its secret."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

from jetstream_sync._core.logfields import LOG_FIELDS, log_fields

PKG = Path(__file__).resolve().parents[2] / "jetstream_sync"
LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "log"}


def calls_without_fields(root: Path):
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in LEVELS
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in ("_log", "log", "logger")
                and not any(k.arg == "extra" for k in node.keywords)
            ):
                yield f"{path.relative_to(root)}:{node.lineno}"


def test_every_log_call_of_the_package_gives_the_fields():
    assert list(calls_without_fields(PKG)) == []


def test_the_check_finds_a_call_without_them(tmp_path):
    (tmp_path / "m.py").write_text("import logging\n_log = logging.getLogger(__name__)\n_log.info('x')\n")
    assert list(calls_without_fields(tmp_path)) == ["m.py:3"]


def test_every_field_is_always_there_and_the_server_has_no_secret():
    fields = log_fields(server="nats://alice:pw-secret@h:4222", stream="S", seq=7)
    assert tuple(fields) == LOG_FIELDS
    assert fields["nats_server"] == "nats://alice:***@h:4222"
    assert fields["nats_stream"] == "S" and fields["nats_seq"] == 7 and fields["nats_consumer"] is None


def test_the_fields_are_attributes_of_the_record(caplog):
    log = logging.getLogger("jetstream_sync.test")
    with caplog.at_level(logging.INFO, logger="jetstream_sync.test"):
        log.info("x", extra=log_fields(subject="a.b", consumer="C"))
    record = caplog.records[-1]
    assert (record.nats_subject, record.nats_consumer, record.nats_server) == ("a.b", "C", None)
