"""A checker of key-value histories: is what clients saw explainable by one
order of the bucket's writes, in real time?

The bucket's revisions (its stream's sequences) give the order of the writes,
so no search over interleavings is needed: a history is checked against the
entries the stream holds afterwards. Every written value is unique, which ties
each stored entry to the call that wrote it.

An operation ends ``ok`` (the server answered with success), ``fail`` (the
server answered that a precondition did not hold: nothing was written) or
``info`` (indeterminate: a timeout or a lost connection; it may or may not have
been written).
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

WRITES = ("put", "update", "create", "delete")
MARKERS = ("DEL", "PURGE")


@dataclass
class Op:
    """One call as a client saw it. Times are monotonic seconds of one process."""

    kind: str  # "put" | "update" | "create" | "delete" | "get"
    key: str
    invoke: float
    complete: float
    outcome: str  # "ok" | "fail" | "info"
    value: Optional[bytes] = None  # written; for a get, the value read (None: a marker or nothing)
    last: Optional[int] = None  # update: the revision it named
    revision: Optional[int] = None  # an ok write's revision; a get's (None: the key had nothing)
    read_op: Optional[str] = None  # get: "PUT", "DEL" or "PURGE" read; None: not found
    consistent: bool = False  # get: a read that claims to be linearizable (the leader's)
    error: str = ""  # the exception's type, for the report


@dataclass
class Entry:
    """One entry of the bucket's stream after the run."""

    key: str
    revision: int
    value: bytes
    op: str  # "PUT" | "DEL" | "PURGE"


@dataclass
class Report:
    violations: List[str] = field(default_factory=list)
    reads: int = 0
    stale_reads: int = 0  # reads not marked consistent that missed a completed write
    max_staleness: int = 0  # revisions of the key such a read missed, at most
    outcomes: Counter = field(default_factory=Counter)  # ("put", "ok") -> count

    def __str__(self) -> str:
        lines = [f"{len(self.violations)} violation(s); {self.reads} reads, {self.stale_reads} stale "
                 f"(at most {self.max_staleness} revisions behind); outcomes {dict(self.outcomes)}"]
        lines += self.violations[:20]
        return "\n".join(lines)


