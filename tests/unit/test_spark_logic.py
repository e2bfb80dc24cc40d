"""Spark-side pure logic: options, offsets, partitioning, rows to publish."""

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed")

import jetstream_sync as jss  # noqa: E402
from jetstream_sync.spark._clients import connect_options  # noqa: E402
from jetstream_sync.spark._read import ReadOptions, ack_numbers, parse_offset, split  # noqa: E402
from jetstream_sync.spark._write import WriteOptions, publish_partition, row_fields  # noqa: E402


def test_read_options_defaults_and_case():
    o = ReadOptions.parse({"Stream": "S", "Subjects": "a.>, b", "SERVERS": "nats://h:1", "minPartitions": "3"}, False)
    assert (o.stream, o.subjects, o.starting, o.ending, o.min_partitions) == ("S", ("a.>", "b"), "earliest", "latest", 3)
    assert o.connection == {"servers": "nats://h:1"}
    assert ReadOptions.parse({"stream": "S"}, True).starting == "latest"


@pytest.mark.parametrize(
    "options",
    [{}, {"stream": "S", "minPartitions": "0"}, {"stream": "S", "failOnDataLoss": "maybe"},
     {"stream": "S", "startingOffsets": "soon"}, {"stream": "S", "endingOffsets": '{"seq": 0}'},
     {"stream": "S", "startingOffsets": '{"stream": "OTHER", "seq": 3}'}, {"stream": "S", "fetchTimeout": "x"}],
)
def test_bad_read_options(options):
    with pytest.raises(jss.InvalidOptionError):
        ReadOptions.parse(options, False)


def test_offsets():
    assert parse_offset("earliest", "S") is None and parse_offset("LATEST", "S") is None
    assert parse_offset('{"stream": "S", "seq": 42}', "S") == 42
    assert parse_offset('{"seq": 7}', "S") == 7 and parse_offset("9", "S") == 9


def test_split_even_and_exact():
    o = ReadOptions.parse({"stream": "S", "minPartitions": "4"}, False)
    ranges = split(o, 1, 100_001)
    assert [(r.start, r.end) for r in ranges] == [(1, 25001), (25001, 50001), (50001, 75001), (75001, 100001)]
    assert [(r.start, r.end) for r in split(o, 5, 7)] == [(5, 6), (6, 7)]  # never more parts than sequences
    assert [(r.start, r.end) for r in split(o, 9, 9)] == [(9, 9)]
    default = ReadOptions.parse({"stream": "S"}, False)
    assert len(split(default, 1, 250_001)) == 3


def test_ack_numbers_v1_and_v2():
    assert ack_numbers("$JS.ACK.S.C.1.42.7.1700000000000000000.3") == (42, 3, 1700000000000000000)
    assert ack_numbers("$JS.ACK.hub.HASH.S.C.1.42.7.1700000000000000000.3.tok") == (42, 3, 1700000000000000000)


def test_connect_options():
    opts = connect_options({"servers": "nats://a:1, nats://b:2", "creds": "/x.creds", "tls.ca": "/ca.pem", "other": "1"})
    assert opts == {"servers": ["nats://a:1", "nats://b:2"], "user_credentials": "/x.creds", "tls": (("ca", "/ca.pem"),)}


def test_row_fields():
    f = row_fields(["data", "msg_id"], "s.x")
    assert f({"data": b"d", "msg_id": "1"}) == ("s.x", b"d", None, "1")
    g = row_fields(["subject", "data", "headers"], None)
    assert g({"subject": "a", "data": "x", "headers": {"K": "v"}}) == ("a", "x", {"K": "v"}, None)
    with pytest.raises(jss.InvalidOptionError):
        row_fields(["subject"], None)
    with pytest.raises(jss.InvalidOptionError):
        row_fields(["data"], None)
    assert WriteOptions.parse({"Subject": "s", "publishTimeout": "5"}).timeout == 5.0


def test_worker_python_check_names_the_fix(tmp_path):
    import sys

    from jetstream_sync.spark import worker_python_problem

    assert worker_python_problem(None) is None  # not a local master: nothing to check
    assert worker_python_problem(sys.executable) is None
    bare = tmp_path / "python3"
    bare.write_text("#!/bin/sh\nexit 1\n")  # an interpreter that cannot import the package
    bare.chmod(0o755)
    problem = worker_python_problem(str(bare))
    assert problem is not None and f"PYSPARK_PYTHON={sys.executable}" in problem and str(bare) in problem
    missing = worker_python_problem("no-such-python-here")
    assert missing is not None and "not on PATH" in missing


def test_worker_python_check_sees_through_a_venv_symlink():
    """A venv's python links to the base interpreter: equal real paths, but the
    base cannot import what only the venv has."""
    import os
    import subprocess
    import sys

    from jetstream_sync.spark import worker_python_problem

    base = os.path.realpath(sys.executable)
    if base == os.path.abspath(sys.executable):
        pytest.skip("not running in a venv")
    probe = subprocess.run([base, "-c", "import jetstream_sync, pyarrow"], capture_output=True, timeout=60)
    if probe.returncode == 0:
        pytest.skip("the base interpreter has the packages too")
    assert worker_python_problem(base) is not None


@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_spark_timeouts_must_be_finite_when_the_options_are_read(value):
    with pytest.raises(jss.InvalidOptionError, match="fetchTimeout"):
        ReadOptions.parse({"stream": "S", "fetchTimeout": value}, False)
    with pytest.raises(jss.InvalidOptionError, match="publishTimeout"):
        WriteOptions.parse({"publishTimeout": value})
    with pytest.raises(jss.InvalidOptionError, match="timeout"):
        publish_partition(subject="s", timeout=float(value))  # on the driver, not in each task
