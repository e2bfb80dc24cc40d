"""The data source from a Spark Connect client (Spark 4's client/server mode):
a Connect server started from the pip install on loopback, the client in a
process of its own (one process cannot hold a classic and a Connect session
reliably), reading, writing and refusing a misspelled option."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

from jetstream_sync.testing import free_port

pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect] (grpcio)")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory) -> Iterator[str]:
    import pyspark

    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("spark-connect")
    port = free_port()
    env = dict(
        os.environ,
        SPARK_HOME=str(home),
        SPARK_LOG_DIR=str(work / "logs"),
        SPARK_PID_DIR=str(work / "pids"),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,  # its Python workers import this checkout
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    conf = ["--master", "local[2]", "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.driver.host=127.0.0.1",
            "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.ui.enabled=false"]
    subprocess.run(["bash", str(home / "sbin" / "start-connect-server.sh"), *conf], env=env, check=True,
                   capture_output=True, timeout=60)
    try:
        deadline = time.monotonic() + 180  # a JVM on a loaded 2-core machine
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    logs = "".join(p.read_text()[-2000:] for p in (work / "logs").glob("*.out"))
                    raise AssertionError(f"the Connect server did not listen within 180 s:\n{logs}") from None
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        subprocess.run(["bash", str(home / "sbin" / "stop-connect-server.sh")], env=env, capture_output=True, timeout=60)


CLIENT = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession
    from jetstream_sync import spark as jspark
    remote, nats = sys.argv[1], sys.argv[2]
    spark = SparkSession.builder.remote(remote).getOrCreate()
    jspark.register(spark)
    jspark.register(spark)  # a second call is harmless here too
    out = {}
    df = spark.read.format("jetstream").option("servers", nats).option("stream", "CON").load()
    out["count"] = df.count()
    out["first"] = [r.data.decode() for r in df.orderBy("seq").limit(3).collect()]
    (df.selectExpr("concat('conout.', subject) as subject", "data")
       .write.format("jetstream").option("servers", nats).mode("append").save())
    try:
        spark.read.format("jetstream").option("servers", nats).option("subject", "con.x").load().count()
        out["misspelled"] = "accepted"
    except Exception as exc:
        out["misspelled"] = str(exc)
    spark.stop()
    print(json.dumps(out))
    """
)


@pytest.mark.timeout(420)
def test_read_write_and_option_errors_from_a_connect_client(connect_url, js):
    js.create_stream(name="CON", subjects=["con.>"])
    js.create_stream(name="CONOUT", subjects=["conout.>"])
    for i in range(500):
        js.publish_async(f"con.{i % 5}", str(i).encode())
    assert js.publish_async_complete(timeout=30)
    nats_url = js.client.connected_url
    proc = subprocess.run([sys.executable, "-c", CLIENT, connect_url, nats_url], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["count"] == 500
    assert out["first"] == ["0", "1", "2"]
    assert js.stream_info("CONOUT").state.messages == 500
    assert "did you mean 'subjects'" in out["misspelled"]
