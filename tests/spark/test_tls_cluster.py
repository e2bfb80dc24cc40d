"""Mutual TLS and a password, given as option strings, on a 3-node cluster:
publish_partition, the writer and the reader share one parser of them, and
nothing but strings travels to the executors."""

from __future__ import annotations

from typing import Dict, Iterator, List

import pytest

import jetstream_sync as jss
from jetstream_sync.testing import NatsServer, free_port

from ..helpers import make_tls_files, wait_until

pytestmark = pytest.mark.spark

USER, PASSWORD, KEY_PASSWORD = "spark", "pw-SECRET-of-the-user", "kp-SECRET-of-the-key"

_NODE_CONF = """
server_name: n{i}
jetstream {{ store_dir: "{store}" }}
tls {{ cert_file: "{server}", key_file: "{server_key}", ca_file: "{ca}", verify: true }}
authorization {{ user: {user}, password: "{password}" }}
cluster {{ name: tls-cluster, listen: "127.0.0.1:{route}", routes: [{routes}] }}
"""


@pytest.fixture
def tls_cluster(tmp_path) -> Iterator[Dict[str, object]]:
    """Three routed JetStream servers that require a client certificate signed
    by the test CA and user/password; routes stay plain (loopback)."""
    pytest.importorskip("cryptography")
    files = make_tls_files(tmp_path, key_password=KEY_PASSWORD.encode())
    routes = [free_port() for _ in range(3)]
    nodes: List[NatsServer] = []
    for i, route in enumerate(routes):
        store = tmp_path / f"n{i}"
        store.mkdir()
        conf = tmp_path / f"n{i}.conf"
        conf.write_text(_NODE_CONF.format(
            i=i, store=store, user=USER, password=PASSWORD, route=route,
            routes=", ".join(f'"nats-route://127.0.0.1:{p}"' for p in routes if p != route), **files,
        ))  # fmt: skip
        nodes.append(NatsServer(store_dir=str(store), jetstream=False, config=str(conf)))
    try:
        for node in nodes:
            node.launch()
        for node in nodes:
            node.wait_ready(timeout=30)
        yield {"nodes": nodes, "files": files}
    finally:
        for node in nodes:
            node.cleanup()


def _placed(js) -> bool:
    try:
        js.create_stream(name="TLSOUT", subjects=["tlsout.>"], num_replicas=3)
    except (jss.TimeoutError, jss.NoRespondersError):
        return False
    except jss.APIError as exc:
        if exc.err_code in (10005, 10008):  # peers not all known yet; no JetStream cluster yet
            return False
        raise
    return True


def _options(cluster: Dict[str, object], password: str = PASSWORD) -> Dict[str, str]:
    """The CA and client certificate as PEM texts, the encrypted key as a file."""
    files = cluster["files"]
    assert isinstance(files, dict)
    with open(files["ca"]) as ca, open(files["client"]) as cert:
        ca_pem, cert_pem = ca.read(), cert.read()
    servers = ",".join(f"nats://127.0.0.1:{node.port}" for node in cluster["nodes"])  # type: ignore[attr-defined]
    return {"servers": servers, "user": USER, "password": password, "tls.ca": ca_pem, "tls.cert": cert_pem,
            "tls.key": files["client_key"], "tls.keyPassword": KEY_PASSWORD}  # fmt: skip


@pytest.mark.timeout(300)
def test_publish_partition_write_and_read_over_mutual_tls_with_a_password_on_a_cluster(spark, tls_cluster):
    from jetstream_sync.spark import close_all, connect_options, publish_partition

    options = _options(tls_cluster)
    with jss.connect(**connect_options(options)) as nc:  # the same parser, in the test process
        js = nc.jetstream()
        # A fresh cluster answers before its meta group knows every peer
        # ("no suitable peers for placement", 10005): creating the same stream
        # again is idempotent, so retry until it is placed.
        wait_until(lambda: _placed(js), timeout=60, interval=0.2)
        wait_until(lambda: js.stream_info("TLSOUT").cluster.leader, timeout=30)
        try:
            df = spark.range(10_000).repartition(4).selectExpr("CAST(id AS STRING) AS data", "concat('id-', id) AS msg_id")
            df.foreachPartition(publish_partition(options, subject="tlsout.fp"))
            assert js.stream_info("TLSOUT").state.messages == 10_000

            writer = df.limit(100).selectExpr("data", "concat('w-', msg_id) AS msg_id").write.format("jetstream")
            writer.options(**options).option("subject", "tlsout.w").mode("append").save()
            assert js.stream_info("TLSOUT").state.messages == 10_100

            read = spark.read.format("jetstream").options(**options).option("stream", "TLSOUT").option("minPartitions", "3").load()
            assert read.count() == 10_100

            # A wrong password fails the job; the message never shows a secret.
            with pytest.raises(Exception) as refused:
                df.limit(10).foreachPartition(publish_partition(_options(tls_cluster, "pw-WRONG-secret"), subject="tlsout.x"))
            text = str(refused.value)
            assert "authorization" in text.lower(), text[-2000:]
            for secret in ("pw-WRONG-secret", PASSWORD, KEY_PASSWORD, "PRIVATE KEY"):
                assert secret not in text
        finally:
            # The workers' clients of this cluster would otherwise retry it after it is gone.
            spark.sparkContext.parallelize(range(4), 4).foreachPartition(lambda _: close_all())
