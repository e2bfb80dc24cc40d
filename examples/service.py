"""An ADR-32 service: endpoints on worker threads, a group, a service error,
discovery with request_many, and the stats nats micro shows.

Run it as a script (it calls itself and prints what happened), or serve it
until SIGTERM with the runner: ``jetstream-sync service service:make``.
"""

import json
import os

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")


def make(nc):
    """Add the service to a connected client and return it (the runner calls this)."""
    svc = nc.add_service("calc", "1.0.0", description="adds and divides", workers=4)
    math = svc.add_group("calc")

    @math.endpoint("add")  # subject calc.add, queue group "q"
    def add(req):
        a, b = json.loads(req.data)
        req.respond_json(a + b)

    @math.endpoint("divide")
    def divide(req):
        a, b = json.loads(req.data)
        if b == 0:
            raise jss.ServiceError(400, "division by zero")  # answered as a service error
        req.respond_json(a / b)

    return svc


if __name__ == "__main__":
    with jss.connect(NATS_URL, name="service-example") as nc:
        with make(nc) as svc:  # leaving the block drains the service
            print("add:", nc.request("calc.add", b"[2, 3]").data.decode())
            print("divide:", nc.request("calc.divide", b"[1, 4]").data.decode())
            err = nc.request("calc.divide", b"[1, 0]")
            print("error:", err.headers["Nats-Service-Error-Code"], err.headers["Nats-Service-Error"])

            # Discovery: every service answers $SRV.PING; gather the answers for up to 1 s.
            found = [json.loads(m.data) for m in nc.request_many("$SRV.PING.calc", max_wait=1.0, stall=0.2)]
            print("discovered:", [(p["name"], p["version"]) for p in found])

            stats = {e.name: e for e in svc.stats().endpoints}
            requests = sum(e.num_requests for e in stats.values())
            errors = sum(e.num_errors for e in stats.values())
            print(f"service calc: {requests} requests, {errors} error, last error {stats['divide'].last_error!r}")
