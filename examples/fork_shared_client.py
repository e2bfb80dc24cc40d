"""After os.fork(): inherited clients refuse use; shared_client() makes a new one."""

import os

import jetstream_sync as jss

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

nc = jss.shared_client(NATS_URL)  # this process's client for these settings
js = nc.jetstream()
js.create_stream(name="EX_FORK", subjects=["ex.fork.>"])
js.publish("ex.fork.parent", b"from the parent")

pid = os.fork()
if pid == 0:  # the child
    code = 1
    try:
        try:
            js.publish("ex.fork.child", b"never sent")  # the parent's socket: refused
        except jss.ForkedProcessError:
            print("child: the inherited client refuses use")
        child_js = jss.shared_client(NATS_URL).jetstream()  # a new client, the child's own
        child_js.publish("ex.fork.child", b"from the child")
        code = 0
    finally:
        jss.close_shared_clients()  # os._exit skips the exit hooks that would close it
        os._exit(code)

_, status = os.waitpid(pid, 0)
count = js.stream("EX_FORK").info().state.messages
print(f"parent: child exited with {os.waitstatus_to_exitcode(status)}, stream has {count} messages")
js.delete_stream("EX_FORK")
jss.close_shared_clients()