def check(history: Sequence[Op], final: Sequence[Entry]) -> Report:
    """Every property a linearizable bucket guarantees, checked; the
    violations (with the operation they concern) in the report."""
    report = Report()
    bad = report.violations
    for op in history:
        report.outcomes[(op.kind, op.outcome)] += 1

    # The stream afterwards: one entry per revision; each written value at most once.
    by_rev: Dict[int, Entry] = {}
    by_value: Dict[bytes, List[Entry]] = defaultdict(list)
    per_key: Dict[str, List[int]] = defaultdict(list)
    for e in final:
        if e.revision in by_rev:
            bad.append(f"revision {e.revision} appears twice in the stream")
        by_rev[e.revision] = e
        per_key[e.key].append(e.revision)
        if e.op == "PUT":
            by_value[e.value].append(e)
    for revs in per_key.values():
        revs.sort()
    for value, entries in by_value.items():
        if len(entries) > 1:
            bad.append(f"value {value!r} stored {len(entries)} times: revisions {[e.revision for e in entries]}")

    def previous(key: str, revision: int) -> Optional[Entry]:
        revs = per_key[key]
        i = bisect.bisect_left(revs, revision)
        return by_rev[revs[i - 1]] if i > 0 else None

    writes = [op for op in history if op.kind in WRITES and op.kind != "delete"]
    ok_writes = [op for op in writes if op.outcome == "ok"]
    seen_revs: Dict[int, Op] = {}
    for op in writes:
        stored = by_value.get(op.value or b"", [])
        if op.outcome == "ok":
            if op.revision in seen_revs:
                bad.append(f"{op.kind} {op.value!r} acknowledged with revision {op.revision}, "
                           f"as was {seen_revs[op.revision].value!r}")
            seen_revs[op.revision or 0] = op
            if not stored:
                bad.append(f"lost write: {op.kind} {op.key}={op.value!r} acknowledged at revision "
                           f"{op.revision}, not in the stream")
                continue
            if stored[0].revision != op.revision or stored[0].key != op.key:
                bad.append(f"{op.kind} {op.key}={op.value!r} acknowledged at revision {op.revision}, "
                           f"stored at {stored[0].revision} under {stored[0].key!r}")
                continue
        elif op.outcome == "fail" and stored:
            bad.append(f"{op.kind} {op.key}={op.value!r} failed definitely ({op.error}), yet stored at "
                       f"revision {stored[0].revision}")
            continue
        if not stored:
            continue
        # Stored (acknowledged, or indeterminate and written): its precondition held.
        e = stored[0]
        prev = previous(e.key, e.revision)
        if op.kind == "update" and (prev.revision if prev else 0) != op.last:
            bad.append(f"update {op.key}={op.value!r} with last={op.last} stored at revision {e.revision} "
                       f"over revision {prev.revision if prev else 0}")
        if op.kind == "create" and prev is not None and prev.op not in MARKERS:
            bad.append(f"create {op.key}={op.value!r} at revision {e.revision} over the value at "
                       f"revision {prev.revision}: a second create of a key that had a value")

    # Deletes return no revision: count their markers per key.
    deletes: Dict[str, List[Op]] = defaultdict(list)
    for op in history:
        if op.kind == "delete":
            deletes[op.key].append(op)
    for key in set(deletes) | set(per_key):
        dels = deletes.get(key, [])
        acked = sum(op.outcome == "ok" for op in dels)
        maybe = sum(op.outcome == "info" for op in dels)
        markers = sum(by_rev[r].op == "DEL" for r in per_key.get(key, []))
        if markers < acked:
            bad.append(f"lost delete: {acked} deletes of {key!r} acknowledged, {markers} markers stored")
        if markers > acked + maybe:
            bad.append(f"{markers} delete markers of {key!r} stored, only {acked + maybe} deletes may have been")

    # Real time: a write acknowledged before another began has the lower revision.
    by_complete = sorted(ok_writes, key=lambda op: op.complete)
    completes = [op.complete for op in by_complete]
    best: List[Tuple[int, Op]] = []  # the highest revision among the first i completions
    for op in by_complete:
        top = best[-1] if best else (0, op)
        best.append(max(top, (op.revision or 0, op), key=lambda t: t[0]))
    for op in ok_writes:
        i = bisect.bisect_left(completes, op.invoke)
        if i and best[i - 1][0] > (op.revision or 0):
            before = best[i - 1][1]
            bad.append(f"real-time order: {op.kind} {op.value!r} got revision {op.revision} though "
                       f"{before.kind} {before.value!r} (revision {before.revision}) was acknowledged before it began")

    # Reads: what they saw existed, came from no later call, and was current.
    written_by = {op.value: op for op in history if op.kind in WRITES and op.value}
    # Per key, acknowledged writes by completion, with the highest revision
    # among the first i of them: the newest a later read must see, by bisection.
    key_writes: Dict[str, List[Op]] = defaultdict(list)
    for op in ok_writes:
        key_writes[op.key].append(op)
    key_completes: Dict[str, List[float]] = {}
    key_newest: Dict[str, List[int]] = {}
    for key, ops in key_writes.items():
        ops.sort(key=lambda op: op.complete)
        key_completes[key] = [w.complete for w in ops]
        key_newest[key] = list(itertools.accumulate((w.revision or 0 for w in ops), max))
    for op in history:
        if op.kind != "get" or op.outcome != "ok":
            continue
        report.reads += 1
        if op.read_op is not None:
            e = by_rev.get(op.revision or 0)
            if e is None or e.key != op.key or e.op != op.read_op or (op.read_op == "PUT" and e.value != op.value):
                bad.append(f"phantom read: get {op.key} saw {op.read_op} {op.value!r} at revision {op.revision}, "
                           f"the stream has {e}")
                continue
            writer = written_by.get(op.value) if op.read_op == "PUT" else None
            if writer is not None and writer.invoke > op.complete:
                bad.append(f"get {op.key} saw {op.value!r}, written by a call begun after the read ended")
        i = bisect.bisect_left(key_completes.get(op.key, []), op.invoke)  # the writes completed before it began
        newest = key_newest[op.key][i - 1] if i else 0
        seen = op.revision or 0
        if seen < newest:
            revs = per_key.get(op.key, [])
            behind = bisect.bisect_right(revs, newest) - bisect.bisect_right(revs, seen)
            if op.consistent:
                bad.append(f"stale read marked consistent: get {op.key} saw revision {seen} after revision "
                           f"{newest} was acknowledged ({behind} behind)")
            else:
                report.stale_reads += 1
                report.max_staleness = max(report.max_staleness, behind)
    return report
