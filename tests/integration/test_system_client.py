"""The system client: the servers' monitoring endpoints over the system
account, gathered from every server of a cluster (or asked of one), and a
clear error for a user without system-account rights."""

from __future__ import annotations

import time

import pytest

import jetstream_sync as jss
from jetstream_sync.system import Healthz, Jsz, Varz
from jetstream_sync.testing import NatsServer

from ..helpers import wait_until

ACCOUNTS = """
accounts {
  SYS: { users: [{user: sys, password: sys-secret}] }
  APP: { jetstream: enabled, users: [{user: app, password: app-secret}] }
}
system_account: SYS
"""


@pytest.fixture
def accounts_conf(tmp_path):
    path = tmp_path / "accounts.conf"
    path.write_text(ACCOUNTS)
    return str(path)


@pytest.fixture
def sys_cluster(nats_cluster, accounts_conf):
    cluster = nats_cluster(3, config=accounts_conf)
    # PING reaches the servers routed to the one we are connected to.
    for s in cluster.servers:
        wait_until(lambda s=s: s.varz().get("routes", 0) >= 2, timeout=30)
    return cluster


@pytest.fixture
def sysnc(sys_cluster):
    nc = jss.connect(sys_cluster.urls[0], user="sys", password="sys-secret")
    yield nc
    nc.close()


def test_varz_and_jsz_answer_once_per_server_of_the_cluster(sysnc, sys_cluster):
    system = sysnc.system(timeout=5.0)
    varz = system.varz()
    assert [v.server.name for v in varz] == ["n0", "n1", "n2"]
    assert all(isinstance(v, Varz) and v.version and v.connections >= 0 and v.raw["server_id"] == v.server.id for v in varz)
    jsz = system.jsz(expected=3)
    assert [j.server.name for j in jsz] == ["n0", "n1", "n2"]
    assert all(isinstance(j, Jsz) and j.server.jetstream for j in jsz)


def test_every_endpoint_answers_from_every_server(sysnc):
    system = sysnc.system(timeout=5.0, expected=3)
    for call in (system.connz, system.healthz, system.accountz, system.statsz, system.subsz, system.routez,
                 system.leafz, system.gatewayz):  # fmt: skip
        answers = call()
        assert len({a.server.id for a in answers}) == 3, call.__name__
    assert all(h.ok and isinstance(h, Healthz) for h in system.healthz())
    assert all(a.system_account == "SYS" and "APP" in a.accounts for a in system.accountz())
    assert all(r.num_routes >= 2 for r in system.routez())
    # active_servers counts the servers whose stats reached this one: right after
    # the cluster formed some may not have yet (they send them periodically)
    wait_until(lambda: all(s.mem > 0 and s.active_servers == 3 for s in system.statsz()), timeout=30)
    assert sum(c.num_connections for c in system.connz()) >= 1  # this client, on n0


def test_one_server_is_asked_by_its_id(sysnc):
    system = sysnc.system(timeout=5.0)
    target = system.varz(expected=3)[1].server
    (only,) = system.varz(server_id=target.id)
    assert only.server.id == target.id and only.server.name == target.name
    assert system.request("JSZ", target.id)[0]["server"]["id"] == target.id


def test_options_are_the_endpoints_request_json(sysnc):
    system = sysnc.system(timeout=5.0, expected=3)
    jsz = system.jsz(options={"accounts": True})
    assert all(any(a["name"] == "APP" for a in j.raw.get("account_details", [])) for j in jsz)
    with pytest.raises(jss.APIError, match="refused CONNZ"):
        system.connz(options={"sort": "no-such-order"})


def test_a_user_without_system_rights_gets_a_clear_error_within_the_timeout(sys_cluster):
    with jss.connect(sys_cluster.urls[0], user="app", password="app-secret") as nc:
        started = time.monotonic()
        with pytest.raises(jss.PermissionDeniedError, match="system-account rights"):
            nc.system(timeout=1.0).varz()
        assert time.monotonic() - started < 3.0


def test_a_system_user_denied_the_request_subjects_gets_the_same_error_at_once(tmp_path):
    conf = tmp_path / "denied.conf"
    conf.write_text(
        'accounts { SYS: { users: [{user: limited, password: pw, permissions: {publish: {deny: ["$SYS.REQ.>"]}}}] } }\n'
        "system_account: SYS\n"
    )
    with NatsServer(config=str(conf)) as server, jss.connect(server.url, user="limited", password="pw") as nc:
        started = time.monotonic()
        with pytest.raises(jss.PermissionDeniedError, match=r"allowed to publish to \$SYS.REQ.SERVER") as info:
            nc.system(timeout=20.0).healthz()  # the server's -ERR ends it, not the timeout
        assert time.monotonic() - started < 10.0
        assert "refused the request to $SYS.REQ.SERVER.PING.HEALTHZ" in str(info.value)
        assert "permission denied: publish to" in str(info.value.__cause__)  # the server's -ERR, as nats-py reports it


def test_a_server_without_a_system_user_refuses_at_once(server):
    with jss.connect(server.url) as nc:
        started = time.monotonic()
        with pytest.raises(jss.PermissionDeniedError, match="needs system-account rights"):
            nc.system(timeout=5.0).jsz()
        assert time.monotonic() - started < 2.5  # "no responders" ends it, not the 5 s timeout


def test_bad_arguments_are_refused_before_anything_is_sent(server):
    with jss.connect(server.url) as nc:
        for bad in (lambda: nc.system(timeout=0), lambda: nc.system(expected=0), lambda: nc.system(timeout=float("inf"))):
            with pytest.raises(jss.InvalidOptionError):
                bad()
        system = nc.system()
        with pytest.raises(jss.InvalidOptionError, match="server_id"):
            system.varz(server_id="a.b")
        with pytest.raises(jss.InvalidOptionError, match="JSON"):
            system.varz(options={"x": object()})
        with pytest.raises(jss.InvalidOptionError, match="unknown keyword"):
            system.varz(timout=1.0)  # type: ignore[call-arg]
        with pytest.raises(jss.InvalidOptionError, match="unknown system endpoint"):
            system.request("NOPEZ")
