"""NATS context files (ADR-21), read without a server: every field of the
``nats`` CLI's format, where a context is found (a name, a path,
NATS_CONTEXT, the CLI's context.txt), and the errors, which name the file
and never show a secret."""

from __future__ import annotations

import json

import pytest

import jetstream_sync as jss
from jetstream_sync.options.natscontext import CONTEXT_FIELDS, context_for, load_context, parse_context

SEED = "SUAM" + "A" * 54  # the shape of a user seed: never shown


def ctx(**fields):
    return parse_context(fields, "/ctx/prod.json")


# field -> (its value in a file, what it becomes). Every field of the format has a row.
FIELDS = {
    "url": ("nats://a:4222,nats://b:4222", lambda c: c.connection.servers == ("nats://a:4222", "nats://b:4222")),
    "user": ("alice", lambda c: c.connect_options()["user"] == "alice"),
    "password": ("pw", lambda c: c.connect_options()["password"] == "pw"),
    "token": ("tok", lambda c: c.connect_options()["token"] == "tok"),
    "creds": ("~/u.creds", lambda c: c.connect_options()["user_credentials"].endswith("/u.creds")
              and "~" not in c.connect_options()["user_credentials"]),
    "nkey": ("/keys/u.nk", lambda c: c.connect_options()["nkeys_seed"] == "/keys/u.nk"),
    "cert": ("/tls/c.pem", lambda c: c.connection.tls.cert == "/tls/c.pem"),
    "key": ("/tls/k.pem", lambda c: c.connection.tls.key == "/tls/k.pem"),
    "ca": ("/tls/ca.pem", lambda c: c.connection.tls.ca == "/tls/ca.pem"),
    "jetstream_domain": ("hub", lambda c: c.jetstream_options() == {"domain": "hub"}),
    "jetstream_api_prefix": ("$JS.hub.API.", lambda c: c.jetstream_options() == {"api_prefix": "$JS.hub.API"}),
    "inbox_prefix": ("_MINE", lambda c: c.connect_options()["inbox_prefix"] == "_MINE"),
    "user_jwt": ("eyJ0.x.y", lambda c: bytes(c.connect_options()["user_jwt_cb"]()) == b"eyJ0.x.y"),
    "tls_first": (True, lambda c: c.connect_options()["tls_handshake_first"] is True),
    "description": ("production", lambda c: c.description == "production"),
    "color_scheme": ("red", lambda c: c.color_scheme == "red"),
    "jetstream_event_prefix": ("$JS.EVENT", lambda c: c.jetstream_event_prefix == "$JS.EVENT"),
    "name": ("prod", lambda c: c.name == "prod"),  # the file's name, as the CLI does
    # Fields this client cannot honour are refused, not ignored (see test_unsupported_fields_are_refused).
    "socks_proxy": ("", lambda c: True),
    "nsc": ("", lambda c: True),
    "windows_cert_store": ("", lambda c: True),
    "windows_cert_match_by": ("", lambda c: True),
    "windows_cert_match": ("", lambda c: True),
    "windows_ca_certs_match": ([], lambda c: True),
}
NEEDS = {"password": {"user": "alice"}, "key": {"cert": "/tls/c.pem"}, "cert": {"key": "/tls/k.pem"},
         "user_jwt": {"nkey": "/keys/u.nk"}}  # fmt: skip


def test_the_table_covers_every_field_of_the_format():
    assert set(FIELDS) == set(CONTEXT_FIELDS)


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_each_field_maps_to_the_connection(field):
    value, check = FIELDS[field]
    c = ctx(**{field: value, **NEEDS.get(field, {})})
    assert check(c)


def test_an_empty_context_is_the_local_server_with_nothing_else():
    c = ctx()
    assert c.connection.servers == ("nats://127.0.0.1:4222",)
    assert c.connect_options() == {} and c.jetstream_options() == {} and c.connection.tls is None


def test_empty_strings_mean_not_set_and_unknown_fields_are_ignored():
    c = ctx(user="", password="", token="", ca="", jetstream_domain="", some_future_field=1)
    assert c.connect_options() == {} and c.jetstream_options() == {}


@pytest.mark.parametrize("field", ["socks_proxy", "nsc", "windows_cert_store", "windows_cert_match_by",
                                   "windows_cert_match", "windows_ca_certs_match"])  # fmt: skip
