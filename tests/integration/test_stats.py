"""Stats a user reads for monitoring: Client.stats and the contexts' stats as plain dicts."""

from __future__ import annotations

import json
import threading

import jetstream_sync as jss

from ..helpers import publish, wait_until


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


def test_client_counters_are_exact_under_threads(server, js, stream, subj, cons):
    """Eight threads publish, request, publish to JetStream and ack_sync
    while a subscription receives: every message and payload byte is
    counted once (headers are not payload), the replies and acknowledgements
    the client reads included, whichever path wrote or read them."""
    threads, pubs, reqs, jspubs, acks, received = 8, 1_000, 200, 25, 10, 500
    pub_payload, req_payload, js_payload, in_payload = b"p" * 40, b"r" * 20, b"j" * 30, b"i" * 50
    publish(js, subj, threads * acks)
    nc = jss.connect(server.url, name="counted")
    other = jss.connect(server.url, name="peer")
    try:
        other.subscribe("stats.echo", cb=lambda msg: msg.respond(msg.data))
        other.flush()
        raw = other.request(subj, b"q", timeout=5)  # a PubAck as the server writes it
        seq0 = json.loads(raw.data)["seq"]
        to_ack = [m for m in nc.jetstream().consumer(stream.name, cons.name).fetch(threads * acks, expires=5)]
        assert len(to_ack) == threads * acks
        sub = nc.subscribe("stats.in")
        nc.flush()
        before = nc.stats
        errors: list = []
        puback_bytes = [0] * threads
        ncjs = nc.jetstream()

        def work(i):
            try:
                for n in range(pubs):
                    nc.publish(f"stats.out.{i}", pub_payload, headers={"n": str(n)} if n % 2 else None)
                for _ in range(reqs):
                    assert nc.request("stats.echo", req_payload, timeout=5).data == req_payload
                for n in range(jspubs):
                    ack = ncjs.publish(subj, js_payload, headers={"n": str(n)} if n % 2 else None)
                    puback_bytes[i] += len(raw.data) - len(str(seq0)) + len(str(ack.seq))
                for msg in to_ack[i * acks:(i + 1) * acks]:
                    msg.ack_sync()
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for t in workers:
            t.start()
        for n in range(received):
            other.publish("stats.in", in_payload, headers={"n": str(n)} if n % 2 else None)
        other.flush()
        for t in workers:
            t.join(60)
        assert not errors
        got = 0
        while got < received:
            sub.next_msg(timeout=5)
            got += 1
        nc.flush()
        after = nc.stats
        diff = {k: after[k] - before[k] for k in ("out_msgs", "out_bytes", "in_msgs", "in_bytes")}
        assert diff == {
            "out_msgs": threads * (pubs + reqs + jspubs + acks),
            "out_bytes": threads * (pubs * len(pub_payload) + reqs * len(req_payload) + jspubs * len(js_payload) + acks * 4),
            "in_msgs": threads * (reqs + jspubs + acks) + received,
            "in_bytes": threads * reqs * len(req_payload) + sum(puback_bytes) + received * len(in_payload),
        }
    finally:
        other.close()
        nc.close()
