"""Spark-side pure logic: options, offsets, partitioning, rows to publish."""

import re

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed")

import jetstream_sync as jss  # noqa: E402
from jetstream_sync.options.connection import ConnectionSettings, connection_settings  # noqa: E402
from jetstream_sync.options.spark import ReadOptions, WriteOptions  # noqa: E402
from jetstream_sync.spark._clients import connect_options  # noqa: E402
from jetstream_sync.spark._read import ack_numbers, split  # noqa: E402
from jetstream_sync.spark._write import publish_partition, row_fields  # noqa: E402

NATS = {"servers": "nats://h:1"}


def test_read_options_defaults_and_case():
    o = ReadOptions.parse({"Stream": "S", "Subjects": "a.>, b", "SERVERS": "nats://h:1", "minPartitions": "3"}, False)
    assert (o.stream, o.subjects, o.starting, o.ending, o.min_partitions) == ("S", ("a.>", "b"), "earliest", "latest", 3)
    assert o.connection == ConnectionSettings(servers=("nats://h:1",))
    assert ReadOptions.parse({"stream": "S", **NATS}, True).starting == "latest"


def test_split_even_and_exact():
    o = ReadOptions.parse({"stream": "S", "minPartitions": "4", **NATS}, False)
    ranges = split(o, 1, 100_001)
    assert [(r.start, r.end) for r in ranges] == [(1, 25001), (25001, 50001), (50001, 75001), (75001, 100001)]
    assert [(r.start, r.end) for r in split(o, 5, 7)] == [(5, 6), (6, 7)]  # never more parts than sequences
    assert [(r.start, r.end) for r in split(o, 9, 9)] == [(9, 9)]
    default = ReadOptions.parse({"stream": "S", **NATS}, False)
    assert len(split(default, 1, 250_001)) == 3


def test_ack_numbers_v1_and_v2():
    assert ack_numbers("$JS.ACK.S.C.1.42.7.1700000000000000000.3") == (42, 3, 1700000000000000000)
    assert ack_numbers("$JS.ACK.hub.HASH.S.C.1.42.7.1700000000000000000.3.tok") == (42, 3, 1700000000000000000)


def test_connect_options():
    opts = connect_options({"servers": "nats://a:1, nats://b:2", "creds": "/x.creds", "Name": "n"})
    assert opts == {"servers": ["nats://a:1", "nats://b:2"], "user_credentials": "/x.creds", "name": "n",
                    "max_reconnect_attempts": 30, "reconnect_time_wait": 1}  # fmt: skip
    with pytest.raises(jss.InvalidOptionError, match="did you mean 'tls.ca'"):
        connect_options({"servers": "nats://a:1", "tls.cafile": "/ca.pem"})


def test_row_fields():
    f = row_fields(["data", "msg_id"], "s.x")
    assert f({"data": b"d", "msg_id": "1"}) == ("s.x", b"d", None, "1")
    g = row_fields(["subject", "data", "headers"], None)
    assert g({"subject": "a", "data": "x", "headers": {"K": "v"}}) == ("a", "x", {"K": "v"}, None)
    with pytest.raises(jss.InvalidOptionError):
        row_fields(["subject"], None)
    with pytest.raises(jss.InvalidOptionError):
        row_fields(["data"], None)
    assert WriteOptions.parse({"Subject": "s", "publishTimeout": "5", **NATS}, False).timeout == 5.0


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
        ReadOptions.parse({"stream": "S", "fetchTimeout": value, **NATS}, False)
    with pytest.raises(jss.InvalidOptionError, match="publishTimeout"):
        WriteOptions.parse({"publishTimeout": value, **NATS}, False)
    with pytest.raises(jss.InvalidOptionError, match="timeout"):
        publish_partition("nats://h:1", subject="s", timeout=float(value))  # on the driver, not in each task


def test_tls_context_from_files_and_from_pem_texts(tmp_path):
    pytest.importorskip("cryptography")
    import ssl

    from jetstream_sync.spark._clients import tls_context

    from ..helpers import make_tls_files

    files = make_tls_files(tmp_path, key_password=b"kp-SECRET")
    pem = {k: open(v).read() for k, v in files.items()}
    by_path = connect_options({"servers": "tls://127.0.0.1:1", "tls.ca": files["ca"], "tls.cert": files["client"],
                               "tls.key": files["client_key"], "tls.keyPassword": "kp-SECRET"})  # fmt: skip
    by_text = connect_options({"servers": "tls://127.0.0.1:1", "tls.ca": pem["ca"], "tls.cert": pem["client"],
                               "tls.key": pem["client_key"], "tls.keyPassword": "kp-SECRET"})  # fmt: skip
    for opts in (by_path, by_text):
        assert isinstance(opts["tls"], ssl.SSLContext) and opts["tls"].verify_mode == ssl.CERT_REQUIRED
        assert len(opts["tls"].get_ca_certs()) >= 1
    # The same settings give the same context (shared clients are keyed by it).
    assert connect_options({"servers": "tls://127.0.0.1:1", "tls.ca": pem["ca"]})["tls"] is connect_options(
        {"SERVERS": "tls://127.0.0.1:1", "TLS.CA": pem["ca"]})["tls"]  # fmt: skip
    assert not list(tmp_path.glob("jss-tls-*"))

    with pytest.raises(jss.InvalidOptionError, match="'tls.cert'/'tls.key'") as wrong:
        connect_options({"servers": "tls://h:1", "tls.cert": pem["client"], "tls.key": pem["client_key"], "tls.keyPassword": "nope"})
    with pytest.raises(jss.InvalidOptionError, match="'tls.ca'.*No such file") as missing:
        tls_context(connection_settings({"servers": "h:1", "tls.ca": str(tmp_path / "none.pem")}).tls)
    for e in (wrong, missing):
        assert "PRIVATE KEY" not in str(e.value) and "nope" not in str(e.value) and "kp-SECRET" not in str(e.value)


@pytest.mark.parametrize(
    "option, which, says",
    [
        ("creds", "missing", r"option 'creds': cannot read the credentials file {missing} \(No such file"),
        ("creds", "bad", r"option 'creds': the credentials file {bad} holds no user JWT"),
        ("nkey", "missing", r"option 'nkey': cannot read the nkey seed file {missing} \(No such file"),
        ("nkey", "dir", r"option 'nkey': cannot read the nkey seed file {dir} \(Is a directory\)"),
        ("tls.ca", "missing", r"option 'tls.ca': the CA certificates could not be loaded \(No such file or directory: {missing}\)"),
        ("tls.ca", "bad", r"option 'tls.ca': the CA certificates could not be loaded \(.*: {bad}\)"),
    ],
)  # fmt: skip
def test_a_credential_or_tls_file_that_cannot_be_used_fails_before_connecting(tmp_path, option, which, says):
    # The server's port is closed: a connect would fail with NoServersError instead.
    from jetstream_sync.spark._clients import shared_client
    from jetstream_sync.testing import free_port

    files = {"missing": tmp_path / "none" / "f", "bad": tmp_path / "bad.txt", "dir": tmp_path}
    files["bad"].write_text("garbage-SECRET\n")
    pattern = says.format(**{k: re.escape(str(v)) for k, v in files.items()})
    with pytest.raises(jss.InvalidOptionError, match=pattern) as info:
        shared_client({"servers": f"nats://127.0.0.1:{free_port()}", option: str(files[which])})
    assert "SECRET" not in str(info.value)
