"""connect(context=...) against real servers: a context file in the ``nats``
CLI's format connects with mutual TLS, with a creds file, with a user JWT and
its nkey, with an nkey, user/password and a token; its JetStream domain and
inbox prefix apply; NATS_CONTEXT picks one; explicit arguments win."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import time

import pytest

import jetstream_sync as jss

from ..helpers import config_server, make_tls_files

nkeys = pytest.importorskip("nkeys")


def write_context(directory, name="ctx", **fields):
    """A context file as ``nats context save`` writes it: every field, empty when unset."""
    doc = {f: "" for f in ("description", "url", "socks_proxy", "token", "user", "password", "creds", "nkey",
                           "cert", "key", "ca", "nsc", "jetstream_domain", "jetstream_api_prefix",
                           "jetstream_event_prefix", "inbox_prefix", "user_jwt", "color_scheme")}  # fmt: skip
    doc["tls_first"] = False
    doc.update(fields)
    path = directory / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2))
    return str(path)


def round_trip(nc):
    """A core request/reply on the connection works."""
    sub = nc.subscribe("ctx.echo", cb=lambda m: m.respond(m.data))
    try:
        assert nc.request("ctx.echo", b"hi", timeout=5).data == b"hi"
    finally:
        sub.unsubscribe()


# -- TLS ------------------------------------------------------------------------------

TLS_CONF = """
listen: 127.0.0.1:{port}
jetstream { store_dir: "{store}" }
tls {
  cert_file: "%(server)s", key_file: "%(server_key)s", ca_file: "%(ca)s", verify: true
  %(first)s
}
"""


@pytest.mark.parametrize("tls_first", [False, True], ids=["starttls", "tls_first"])
def test_a_context_with_cert_key_and_ca_connects_with_mutual_tls(tmp_path, tls_first):
    files = make_tls_files(tmp_path)
    server = config_server(tmp_path, "tls", TLS_CONF % {**files, "first": "handshake_first: true" if tls_first else ""})
    try:
        path = write_context(tmp_path, url=f"tls://127.0.0.1:{server.port}", cert=files["client"],
                             key=files["client_key"], ca=files["ca"], tls_first=tls_first)  # fmt: skip
        with jss.connect(context=path) as nc:
            js = nc.jetstream()
            js.create_stream(name="T", subjects=["t.>"])
            assert js.publish("t.1", b"x").seq == 1
        without_cert = write_context(tmp_path, "nocert", url=f"tls://127.0.0.1:{server.port}", ca=files["ca"],
                                     tls_first=tls_first)  # fmt: skip
        with pytest.raises(jss.NoServersError):
            jss.connect(context=without_cert, connect_timeout=1)
    finally:
        server.cleanup()


def test_a_context_whose_certificate_cannot_be_loaded_says_which_file(tmp_path, server):
    path = write_context(tmp_path, url=server.url, cert=str(tmp_path / "none.pem"), key=str(tmp_path / "none-key.pem"))
    with pytest.raises(jss.InvalidOptionError, match=r"ctx.json: fields 'cert'/'key': .*could not be loaded \(No such file"):
        jss.connect(context=path)
    with jss.connect(context=path, tls=None) as nc:  # tls= given: the context's files are not loaded
        assert nc.is_connected


# -- files a context names: read and checked before anything connects ----------------------

_BAD_FILES = [
    ({"creds": "missing"}, r"field 'creds': cannot read the credentials file {missing} \(No such file or directory\)"),
    ({"creds": "dir"}, r"field 'creds': cannot read the credentials file {dir} \(Is a directory\)"),
    ({"creds": "bad"}, r"field 'creds': the credentials file {bad} holds no user JWT"),
    ({"nkey": "missing"}, r"field 'nkey': cannot read the nkey seed file {missing} \(No such file or directory\)"),
    ({"nkey": "bad"}, r"field 'nkey': the nkey seed file {bad} does not hold an nkey seed"),
    ({"user_jwt": "jwt", "nkey": "dir"}, r"field 'nkey': cannot read the nkey seed file {dir} \(Is a directory\)"),
    ({"ca": "missing"}, r"field 'ca': the CA certificates could not be loaded \(No such file or directory: {missing}\)"),
    ({"ca": "dir"}, r"field 'ca': the CA certificates could not be loaded \(Is a directory: {dir}\)"),
    ({"ca": "bad"}, r"field 'ca': the CA certificates could not be loaded \(.*: {bad}\)"),
    ({"cert": "missing", "key": "bad"}, r"fields 'cert'/'key': .* could not be loaded \(No such file or directory: {missing}\)"),
    ({"cert": "bad", "key": "dir"}, r"fields 'cert'/'key': .* could not be loaded \(Is a directory: {dir}\)"),
    ({"cert": "bad", "key": "bad"}, r"fields 'cert'/'key': .* could not be loaded \(.*: {bad}\)"),
]  # fmt: skip


@pytest.mark.parametrize("fields, says", _BAD_FILES, ids=[" ".join(f"{k}={v}" for k, v in f.items()) for f, _ in _BAD_FILES])
def test_a_file_the_context_names_that_cannot_be_used_is_refused_before_anything_connects(tmp_path, server, fields, says):
    # nats-py reads creds and nkey files only when a server asks for a signature: against a
    # server without authentication a missing one went unnoticed.
    files = {"missing": tmp_path / "nowhere" / "file", "dir": tmp_path / "a-directory", "bad": tmp_path / "bad.txt"}
    files["dir"].mkdir()
    files["bad"].write_text("garbage-SECRET-1\n-----BEGIN NATS USER JWT-----\nnot-a-jwt-SECRET-2\n")
    values = {k: "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.c2ln" if v == "jwt" else str(files[v]) for k, v in fields.items()}
    path = write_context(tmp_path, "prod", url=server.url, **values)
    pattern = f"NATS context 'prod' in {re.escape(path)}: " + says.format(**{k: re.escape(str(v)) for k, v in files.items()})
    before = server.varz()["total_connections"]
    with pytest.raises(jss.InvalidOptionError, match=pattern) as info:
        jss.connect(context=path).close()
    assert server.varz()["total_connections"] == before  # nothing reached the server
    assert "SECRET" not in str(info.value) and "eyJ" not in str(info.value)


# -- JWTs, creds, nkeys -------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _keypair(prefix):
    return nkeys.from_seed(nkeys.encode_seed(os.urandom(32), prefix))


def _jwt(issuer, subject, kind, **claims):
    body = {"iat": int(time.time()), "iss": issuer.public_key.decode(), "name": kind, "sub": subject,
            "nats": {"type": kind, "version": 2, **claims}}  # fmt: skip
    body["jti"] = base64.b32encode(hashlib.sha256(json.dumps(body).encode()).digest()).decode().rstrip("=")
    signed = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode()) + "." + _b64(json.dumps(body).encode())
    return signed + "." + _b64(issuer.sign(signed.encode()))


@pytest.fixture
def operator_server(tmp_path):
    """A server in operator mode (JWT auth, a memory resolver) and a user of its account: (server, jwt, seed)."""
    op, acc, user = (_keypair(p) for p in (nkeys.PREFIX_BYTE_OPERATOR, nkeys.PREFIX_BYTE_ACCOUNT, nkeys.PREFIX_BYTE_USER))
    limits = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True, "conn": -1}
    account = _jwt(op, acc.public_key.decode(), "account", limits=limits)
    user_jwt = _jwt(acc, user.public_key.decode(), "user", pub={}, sub={}, subs=-1, data=-1, payload=-1)
    conf = (f"listen: 127.0.0.1:{{port}}\noperator: {_jwt(op, op.public_key.decode(), 'operator')}\n"
            f"resolver: MEMORY\nresolver_preload: {{ {acc.public_key.decode()}: {account} }}\n")  # fmt: skip
    server = config_server(tmp_path, "operator", conf)
    yield server, user_jwt, user.seed.decode()
    server.cleanup()


def test_a_context_with_a_creds_file_connects(tmp_path, operator_server):
    server, user_jwt, seed = operator_server
    creds = tmp_path / "user.creds"
    creds.write_text(f"-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n"
                     f"-----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n")  # fmt: skip
    with jss.connect(context=write_context(tmp_path, url=server.url, creds=str(creds))) as nc:
        round_trip(nc)
    with pytest.raises(jss.AuthorizationError):  # the same server without them
        jss.connect(server.url)


def test_a_context_with_a_user_jwt_and_its_nkey_seed_file_connects(tmp_path, operator_server):
    server, user_jwt, seed = operator_server
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(seed)
    with jss.connect(context=write_context(tmp_path, url=server.url, user_jwt=user_jwt, nkey=str(seed_file))) as nc:
        round_trip(nc)


def test_connect_options_of_every_credential_form_pass_the_checks_and_connect(tmp_path, operator_server):
    from nats.aio.client import RawCredentials

    server, user_jwt, seed = operator_server
    text = (f"-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n"
            f"-----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n")  # fmt: skip
    creds, jwt_file, seed_file = tmp_path / "user.creds", tmp_path / "user.jwt", tmp_path / "user.nk"
    creds.write_text(text)
    jwt_file.write_text(user_jwt + "\n")
    seed_file.write_text(seed)  # nats-py reads a pair's seed file whole: no line break
    for given in (str(creds), creds, (str(jwt_file), str(seed_file)), RawCredentials(text)):
        with jss.connect(server.url, user_credentials=given) as nc:
            round_trip(nc)


@pytest.fixture
def nkey_server(tmp_path):
    """A server whose one user is an nkey: (server, the user's key pair)."""
    user = _keypair(nkeys.PREFIX_BYTE_USER)
    server = config_server(tmp_path, "nkey", "listen: 127.0.0.1:{port}\nauthorization { users: [{nkey: %s}] }\n"
                           % user.public_key.decode())  # fmt: skip
    yield server, user
    server.cleanup()


def test_a_context_with_an_nkey_seed_file_connects(tmp_path, nkey_server):
    server, user = nkey_server
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(user.seed.decode())
    with jss.connect(context=write_context(tmp_path, url=server.url, nkey=str(seed_file))) as nc:
        round_trip(nc)


def test_connect_options_with_an_nkey_seed_file_or_the_seed_connect(tmp_path, nkey_server):
    server, user = nkey_server
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(user.seed.decode() + "\n")
    for given in ({"nkeys_seed": str(seed_file)}, {"nkeys_seed_str": user.seed.decode()}):
        with jss.connect(server.url, **given) as nc:
            round_trip(nc)


# -- user/password, token, and explicit arguments -------------------------------------------


@pytest.fixture
def password_server(tmp_path):
    server = config_server(tmp_path, "pw", "listen: 127.0.0.1:{port}\njetstream { store_dir: \"{store}\", domain: hub }\n"
                           "authorization { users: [{user: alice, password: pw-secret}] }\n")  # fmt: skip
    yield server
    server.cleanup()


def test_user_password_domain_and_inbox_prefix_come_from_the_context(tmp_path, password_server):
    path = write_context(tmp_path, url=password_server.url, user="alice", password="pw-secret",
                         jetstream_domain="hub", inbox_prefix="_CTX_INBOX")  # fmt: skip
    with jss.connect(context=path) as nc:
        assert nc.nats_context is not None and nc.nats_context.name == "ctx"
        assert nc.new_inbox().startswith("_CTX_INBOX.")
        js = nc.jetstream()
        assert js.api_prefix == "$JS.hub.API"
        js.create_stream(name="D", subjects=["d.>"])
        assert js.publish("d.1", b"x").domain == "hub"
        assert nc.jetstream(api_prefix="$JS.API").api_prefix == "$JS.API"  # explicit arguments win


def test_explicit_connect_arguments_win_over_the_context(tmp_path, password_server):
    path = write_context(tmp_path, url="nats://127.0.0.1:1", user="alice", password="wrong")
    with jss.connect(password_server.url, context=path, password="pw-secret") as nc:
        round_trip(nc)
    with pytest.raises(jss.AuthorizationError) as info:
        jss.connect(password_server.url, context=path)
    assert "wrong" not in str(info.value)


def test_a_token_context_connects(tmp_path):
    server = config_server(tmp_path, "tok", "listen: 127.0.0.1:{port}\nauthorization { token: tok-secret }\n")
    try:
        with jss.connect(context=write_context(tmp_path, url=server.url, token="tok-secret")) as nc:
            round_trip(nc)
    finally:
        server.cleanup()


def test_nats_context_and_the_selected_context_pick_the_file(tmp_path, monkeypatch, server):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    contexts = tmp_path / "nats" / "context"
    contexts.mkdir(parents=True)
    write_context(contexts, "local", url=server.url, description="the test server")
    monkeypatch.setenv("NATS_CONTEXT", "local")
    with jss.connect() as nc:
        assert nc.nats_context.description == "the test server" and nc.connected_url is not None
    monkeypatch.delenv("NATS_CONTEXT")
    (tmp_path / "nats" / "context.txt").write_text("local")
    with jss.connect(context=True) as nc:
        assert nc.nats_context.name == "local"
        round_trip(nc)


def test_shared_client_connects_to_the_contexts_server(tmp_path, server):
    path = write_context(tmp_path, url=server.url, inbox_prefix="_SHARED")
    nc = jss.shared_client(context=path)
    try:
        assert nc is jss.shared_client(context=path)  # one client per settings
        assert nc.connected_url is not None and nc.new_inbox().startswith("_SHARED.")
    finally:
        jss.close_shared_clients()


def test_shared_clients_of_two_contexts_from_the_environment_are_two_clients(tmp_path, monkeypatch, server):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    contexts = tmp_path / "nats" / "context"
    contexts.mkdir(parents=True)
    write_context(contexts, "a", url=server.url, inbox_prefix="_A")
    write_context(contexts, "b", url=server.url, inbox_prefix="_B")
    try:
        monkeypatch.setenv("NATS_CONTEXT", "a")
        a = jss.shared_client()
        monkeypatch.setenv("NATS_CONTEXT", "b")
        b = jss.shared_client()
        assert a is not b and (a.new_inbox()[:3], b.new_inbox()[:3]) == ("_A.", "_B.")
        assert jss.shared_client() is b
        monkeypatch.delenv("NATS_CONTEXT")  # context=True: the one context.txt selects
        (tmp_path / "nats" / "context.txt").write_text("a")
        selected_a = jss.shared_client(context=True)
        (tmp_path / "nats" / "context.txt").write_text("b")
        selected_b = jss.shared_client(context=True)
        assert selected_a is not selected_b and selected_b.new_inbox().startswith("_B.")
    finally:
        jss.close_shared_clients()
