"""Tests of the Totals handler against a real nats-server, with the fixtures
that `pip install jetstream-sync` brings to pytest (no conftest needed)."""

import json

import jetstream_sync as jss
from jetstream_sync.testing import wait_for_ack_floor, wait_until
from totals import Totals


def publish_orders(js, orders, **options):
    """Publish each (customer, amount); the last publish's ack."""
    for customer, amount in orders:
        ack = js.publish("orders.new", json.dumps({"customer": customer, "amount": amount}).encode(), **options)
    return ack


def test_the_handler_totals_each_customer(client):
    js = client.jetstream()
    stream = js.create_stream(name="ORDERS", subjects=["orders.>"])
    cons = stream.create_consumer(durable_name="totals", ack_policy="explicit")
    last = publish_orders(js, [("ann", 5), ("bob", 7), ("ann", 3)])

    totals = Totals()
    handling = cons.consume(totals.handle)  # on a thread of its own
    try:
        wait_for_ack_floor(cons, last.seq, timeout=10)  # every order handled and acked
    finally:
        handling.stop()
    assert totals.by_customer() == {"ann": 8, "bob": 7}


def test_the_handler_goes_on_after_a_server_restart(nats_server, client):
    js = client.jetstream()
    stream = js.create_stream(name="ORDERS", subjects=["orders.>"])
    cons = stream.create_consumer(durable_name="totals", ack_policy="explicit")

    totals = Totals()
    handling = cons.consume(totals.handle)
    try:
        wait_for_ack_floor(cons, publish_orders(js, [("ann", 5)]).seq, timeout=10)
        nats_server.restart()  # same port, same store; the client reconnects on its own
        wait_for_ack_floor(cons, publish_orders(js, [("ann", 1)]).seq, timeout=20)
    finally:
        handling.stop()
    assert totals.by_customer() == {"ann": 6}


def test_orders_are_kept_on_three_servers(nats_cluster):
    cluster = nats_cluster(3)
    cluster.wait_for_meta_leader()
    with jss.connect(cluster.servers[0].url) as nc:
        js = nc.jetstream()
        js.create_stream(name="ORDERS", subjects=["orders.>"], num_replicas=3)
        # The new stream elects its leader after create_stream returns, and the
        # other servers learn of its subjects after that: on a busy machine this
        # can take longer than a publish's default retries after "no responders"
        # (2, 0.25 s apart), so wait for the leader and allow 40 (within the
        # publish's timeout).
        wait_until(lambda: js.stream_info("ORDERS").cluster.leader, timeout=30)
        ack = publish_orders(js, [("ann", 5), ("bob", 7)], retry_attempts=40, timeout=15)
        assert (ack.stream, ack.seq) == ("ORDERS", 2)
        assert js.stream_info("ORDERS").cluster.leader in cluster.names
