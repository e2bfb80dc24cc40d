"""Command line: ``jetstream-sync demo|bench|worker|service`` / ``python -m jetstream_sync ...``."""

from __future__ import annotations

import sys
from typing import List, Optional

from ._tools import bench, demo
from .errors import JetStreamError
from .worker import cli, service_runner


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print("usage: jetstream-sync demo [--server URL] [-n COUNT] [--size BYTES] [--no-progress]")
        print("       jetstream-sync bench {pub,consume,both} [--server URL | --embedded] ... (bench -h)")
        print("       jetstream-sync worker module:handler --stream S --consumer C [--server URL] ... (worker -h)")
        print("       jetstream-sync service module:factory [--server URL] [--shutdown-timeout S] ... (service -h)")
        return 0 if args else 2
    commands = {"demo": demo.main, "bench": bench.main, "worker": cli.main, "service": service_runner.main}
    command = commands.get(args[0])
    if command is None:
        print(f"unknown command {args[0]!r}; try: jetstream-sync demo, bench, worker or service", file=sys.stderr)
        return 2
    try:
        return command(args[1:])
    except JetStreamError as exc:  # a down server or a refused call: one line, not a traceback
        print(f"jetstream-sync {args[0]}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"jetstream-sync {args[0]}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
