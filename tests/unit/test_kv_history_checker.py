"""The key-value history checker (tests/kv_history.py) accepts a history
that one order of writes explains and rejects each kind of violation."""

from __future__ import annotations

import pytest

from ..kv_history import Entry, Op, check


def put(key, value, t0, t1, rev=None, outcome="ok", kind="put", last=None):
    return Op(kind, key, t0, t1, outcome, value=value, revision=rev if outcome == "ok" else None, last=last)


def get(key, t0, t1, rev, value=None, read_op="PUT", consistent=True):
    return Op("get", key, t0, t1, "ok", value=value, revision=rev, read_op=read_op, consistent=consistent)


def stored(*entries):
    return [Entry(k, r, v, op) for k, r, v, op in entries]


GOOD_HISTORY = [
    put("a", b"1", 0.0, 1.0, 1),
    put("a", b"2", 2.0, 3.0, 2, kind="update", last=1),
    put("b", b"3", 2.5, 3.5, 3, kind="create"),
    put("b", b"4", 4.0, 5.0, outcome="fail", kind="create"),  # b exists: nothing written
    put("a", b"5", 4.0, 9.0, outcome="info"),  # timed out, and was written
    put("b", b"6", 4.0, 9.0, outcome="info"),  # timed out, and was not
    Op("delete", "b", 5.0, 6.0, "ok"),
    put("b", b"7", 6.5, 7.0, 6, kind="create"),  # after the delete marker
    get("a", 3.1, 3.2, 2, b"2"),
    get("b", 6.1, 6.2, 5, read_op="DEL"),
    get("a", 3.3, 3.4, 1, b"1", consistent=False),  # a replica behind: reported, allowed
]
GOOD_STREAM = stored(("a", 1, b"1", "PUT"), ("a", 2, b"2", "PUT"), ("b", 3, b"3", "PUT"), ("a", 4, b"5", "PUT"),
                     ("b", 5, b"", "DEL"), ("b", 6, b"7", "PUT"))


def test_a_history_one_order_of_writes_explains_passes_and_replica_staleness_is_reported():
    report = check(GOOD_HISTORY, GOOD_STREAM)
    assert report.violations == []
    assert (report.reads, report.stale_reads, report.max_staleness) == (3, 1, 1)


def test_a_lost_write_is_rejected():
    report = check(GOOD_HISTORY, [e for e in GOOD_STREAM if e.revision != 3])
    assert any(v.startswith("lost write") and "b'3'" in v for v in report.violations), report


def test_a_cas_stored_over_a_newer_revision_than_it_named_is_rejected():
    history = [put("a", b"1", 0, 1, 1), put("a", b"2", 2, 3, 2), put("a", b"3", 4, 5, 3, kind="update", last=1)]
    stream = stored(("a", 1, b"1", "PUT"), ("a", 2, b"2", "PUT"), ("a", 3, b"3", "PUT"))
    report = check(history, stream)
    assert any("with last=1" in v and "over revision 2" in v for v in report.violations), report


def test_an_indeterminate_cas_that_was_stored_over_another_revision_is_rejected():
    history = [put("a", b"1", 0, 1, 1), put("a", b"2", 2, 3, 2), put("a", b"3", 4, 9, outcome="info", kind="update", last=1)]
    stream = stored(("a", 1, b"1", "PUT"), ("a", 2, b"2", "PUT"), ("a", 3, b"3", "PUT"))
    report = check(history, stream)
    assert any("with last=1" in v and "over revision 2" in v for v in report.violations), report


def test_a_stale_read_marked_consistent_is_rejected():
    history = [put("a", b"1", 0, 1, 1), put("a", b"2", 2, 3, 2), get("a", 4, 5, 1, b"1", consistent=True)]
    stream = stored(("a", 1, b"1", "PUT"), ("a", 2, b"2", "PUT"))
    report = check(history, stream)
    assert any(v.startswith("stale read marked consistent") for v in report.violations), report
    # the same read from a replica is counted, not rejected
    history[-1].consistent = False
    report = check(history, stream)
    assert report.violations == [] and report.stale_reads == 1


def test_a_second_create_of_a_key_with_a_value_is_rejected():
    history = [put("a", b"1", 0, 1, 1, kind="create"), put("a", b"2", 2, 3, 2, kind="create")]
    report = check(history, stored(("a", 1, b"1", "PUT"), ("a", 2, b"2", "PUT")))
    assert any("second create" in v for v in report.violations), report


def test_a_definitely_failed_write_that_was_stored_is_rejected():
    history = [put("a", b"1", 0, 1, 1), put("a", b"2", 2, 3, outcome="fail", kind="update", last=7)]
    report = check(history, stored(("a", 1, b"1", "PUT"), ("a", 2, b"2", "PUT")))
    assert any("failed definitely" in v for v in report.violations), report


def test_an_indeterminate_write_stored_twice_is_rejected():
    history = [put("a", b"1", 0, 9, outcome="info")]
    report = check(history, stored(("a", 1, b"1", "PUT"), ("a", 2, b"1", "PUT")))
    assert any("stored 2 times" in v for v in report.violations), report


def test_revisions_against_real_time_order_are_rejected():
    history = [put("a", b"1", 0, 1, 2), put("b", b"2", 2, 3, 1)]  # the later write got the lower revision
    report = check(history, stored(("b", 1, b"2", "PUT"), ("a", 2, b"1", "PUT")))
    assert any(v.startswith("real-time order") for v in report.violations), report


def test_a_phantom_read_and_a_read_from_the_future_are_rejected():
    history = [put("a", b"1", 0, 1, 1), get("a", 2, 3, 1, b"9")]
    report = check(history, stored(("a", 1, b"1", "PUT")))
    assert any(v.startswith("phantom read") for v in report.violations), report
    history = [get("a", 0, 1, 1, b"1"), put("a", b"1", 2, 3, 1)]
    report = check(history, stored(("a", 1, b"1", "PUT")))
    assert any("begun after the read ended" in v for v in report.violations), report


def test_lost_and_phantom_deletes_are_rejected():
    history = [put("a", b"1", 0, 1, 1), Op("delete", "a", 2, 3, "ok")]
    report = check(history, stored(("a", 1, b"1", "PUT")))
    assert any(v.startswith("lost delete") for v in report.violations), report
    report = check(history[:1], stored(("a", 1, b"1", "PUT"), ("a", 2, b"", "DEL")))
    assert any("delete markers" in v for v in report.violations), report


@pytest.mark.timeout(60)
def test_the_history_of_a_twenty_minute_run_is_checked_within_a_minute():
    """A 20-minute run records about a million calls: each read must be
    checked against the writes before it by bisection, not by a scan (which
    took longer than the run itself)."""
    n, keys = 200_000, ("a", "b", "c", "d")
    history, stream = [], []
    for i in range(n):
        key = keys[i % 4]
        history.append(put(key, b"%d" % i, 2.0 * i, 2.0 * i + 1, i + 1))
        stream.append(Entry(key, i + 1, b"%d" % i, "PUT"))
        history.append(get(key, 2.0 * i + 1.5, 2.0 * i + 1.9, i + 1, b"%d" % i))
    report = check(history, stream)
    assert report.violations == [] and report.reads == n
