"""A worker that ends cleanly on SIGTERM (Kubernetes, systemd, docker stop).

Run it, then `kill -TERM <pid>`: the messages() loop is drained (what was
already received is still handed out and acked), the queued acks are sent and
the client is closed, all within 10 s; then the loop ends and the script exits.
"""

import os
import signal

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

# Once, in the main thread. exit=False: let the loop below end and the script
# finish by itself; the default (exit=True) ends the process as SIGTERM would.
jss.install_signal_handlers((signal.SIGTERM, signal.SIGINT), timeout=10, exit=False)

nc = jss.connect(NATS_URL, name="sigterm-worker")
js = nc.jetstream()
stream = js.create_or_update_stream(name="EX_WORKER", subjects=["ex.worker"])
for i in range(10):
    js.publish("ex.worker", f"task {i}".encode())
cons = stream.create_or_update_consumer(durable_name="worker", ack_policy="explicit")

handled = 0
print(f"worker {os.getpid()} ready", flush=True)
with cons.messages() as it:
    for msg in it:  # ends after a SIGTERM, once the buffered messages are handed out
        handled += 1
        msg.ack()
print(f"worker stopped after {handled} messages", flush=True)
