"""Message schedules (ADR-51): a delayed message, a repeating one, list, cancel."""

import datetime
import os
import time

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")


def count(js, subject):
    return (js.stream_info("EX_SCHED", subjects_filter=subject).state.subjects or {}).get(subject, 0)


def wait_for(what, predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {timeout} s")
        time.sleep(0.1)


with jss.connect(NATS_URL) as nc:
    js = nc.jetstream()
    # Schedules and their targets live in one stream, which allows schedules.
    js.create_stream(name="EX_SCHED", subjects=["ex.sched.>", "ex.orders.>"], allow_msg_schedules=True)
    try:
        # Once, two seconds from now: the stream publishes the body to the target then.
        at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
        js.publish_schedule("ex.sched.reminder", b"send the invoice", schedule=at, target="ex.orders.reminders")
        # Every second, until cancelled (one schedule per subject).
        js.publish_schedule("ex.sched.tick", b"tick", schedule="@every 1s", target="ex.orders.ticks")
        print("scheduled:", ", ".join(f"{s.subject} ({s.schedule.split()[0]})" for s in js.schedules("EX_SCHED")))

        wait_for("the delayed message", lambda: count(js, "ex.orders.reminders") == 1)
        msg = js.get_msg("EX_SCHED", last_by_subject="ex.orders.reminders")
        print(f"delayed: {msg.data.decode()!r}, on time={msg.time >= at}, from {msg.headers['Nats-Scheduler']}")

        wait_for("three ticks", lambda: count(js, "ex.orders.ticks") >= 3)
        print(f"cancelled: {js.cancel_schedule('EX_SCHED', 'ex.sched.tick')}, left: {js.schedules('EX_SCHED')}")
    finally:
        js.delete_stream("EX_SCHED")
