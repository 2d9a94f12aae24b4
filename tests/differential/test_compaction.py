"""Topic compaction: the admin compact / compaction-status calls, and read_compacted readers and
consumers that see the latest message per key up to the horizon, then the live tail."""

import time

import pulsar
import pytest
import requests
from pulsar import ConsumerType, MessageId

from helpers import assert_nothing, receive_all


def rest_path(topic: str) -> str:
    return topic.replace("persistent://", "persistent/")


def compact(admin_url: str, topic: str, timeout_s: float = 60.0) -> dict:
    """Starts a compaction and waits for it to end; returns the final status JSON."""
    url = f"{admin_url}/admin/v2/{rest_path(topic)}/compaction"
    r = requests.put(url, timeout=30)
    assert r.status_code == 204, r.text
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        status = requests.get(url, timeout=30).json()
        if status["status"] != "RUNNING":
            return status
        time.sleep(0.2)
    raise AssertionError("compaction did not finish")


def keyed_view(messages) -> dict:
    """key -> values; the compacted_out placeholders of a re-batched batch (which the Python
    client hands out as keyless empty messages, on both brokers) are left out."""
    out = {}
    for m in messages:
        if m.partition_key() == "" and m.data() == b"":
            continue
        out.setdefault(m.partition_key(), []).append(m.data())
    return out


ITEMS = [("a", b"a1"), ("b", b"b1"), ("a", b"a2"), ("c", b"c1"), ("b", b""), ("a", b"a3"),
         (None, b"nokey")]


def send_items(client, topic, items, batching=False):
    producer = client.create_producer(topic, batching_enabled=batching,
                                      batching_max_messages=100,
                                      batching_max_publish_delay_ms=50)
    for key, value in items:
        kwargs = {"partition_key": key} if key is not None else {}
        if batching:
            producer.send_async(value, None, **kwargs)
        else:
            producer.send(value, **kwargs)
    producer.flush()
    producer.close()


def test_status_before_any_compaction_is_not_run(client, topic, admin_url):
    client.create_producer(topic).close()
    r = requests.get(f"{admin_url}/admin/v2/{rest_path(topic)}/compaction", timeout=30)
    assert r.status_code == 200
    assert r.json()["status"] == "NOT_RUN"


def test_compaction_of_a_missing_topic_is_404(admin_url):
    r = requests.put(f"{admin_url}/admin/v2/persistent/public/default/never-made-c1/compaction",
                     timeout=30)
    assert r.status_code == 404


@pytest.mark.parametrize("batching", [False, True])
def test_read_compacted_reader_gets_latest_per_key(client, topic, admin_url, batching):
    # The subscription keeps the raw messages from being trimmed before the compaction.
    raw = client.subscribe(topic, "raw", initial_position=pulsar.InitialPosition.Earliest)
    send_items(client, topic, ITEMS, batching=batching)
    status = compact(admin_url, topic)
    assert status["status"] == "SUCCESS", status
    reader = client.create_reader(topic, MessageId.earliest, is_read_compacted=True)
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(5000))
    # b was deleted by its empty payload, the keyless message is dropped, a keeps its latest.
    assert keyed_view(got) == {"a": [b"a3"], "c": [b"c1"]}
    stats = requests.get(f"{admin_url}/admin/v2/{rest_path(topic)}/stats", timeout=30).json()
    # Pulsar counts a2 and a3 (replacements), b's tombstone and the keyless message.
    assert stats["compaction"]["lastCompactionRemovedEventCount"] == 4
    # A reader without read_compacted still sees everything.
    plain = client.create_reader(topic, MessageId.earliest)
    n = 0
    while plain.has_message_available():
        plain.read_next(5000)
        n += 1
    assert n == len(ITEMS)
    raw.close()


def test_compacted_view_then_live_tail(client, topic, admin_url):
    send_items(client, topic, [("k1", b"1"), ("k1", b"2"), ("k2", b"x")])
    assert compact(admin_url, topic)["status"] == "SUCCESS"
    send_items(client, topic, [("k1", b"3"), ("k2", b"y")])
    consumer = client.subscribe(topic, "compacted", consumer_type=ConsumerType.Exclusive,
                                initial_position=pulsar.InitialPosition.Earliest,
                                is_read_compacted=True)
    got = receive_all(consumer)
    # Up to the horizon the latest per key (in their original order), then every later message.
    assert [(m.partition_key(), m.data()) for m in got] == [
        ("k1", b"2"), ("k2", b"x"), ("k1", b"3"), ("k2", b"y")]


def test_second_compaction_merges_with_the_first(client, topic, admin_url):
    send_items(client, topic, [("a", b"1"), ("b", b"1")])
    assert compact(admin_url, topic)["status"] == "SUCCESS"
    send_items(client, topic, [("a", b"2"), ("b", b""), ("c", b"1")])
    assert compact(admin_url, topic)["status"] == "SUCCESS"
    reader = client.create_reader(topic, MessageId.earliest, is_read_compacted=True)
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(5000))
    assert keyed_view(got) == {"a": [b"2"], "c": [b"1"]}