def test_unsupported_fields_are_refused(field):
    value = ["x"] if field == "windows_ca_certs_match" else "x"
    with pytest.raises(jss.InvalidOptionError, match=rf"/ctx/prod.json: field '{field}' is not supported"):
        ctx(**{field: value})


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"password": "pw"}, "'password' needs field 'user'"),
        ({"key": "/k"}, "'key' needs field 'cert'"),
        ({"cert": "/c"}, "'cert' needs field 'key'"),
        ({"user_jwt": "eyJ"}, "'user_jwt' needs field 'nkey'"),
        ({"url": "http://h:80"}, "unsupported URL scheme"),
        ({"jetstream_domain": "a.b"}, "jetstream_domain"),
        ({"jetstream_domain": "a", "jetstream_api_prefix": "$JS.a.API"}, "sets both"),
        ({"inbox_prefix": "_IN.*"}, "inbox"),
        ({"tls_first": "yes"}, "'tls_first' must be a JSON boolean"),
        ({"user": 7}, "'user' must be a JSON string"),
    ],
)
def test_bad_fields_are_clear_errors_naming_the_file(fields, message):
    with pytest.raises(jss.InvalidOptionError, match=message) as info:
        ctx(**fields)
    assert "/ctx/prod.json" in str(info.value)


def test_secrets_never_in_errors_or_reprs():
    for secret in ({"password": 12345}, {"token": ["tok-secret"]}, {"user_jwt": {"j": "jwt-secret"}}):
        with pytest.raises(jss.InvalidOptionError) as info:
            ctx(user="alice", nkey="/n", **secret)
        assert "12345" not in str(info.value) and "secret" not in str(info.value)
    c = ctx(url="nats://alice:url-secret@h:4222", user="alice", password="pw-secret", token="tok-secret",
            user_jwt="jwt-secret", nkey="/n")  # fmt: skip
    assert not any(s in repr(c) for s in ("url-secret", "pw-secret", "tok-secret", "jwt-secret")), repr(c)
    assert "alice" in repr(c) and "prod" in repr(c)


@pytest.fixture
def config_home(tmp_path, monkeypatch):
    """An empty $XDG_CONFIG_HOME with a nats/context directory; NATS_CONTEXT unset."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("NATS_CONTEXT", raising=False)
    (tmp_path / "nats" / "context").mkdir(parents=True)
    return tmp_path / "nats"


def write(config_home, name, **fields):
    path = config_home / "context" / f"{name}.json"
    path.write_text(json.dumps(fields))
    return path


def test_a_name_is_read_from_the_contexts_directory_and_a_path_as_it_is(config_home, tmp_path):
    write(config_home, "prod", url="nats://prod:4222")
    assert load_context("prod").connection.servers == ("nats://prod:4222",)
    elsewhere = tmp_path / "other.json"
    elsewhere.write_text(json.dumps({"url": "nats://other:4222"}))
    assert load_context(str(elsewhere)).connection.servers == ("nats://other:4222",)
    assert load_context(elsewhere).name == "other"  # a pathlib.Path too


def test_the_default_config_home_is_dot_config(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".config" / "nats" / "context").mkdir(parents=True)
    (tmp_path / ".config" / "nats" / "context" / "dev.json").write_text('{"url": "nats://dev:4222"}')
    assert load_context("dev").path == str(tmp_path / ".config" / "nats" / "context" / "dev.json")


def test_nats_context_selects_when_no_servers_are_given(config_home, monkeypatch):
    write(config_home, "prod", url="nats://prod:4222")
    assert context_for(None, servers_given=False) is None
    monkeypatch.setenv("NATS_CONTEXT", "prod")
    assert context_for(None, servers_given=False).name == "prod"
    assert context_for(None, servers_given=True) is None  # explicit servers: no context unless asked


def test_context_true_is_the_selected_one_nats_context_first_then_context_txt(config_home, monkeypatch):
    write(config_home, "prod", url="nats://prod:4222")
    write(config_home, "dev", url="nats://dev:4222")
    with pytest.raises(jss.InvalidOptionError, match="no context is selected"):
        context_for(True, servers_given=False)
    (config_home / "context.txt").write_text("dev\n")
    assert context_for(True, servers_given=False).name == "dev"
    assert context_for(None, servers_given=False) is None  # context.txt alone never redirects connect()
    monkeypatch.setenv("NATS_CONTEXT", "prod")
    assert context_for(True, servers_given=True).name == "prod"


def test_a_missing_or_broken_context_names_the_file(config_home):
    with pytest.raises(jss.InvalidOptionError, match=r"NATS context nope not found: no file .*nats/context/nope.json"):
        load_context("nope")
    path = config_home / "context" / "broken.json"
    path.write_text('{"url": "nats://h:4222",\n "password": "pw-secret" "user": "u"}')
    with pytest.raises(jss.InvalidOptionError, match=rf"{path} is not valid JSON: .* line 2") as info:
        load_context("broken")
    assert "pw-secret" not in str(info.value)
    (config_home / "context" / "list.json").write_text("[]")
    with pytest.raises(jss.InvalidOptionError, match="must hold a JSON object"):
        load_context("list")


@pytest.mark.parametrize("bad", ["../etc/passwd", "a b", "", 7])
def test_bad_context_names_are_refused(config_home, bad):
    with pytest.raises((jss.InvalidOptionError, TypeError)):
        context_for(bad, servers_given=False)


def test_connect_reads_the_context_before_connecting(config_home):
    with pytest.raises(jss.InvalidOptionError, match="nats/context/absent.json"):
        jss.connect(context="absent")
