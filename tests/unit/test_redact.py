"""URLs in logs and errors never carry a password or token, however it is spelled."""

import pytest

from jetstream_sync._core.connect import redact_url


@pytest.mark.parametrize(
    "url, shown",
    [
        ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
        ("nats://svc:s3cret@127.0.0.1:4222", "nats://svc:***@127.0.0.1:4222"),
        ("nats://tok3n@127.0.0.1:4222", "nats://***@127.0.0.1:4222"),
        ("nats://svc:s3cr#et@127.0.0.1:1", "nats://svc:***@127.0.0.1:1"),
        ("nats://svc:a/b?c@127.0.0.1:1", "nats://svc:***@127.0.0.1:1"),
        ("nats://svc:p@ss@host:4222", "nats://svc:***@host:4222"),
        ("tls://svc:p%40ss@host:4222", "tls://svc:***@host:4222"),
        ("svc:s3cret@host:4222", "svc:***@host:4222"),
        ("ws://:onlypass@host", "ws://:***@host"),
    ],
)
def test_redact_url(url, shown):
    assert redact_url(url) == shown
    secret = url.split("://")[-1].rpartition("@")[0].partition(":")[2] or url.split("://")[-1].rpartition("@")[0]
    if "@" in url:
        assert secret not in redact_url(url).rpartition("@")[0].replace("***", "")