def test_read_compacted_on_shared_is_refused(client, topic):
    client.create_producer(topic).close()
    # The Python client refuses it before asking (InvalidConfiguration); the broker would answer
    # NotAllowedError (src/broker unit test).
    with pytest.raises(pulsar.PulsarException):
        client.subscribe(topic, "s", consumer_type=ConsumerType.Shared, is_read_compacted=True)


def test_compaction_stats_after_a_run(client, topic, admin_url):
    send_items(client, topic, [("a", b"1"), ("a", b"2"), ("a", b"3"), ("b", b"1")])
    assert compact(admin_url, topic)["status"] == "SUCCESS"
    stats = requests.get(f"{admin_url}/admin/v2/{rest_path(topic)}/stats", timeout=30).json()
    c = stats["compaction"]
    assert c["lastCompactionSucceedTimestamp"] > 0
    assert c["lastCompactionRemovedEventCount"] == 2
    internal = requests.get(f"{admin_url}/admin/v2/{rest_path(topic)}/internalStats",
                            timeout=30).json()
    assert internal["compactedLedger"]["ledgerId"] >= 0
    assert "__compaction" in internal["cursors"]


def test_partitioned_topic_compacts_every_partition(client, topic, admin_url):
    r = requests.put(f"{admin_url}/admin/v2/{rest_path(topic)}/partitions", json=2, timeout=30)
    assert r.status_code == 204, r.text
    send_items(client, topic, [(f"k{i % 4}", b"%d" % i) for i in range(20)])
    r = requests.put(f"{admin_url}/admin/v2/{rest_path(topic)}/compaction", timeout=30)
    assert r.status_code == 204, r.text
    for p in range(2):
        part = f"{topic}-partition-{p}"
        deadline = time.time() + 60
        while True:
            s = requests.get(f"{admin_url}/admin/v2/{rest_path(part)}/compaction", timeout=30)
            if s.json()["status"] != "RUNNING" or time.time() > deadline:
                break
            time.sleep(0.2)
        assert s.json()["status"] == "SUCCESS"
    reader = client.create_reader(topic, MessageId.earliest, is_read_compacted=True)
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(5000))
    # The latest per key: 16..19.
    assert sorted(m.data() for m in got) == [b"16", b"17", b"18", b"19"]


def test_namespace_compaction_threshold_policy(admin_url):
    url = f"{admin_url}/admin/v2/namespaces/public/default/compactionThreshold"
    try:
        assert requests.put(url, json=1048576, timeout=30).status_code == 204
        deadline = time.time() + 30
        while requests.get(url, timeout=30).text.strip() != "1048576" and time.time() < deadline:
            time.sleep(0.5)  # Pulsar applies namespace policies asynchronously
        assert requests.get(url, timeout=30).json() == 1048576
        assert requests.put(url, json=-1, timeout=30).status_code == 412
    finally:
        requests.delete(url, timeout=30)


def test_compaction_not_reached_by_non_compacted_consumer(client, topic, admin_url):
    send_items(client, topic, [("a", b"1"), ("a", b"2")])
    assert compact(admin_url, topic)["status"] == "SUCCESS"
    consumer = client.subscribe(topic, "plain", initial_position=pulsar.InitialPosition.Earliest)
    assert [m.data() for m in receive_all(consumer)] == [b"1", b"2"]
    assert_nothing(consumer)


def test_partly_kept_batch_keeps_its_indexes_as_placeholders(client, topic, admin_url):
    """A batch whose messages are partly replaced later is re-written with its size kept: each
    dropped message becomes a compacted_out placeholder (Pulsar's RawBatchConverter). The Python
    (C++) client does not skip those, so a compacted reader gets them as keyless empty messages, at
    the batch indexes of the dropped messages, on both brokers."""
    raw = client.subscribe(topic, "raw", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=4,
                                      batching_max_publish_delay_ms=60000)
    first = [("k0", b"0a"), ("k1", b"1a"), ("k2", b"2a"), ("k3", b"3a")]
    second = [("k1", b"1b"), ("k3", b"3b"), ("k4", b"4b"), ("k5", b"5b")]
    for batch in (first, second):
        for key, value in batch:
            producer.send_async(value, None, partition_key=key)
        producer.flush()  # one batch of exactly four
    producer.close()
    assert compact(admin_url, topic)["status"] == "SUCCESS"
    reader = client.create_reader(topic, MessageId.earliest, is_read_compacted=True)
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(5000))
    seen = [(m.partition_key(), m.data(), m.message_id().batch_index()) for m in got]
    assert seen == [("k0", b"0a", 0), ("", b"", 1), ("k2", b"2a", 2), ("", b"", 3),
                    ("k1", b"1b", 0), ("k3", b"3b", 1), ("k4", b"4b", 2), ("k5", b"5b", 3)]
    # The two batches are still two entries, and the placeholders' ids are the originals'.
    assert len({(m.message_id().ledger_id(), m.message_id().entry_id()) for m in got}) == 2
    raw.close()
