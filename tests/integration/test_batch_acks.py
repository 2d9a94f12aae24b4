"""Batch-index acknowledgements (PIP-54, ack_set) and compressed batches with the official Python
client against a real broker process: a partly acked batch comes back with only its unacked
messages (after a redelivery, a reconnect and a broker restart), and compressed payloads are stored
and delivered untouched."""

import time
import zlib

import pulsar
import pytest
import requests

from harness.protobuf import read_varint
from harness.util import receive_all


@pytest.fixture
def broker(restartable):
    return restartable()


def batch_producer(client, topic, n=10, **kw):
    # One batch of n messages: the delay is long and the size limit is n.
    return client.create_producer(topic, batching_enabled=True, batching_max_messages=n,
                                  batching_max_publish_delay_ms=60000, **kw)


def send_batch(producer, payloads):
    done = []
    for p in payloads:
        producer.send_async(p, lambda res, mid: done.append((res, mid)))
    producer.flush()
    deadline = time.time() + 10
    while len(done) < len(payloads) and time.time() < deadline:
        time.sleep(0.01)
    assert len(done) == len(payloads)
    assert all(r == pulsar.Result.Ok for r, _ in done)
    entries = {(m.ledger_id(), m.entry_id()) for _, m in done}
    assert len(entries) == 1, f"expected one batch entry, got {entries}"
    return [m for _, m in done]


def ack_and_wait(consumer, msgs):
    for m in msgs:
        consumer.acknowledge(m)
    # The client groups acks for 100 ms; give it time to send them and the broker to persist.
    time.sleep(1.0)


PAYLOADS = [f"m-{i}".encode() for i in range(10)]
SHARED, EXCLUSIVE = pulsar.ConsumerType.Shared, pulsar.ConsumerType.Exclusive


def subscribe(client, topic, sub_type):
    return client.subscribe(topic, "sub", consumer_type=sub_type, batch_index_ack_enabled=True)


def connect(broker, extra=()):
    url = broker.start(extra=extra).service_url
    return pulsar.Client(url, operation_timeout_seconds=10)


def batch_received(broker, topic, sub_type, extra=()):
    """Starts the broker (extra: more settings), subscribes `sub` (batch-index acks on), sends
    PAYLOADS as one batch; returns the client, the consumer and what it received."""
    client = connect(broker, extra)
    consumer = subscribe(client, topic, sub_type)
    send_batch(batch_producer(client, topic), PAYLOADS)
    return client, consumer, receive_all(consumer)


def test_partly_acked_batch_redelivers_only_unacked(broker):
    topic = "persistent://public/default/batch-acks-shared"
    client, consumer, got = batch_received(broker, topic, SHARED)
    assert sorted(m.data() for m in got) == sorted(PAYLOADS)
    evens = [m for m in got if int(m.data().split(b"-")[1]) % 2 == 0]
    odds = sorted(m.data() for m in got if int(m.data().split(b"-")[1]) % 2 == 1)
    ack_and_wait(consumer, evens)

    # Redelivery of the unacked: the broker sends the entry with its ack_set; the client skips
    # the acked indexes.
    consumer.redeliver_unacknowledged_messages()
    again = receive_all(consumer)
    assert sorted(m.data() for m in again) == odds
    assert all(m.redelivery_count() >= 1 for m in again)

    # A new consumer of the subscription gets the same five.
    consumer.close()
    consumer = subscribe(client, topic, SHARED)
    assert sorted(m.data() for m in receive_all(consumer)) == odds

    # Backlog counts entries: the partly acked batch is still one.
    stats = requests.get(f"{broker.admin_url}/admin/v2/persistent/public/default/"
                         f"batch-acks-shared/stats", timeout=10).json()
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 1
    client.close()

    # The acked indexes survive a crash (persisted in the cursor).
    broker.kill()
    client = connect(broker)
    consumer = subscribe(client, topic, SHARED)
    back = receive_all(consumer)
    assert sorted(m.data() for m in back) == odds
    # Acking the rest completes the entry: nothing comes back and the backlog is empty.
    ack_and_wait(consumer, back)
    consumer.redeliver_unacknowledged_messages()
    assert receive_all(consumer, 1000) == []
    stats = requests.get(f"{broker.admin_url}/admin/v2/persistent/public/default/"
                         f"batch-acks-shared/stats", timeout=10).json()
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 0
    client.close()


def test_cumulative_ack_inside_a_batch(broker):
    topic = "persistent://public/default/batch-acks-cumulative"
    client, consumer, got = batch_received(broker, topic, EXCLUSIVE)
    assert [m.data() for m in got] == PAYLOADS
    consumer.acknowledge_cumulative(got[3])
    time.sleep(1.0)
    consumer.close()
    consumer = subscribe(client, topic, EXCLUSIVE)
    assert [m.data() for m in receive_all(consumer)] == PAYLOADS[4:]
    client.close()


def test_batch_index_acks_off_redelivers_whole_batch(broker):
    # acknowledgmentAtBatchIndexLevelEnabled=false (Pulsar before 4.1): partial acks are ignored.
    topic = "persistent://public/default/batch-acks-off"
    client, consumer, got = batch_received(broker, topic, SHARED,
                                           ["acknowledgmentAtBatchIndexLevelEnabled=false"])
    ack_and_wait(consumer, got[:5])
    consumer.close()
    consumer = subscribe(client, topic, SHARED)
    assert sorted(m.data() for m in receive_all(consumer)) == sorted(PAYLOADS)
    client.close()


def _check_stored(kind, stored, original):
    assert stored != original and len(stored) < len(original) // 4, kind
    if kind == "ZLIB":
        assert zlib.decompress(stored) == original
    elif kind == "ZSTD":
        assert stored[:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic
    elif kind == "SNAPPY":
        # A raw snappy block starts with the uncompressed length as a varint.
        assert read_varint(stored, 0)[0] == len(original)


@pytest.mark.parametrize("kind", ["LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_compressed_payloads_pass_through(broker, kind):
    client = connect(broker)
    ctype = getattr(pulsar.CompressionType, "ZLib" if kind == "ZLIB" else kind)
    topic = f"persistent://public/default/compressed-{kind.lower()}"
    consumer = client.subscribe(topic, "sub")
    original = (b"telemetry-" + kind.encode()) * 4000
    single = client.create_producer(topic, compression_type=ctype, batching_enabled=False)
    single.send(original)
    # The broker stores the compressed entry as sent: examinemessage returns its payload.
    r = requests.get(f"{broker.admin_url}/admin/v2/persistent/public/default/"
                     f"compressed-{kind.lower()}/examinemessage"
                     "?initialPosition=earliest&messagePosition=1", timeout=10)
    assert r.status_code == 200
    _check_stored(kind, r.content, original)
    # A compressed batch too.
    batched = batch_producer(client, topic, n=5, compression_type=ctype)
    parts = [original[:1000] + bytes([i]) for i in range(5)]
    send_batch(batched, parts)
    got = [m.data() for m in receive_all(consumer)]
    assert got == [original] + parts
    client.close()
