"""Command line: ``jetstream-sync demo|bench|worker`` / ``python -m jetstream_sync ...``."""

from __future__ import annotations

import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print("usage: jetstream-sync demo [--server URL] [-n COUNT] [--size BYTES] [--no-progress]")
        print("       jetstream-sync bench {pub,consume,both} [--server URL | --embedded] ... (bench -h)")
        print("       jetstream-sync worker module:handler --stream S --consumer C [--server URL] ... (worker -h)")
        return 0 if args else 2
    if args[0] == "demo":
        from ._demo import main as demo

        return demo(args[1:])
    if args[0] == "bench":
        from ._bench import main as bench

        return bench(args[1:])
    if args[0] == "worker":
        from ._worker_cli import main as worker

        return worker(args[1:])
    print(f"unknown command {args[0]!r}; try: jetstream-sync demo, jetstream-sync bench", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
