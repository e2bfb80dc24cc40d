"""The code under test: a handler that totals the orders of each customer."""

import json
import threading


class Totals:
    """Adds up ``amount`` per ``customer`` of each order message, then acks it."""

    def __init__(self):
        self._lock = threading.Lock()  # the handler runs on the consume context's thread
        self._by_customer = {}

    def handle(self, msg):
        order = json.loads(msg.data)
        with self._lock:
            self._by_customer[order["customer"]] = self._by_customer.get(order["customer"], 0) + order["amount"]
        msg.ack()

    def by_customer(self):
        with self._lock:
            return dict(self._by_customer)
