"""KVLookup without Spark: made where the driver is, pickled as Spark ships it,
read in this process as an executor would; kept current by its watch."""

from __future__ import annotations

import pickle
import pytest

import jetstream_sync as jss
from jetstream_sync.spark import KVLookup, shared_client

from ..helpers import loop_held, spark_clients_closed_after, wait_until  # noqa: F401 (an autouse fixture)



@pytest.fixture
def rates(js):
    kv = js.create_key_value(bucket="RATES")
    kv.put("EUR", b"1.08")
    kv.put("GBP", b"1.27")
    kv.put("JPY", b"0.0067")
    kv.delete("JPY")
    return kv


def shipped(lookup: KVLookup) -> KVLookup:
    return pickle.loads(pickle.dumps(lookup))  # what an executor gets


def test_reads_the_bucket_and_follows_its_changes(server, rates):
    lookup = shipped(KVLookup(server.url, "RATES"))
    assert (lookup.get("EUR"), lookup["GBP"], lookup.get("JPY"), lookup.get("CHF", b"-")) == (b"1.08", b"1.27", None, b"-")
    assert sorted(lookup) == ["EUR", "GBP"] and "JPY" not in lookup and len(lookup) == 2
    rev = rates.put("CHF", b"1.13")
    assert lookup.wait_for(rev, timeout=10) and lookup["CHF"] == b"1.13"
    rates.purge("EUR")
    wait_until(lambda: lookup.get("EUR") is None, timeout=10)
    assert lookup.snapshot() == {"GBP": b"1.27", "CHF": b"1.13"}
    with pytest.raises(KeyError):
        lookup["EUR"]


def test_one_copy_per_process(server, rates):
    a, b = shipped(KVLookup(server.url, "RATES")), shipped(KVLookup(server.url, "RATES"))
    assert a.get("EUR") == b"1.08"
    rev = rates.put("EUR", b"1.09")
    assert a.wait_for(rev, timeout=10) and b.revision == rev  # b reads the copy a waited for


def test_without_watch_the_first_reading_stays(server, rates):
    lookup = shipped(KVLookup(server.url, "RATES", watch=False))
    assert lookup.get("EUR") == b"1.08"
    rev = rates.put("EUR", b"2.00")
    assert not lookup.wait_for(rev, timeout=0.5)
    assert lookup.get("EUR") == b"1.08"


def test_a_missing_bucket_says_so_at_the_first_lookup_and_bad_arguments_on_the_driver(server, js):
    with pytest.raises(jss.InvalidOptionError):
        KVLookup(server.url, "bad.name")
    with pytest.raises(jss.InvalidOptionError):
        KVLookup("", "RATES")
    lookup = shipped(KVLookup(server.url, "NOPE", timeout=10))
    with pytest.raises(jss.BucketNotFoundError):
        lookup.get("x")
    js.create_key_value(bucket="NOPE").put("x", b"1")
    assert lookup.get("x") == b"1"  # a failed first reading is tried again


def test_a_bucket_deleted_under_a_lookup_is_an_error_not_stale_data(server, js, rates):
    lookup = shipped(KVLookup(server.url, "RATES", timeout=5))
    assert lookup.get("EUR") == b"1.08"
    js.delete_key_value("RATES")

    def gone() -> bool:
        try:
            lookup.get("EUR")
        except jss.BucketNotFoundError:
            return True
        return False

    wait_until(gone, timeout=15)


def test_a_bucket_deleted_and_made_again_is_read_afresh(server, js, rates):
    lookup = shipped(KVLookup(server.url, "RATES"))
    assert lookup["EUR"] == b"1.08"
    # The watch's client sees the delete only once the new bucket exists: its
    # reset then finds a stream whose sequences started over.
    with loop_held(shared_client(server.url)):
        js.delete_key_value("RATES")
        again = js.create_key_value(bucket="RATES")
        again.put("EUR", b"2.00")

    def fresh() -> bool:
        try:
            return lookup.get("EUR") == b"2.00"
        except jss.JetStreamError:  # the watch's end, reported once to a lookup
            return False

    wait_until(fresh, timeout=20)
