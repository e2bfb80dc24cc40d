"""The settings key of shared_client(): equal settings, equal keys."""

from __future__ import annotations

import ssl

from jetstream_sync.worker.shared import settings_key


def test_equal_settings_give_equal_keys_whatever_the_keyword_order():
    a = settings_key("nats://a:4222", {"name": "x", "user": "u"})
    b = settings_key("nats://a:4222", {"user": "u", "name": "x"})
    assert a == b and hash(a) == hash(b)


def test_a_url_string_and_a_one_element_list_are_the_same_servers():
    assert settings_key("nats://a:4222", {}) == settings_key(["nats://a:4222"], {})


def test_unhashable_values_compare_by_identity():
    ctx = ssl.create_default_context()
    assert settings_key("nats://a", {"tls": ctx}) == settings_key("nats://a", {"tls": ctx})
    assert settings_key("nats://a", {"tls": ctx}) != settings_key("nats://a", {"tls": ssl.create_default_context()})
    assert settings_key("nats://a", {"opts": {"k": [1, 2]}}) == settings_key("nats://a", {"opts": {"k": [1, 2]}})
