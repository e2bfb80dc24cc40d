"""Stats a user reads for monitoring: Client.stats and the contexts' stats as plain dicts."""

from __future__ import annotations

import json

from ..helpers import wait_until


def test_client_counts_every_publish_and_ack_it_sends(nc, js, subj, cons):
    before = nc.stats
    for i in range(10):
        js.publish(subj, b"%d" % i)
    for _i in range(10):
        js.publish_async(subj, b"x" * 100)
    assert js.publish_async_complete(timeout=10)
    with cons.messages() as ctx:
        for n, msg in enumerate(ctx, 1):
            msg.ack()
            if n == 20:
                break
    nc.flush()
    wait_until(lambda: cons.info().num_ack_pending == 0)
    after = nc.stats
    # 20 publishes + 20 acks + at least one pull, whichever path wrote them
    assert after["out_msgs"] - before["out_msgs"] >= 41
    assert after["out_bytes"] - before["out_bytes"] >= 10 + 1000
    assert after["in_msgs"] - before["in_msgs"] >= 40  # 20 PubAcks and 20 messages
    assert after["ack_errors"] == 0


def test_context_stats_as_a_plain_dict(js, subj, cons):
    for i in range(5):
        js.publish(subj, b"%d" % i)
    with cons.messages(max_messages=10) as ctx:
        for n, msg in enumerate(ctx, 1):
            msg.ack()
            if n == 5:
                break
        stats = ctx.stats.as_dict()
    assert type(stats) is dict and type(stats["statuses"]) is dict
    assert stats["delivered"] == 5 and stats["pulls"] >= 1
    assert json.loads(json.dumps(stats)) == stats  # ready for JSON logs as it is
    stats["statuses"]["x"] = 1  # a copy: changing it changes nothing in the context
    assert "x" not in ctx.stats.statuses
