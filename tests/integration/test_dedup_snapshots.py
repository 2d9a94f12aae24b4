"""Deduplication snapshots (brokerDeduplicationEntriesInterval, the pulsar.dedup cursor's
properties) and the namespace deduplication policy, with the official Python client against a real
broker process."""

import os
import re
import sys
import time

import pulsar
import pytest
import requests

sys.path.insert(0, os.path.dirname(__file__))
from test_dedup import DEDUP, drain  # noqa: E402


@pytest.fixture
def broker(restartable):
    return restartable(DEDUP)


def web_url(broker):
    return broker.admin_url


def replayed_entries(broker, topic):
    """Entries the broker replayed at its last load of `topic` (from its log)."""
    with open(os.path.join(broker.workdir, "magnetar.log"), errors="replace") as f:
        lines = [l for l in f if topic in l and "entries replayed" in l]
    assert lines, "no dedup recovery line in the log"
    return int(re.search(r"(\d+) entries replayed", lines[-1]).group(1))


def test_restart_replays_only_the_tail_after_the_snapshot(broker):
    cfg = ("brokerDeduplicationEntriesInterval=10",)
    url = broker.start(extra=cfg).service_url
    topic = "persistent://public/default/dedup-snap"
    client = pulsar.Client(url, operation_timeout_seconds=30)
    client.subscribe(topic, "sub").close()
    producer = client.create_producer(topic, producer_name="gw-snap", batching_enabled=False)
    for i in range(50):
        producer.send(b"%d" % i, sequence_id=i)
    # Count-based snapshots are taken no more often than the cursor writes them
    # (managedLedgerDefaultMarkDeleteRateLimit, 1/s): the one due in this burst comes once the
    # second has passed, at the last entry (50), and is written within the interval plus the
    # storage tick (1 s each).
    time.sleep(2.5)
    for i in range(50, 55):
        producer.send(b"%d" % i, sequence_id=i)
    client.close()
    broker.kill()

    url = broker.start(broker.port, extra=cfg).service_url
    client = pulsar.Client(url, operation_timeout_seconds=30)
    producer = client.create_producer(topic, producer_name="gw-snap", batching_enabled=False)
    # The topic loads with the producer: state = snapshot at entry 50 + the 5 entries after it.
    n = replayed_entries(broker, topic)
    assert 0 < n <= 10, f"replayed {n} entries, expected only the tail after the last snapshot"
    assert producer.last_sequence_id() == 54
    dup = producer.send(b"52", sequence_id=52)
    assert (dup.ledger_id(), dup.entry_id()) == (-1, -1)
    producer.send(b"55", sequence_id=55)
    consumer = client.subscribe(topic, "sub")
    assert drain(consumer) == [b"%d" % i for i in range(56)]
    client.close()


def test_snapshot_keeps_producers_whose_entries_are_gone(broker):
    # Small ledgers, trimmed once consumed: the old producer's entries are deleted, its last
    # sequence id survives in the snapshot.
    cfg = ("brokerDeduplicationEntriesInterval=5", "managedLedgerMaxEntriesPerLedger=5",
           "managedLedgerMinLedgerRolloverTimeMinutes=0")
    url = broker.start(extra=cfg).service_url
    topic = "persistent://public/default/dedup-snap-trim"
    client = pulsar.Client(url, operation_timeout_seconds=30)
    consumer = client.subscribe(topic, "sub")
    old = client.create_producer(topic, producer_name="gw-old", batching_enabled=False)
    for i in range(20):
        old.send(b"old-%d" % i, sequence_id=i)
    old.close()
    new = client.create_producer(topic, producer_name="gw-new", batching_enabled=False)
    for i in range(12):
        new.send(b"new-%d" % i, sequence_id=i)
    assert len(drain(consumer)) == 32
    # Trimming waits for the cursors' writes, rate-limited to one a second.
    deadline = time.time() + 10
    while True:
        stats = requests.get(f"{web_url(broker)}/admin/v2/persistent/public/default/"
                             f"dedup-snap-trim/internalStats", timeout=10).json()
        if stats["numberOfEntries"] < 32 or time.time() > deadline:
            break
        time.sleep(0.2)
    assert stats["numberOfEntries"] < 32, "consumed ledgers were trimmed"
    client.close()
    broker.stop()

    url = broker.start(broker.port, extra=cfg).service_url
    client = pulsar.Client(url, operation_timeout_seconds=30)
    old = client.create_producer(topic, producer_name="gw-old", batching_enabled=False)
    assert old.last_sequence_id() == 19
    dup = old.send(b"old-7", sequence_id=7)
    assert (dup.ledger_id(), dup.entry_id()) == (-1, -1)
    client.close()


def test_namespace_policy_overrides_the_broker_default(broker):
    url = broker.start(extra=("brokerDeduplicationEnabled=false",)).service_url
    web = web_url(broker)
    policy = f"{web}/admin/v2/namespaces/public/default/deduplication"
    client = pulsar.Client(url, operation_timeout_seconds=30)
    loaded = "persistent://public/default/dedup-policy-loaded"
    consumer = client.subscribe(loaded, "sub")
    p = client.create_producer(loaded, producer_name="gw-pol", batching_enabled=False)
    p.send(b"a", sequence_id=1)
    p.send(b"a-again", sequence_id=1)  # dedup off: stored
    assert requests.get(policy, timeout=10).status_code == 204  # not set

    r = requests.post(policy, json=True, timeout=10)
    assert r.status_code == 204
    assert requests.get(policy, timeout=10).json() is True
    time.sleep(0.5)  # the loaded topic switches on and recovers its state
    p.close()
    p = client.create_producer(loaded, producer_name="gw-pol", batching_enabled=False)
    assert p.last_sequence_id() == 1
    dup = p.send(b"dup", sequence_id=1)
    assert (dup.ledger_id(), dup.entry_id()) == (-1, -1)
    p.send(b"b", sequence_id=2)
    assert drain(consumer) == [b"a", b"a-again", b"b"]

    # A topic loaded after the change gets the policy too.
    fresh = "persistent://public/default/dedup-policy-fresh"
    c2 = client.subscribe(fresh, "sub")
    q = client.create_producer(fresh, producer_name="gw-pol", batching_enabled=False)
    q.send(b"x", sequence_id=5)
    dup = q.send(b"x", sequence_id=5)
    assert (dup.ledger_id(), dup.entry_id()) == (-1, -1)
    assert drain(c2) == [b"x"]
    fresh_stats = f"{web}/admin/v2/persistent/public/default/dedup-policy-fresh/stats"
    assert requests.get(fresh_stats, timeout=10).json()["deduplicationStatus"] == "Enabled"

    # Removing the policy falls back to the broker default (off).
    assert requests.delete(policy, timeout=10).status_code == 204
    time.sleep(0.5)
    q.send(b"x-again", sequence_id=5)
    assert drain(c2) == [b"x-again"]
    assert requests.get(fresh_stats, timeout=10).json()["deduplicationStatus"] == "Disabled"
    client.close()
