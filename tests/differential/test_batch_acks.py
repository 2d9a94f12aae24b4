"""Batch-index acknowledgements (PIP-54) and compressed batches, as Pulsar 4.2.4 answers them.

Pulsar's rules as observed with the official client and batch_index_ack_enabled (asserted below):
- acknowledgmentAtBatchIndexLevelEnabled is on by default (since 4.1): acking some messages of a
  batch sends an ack_set; a redelivery, or a new consumer of the subscription, gets the entry again
  with the broker's ack_set and the client skips the acked messages;
- a cumulative ack of a message inside a batch acks the batch up to it: a new consumer gets the
  rest of the batch only;
- the entry stays in the backlog until every message of it is acked;
- compressed batches (LZ4, ZLIB, ZSTD, SNAPPY) reach the consumer as sent.
"""

import time

import pulsar
import pytest
import requests
from pulsar import ConsumerType

from helpers import receive_all

PAYLOADS = [f"m-{i}".encode() for i in range(10)]


def send_one_batch(client, topic, payloads, **kw):
    p = client.create_producer(topic, batching_enabled=True, batching_max_messages=len(payloads),
                               batching_max_publish_delay_ms=60000, **kw)
    ids = []
    for x in payloads:
        p.send_async(x, lambda res, mid: ids.append(mid))
    p.flush()
    deadline = time.time() + 10
    while len(ids) < len(payloads) and time.time() < deadline:
        time.sleep(0.01)
    assert len({(m.ledger_id(), m.entry_id()) for m in ids}) == 1, "one entry"
    return p


def subscribe(client, topic, sub_type):
    return client.subscribe(topic, "sub", consumer_type=sub_type, batch_index_ack_enabled=True)


def data(msgs):
    return sorted(m.data() for m in msgs)


@pytest.mark.parametrize("sub_type", [ConsumerType.Shared, ConsumerType.KeyShared],
                         ids=["Shared", "KeyShared"])
def test_partly_acked_batch_comes_back_without_the_acked(client, topic, sub_type):
    consumer = subscribe(client, topic, sub_type)
    send_one_batch(client, topic, PAYLOADS)
    got = receive_all(consumer)
    assert data(got) == sorted(PAYLOADS)
    for m in got[:4]:
        consumer.acknowledge(m)
    time.sleep(0.5)  # past the client's 100 ms ack grouping
    rest = sorted(m.data() for m in got[4:])
    consumer.redeliver_unacknowledged_messages()
    assert data(receive_all(consumer)) == rest
    consumer.close()
    consumer = subscribe(client, topic, sub_type)
    back = receive_all(consumer)
    assert data(back) == rest
    for m in back:
        consumer.acknowledge(m)
    time.sleep(0.5)
    consumer.redeliver_unacknowledged_messages()
    assert receive_all(consumer) == []


def test_cumulative_ack_inside_a_batch(client, topic):
    consumer = subscribe(client, topic, ConsumerType.Exclusive)
    send_one_batch(client, topic, PAYLOADS)
    got = receive_all(consumer)
    assert [m.data() for m in got] == PAYLOADS
    consumer.acknowledge_cumulative(got[5])
    time.sleep(0.5)
    consumer.close()
    consumer = subscribe(client, topic, ConsumerType.Exclusive)
    assert [m.data() for m in receive_all(consumer)] == PAYLOADS[6:]


def test_backlog_counts_a_partly_acked_batch(client, topic, admin_url):
    consumer = subscribe(client, topic, ConsumerType.Shared)
    send_one_batch(client, topic, PAYLOADS)
    got = receive_all(consumer)
    for m in got[:9]:
        consumer.acknowledge(m)
    time.sleep(0.5)
    path = topic.replace("persistent://", "")
    stats = requests.get(f"{admin_url}/admin/v2/persistent/{path}/stats", timeout=10).json()
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 1
    consumer.acknowledge(got[9])
    time.sleep(0.5)
    stats = requests.get(f"{admin_url}/admin/v2/persistent/{path}/stats", timeout=10).json()
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 0


@pytest.mark.parametrize("kind", ["LZ4", "ZLib", "ZSTD", "SNAPPY"])
def test_compressed_batches_arrive_as_sent(client, topic, kind):
    consumer = client.subscribe(topic, "sub")
    parts = [(b"sensor-%d," % i) * 300 for i in range(5)]
    send_one_batch(client, topic, parts, compression_type=getattr(pulsar.CompressionType, kind))
    assert [m.data() for m in receive_all(consumer)] == parts
