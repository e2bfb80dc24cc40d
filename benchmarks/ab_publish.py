"""publish_async of this checkout against another one, interleaved (``ab.py publish``).

    git worktree add /tmp/old <commit>
    python benchmarks/ab_publish.py --old /tmp/old [--rounds 5] [-n 30000] [--no-read]
"""

from ab import main

if __name__ == "__main__":
    main(workload="publish")
