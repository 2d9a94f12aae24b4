"""Acknowledgements and redelivery: what comes back, in which order, with which redelivery count.

Pulsar's rules as observed with the official client (asserted below):
- A consumer that closes with unacked messages: they are delivered again, redelivery_count 0
  (closing is not a redelivery request), to another consumer of the subscription or to the next
  one.
- Negative ack on Shared/Key_Shared: only the nacked messages come back, redelivery_count +1 each
  time.
- Negative ack on Exclusive/Failover: the client asks for a redelivery of everything unacked; the
  broker rewinds to the first unacked message, so the unacked tail comes back in order with
  redelivery_count 0.
"""

import time

import pytest
import requests
from pulsar import ConsumerType

from helpers import assert_nothing, receive_all, receive_n, texts

SINGLE = [ConsumerType.Exclusive, ConsumerType.Failover]
MULTI = [ConsumerType.Shared, ConsumerType.KeyShared]
ALL = SINGLE + MULTI


def type_id(t):
    return str(t).split(".")[-1]


def produce(client, topic, n, prefix=""):
    p = client.create_producer(topic, batching_enabled=False)
    for i in range(n):
        p.send_async(f"{prefix}{i}".encode(), None)
    p.flush()
    return p


def consumer_with(client, topic, sub_type, n, **options):
    """Subscribes `sub` (consumer options), produces n messages "0", "1", ...; returns the
    consumer and the n messages it received."""
    consumer = client.subscribe(topic, "sub", consumer_type=sub_type, **options)
    produce(client, topic, n)
    return consumer, receive_n(consumer, n)


def reopened_after_acks(client, topic, sub_type, n, individually=None, cumulative=None):
    """consumer_with(n) that acks got[individually] one by one or cumulatively up to
    got[cumulative], then closes; returns a new consumer of the subscription."""
    consumer, got = consumer_with(client, topic, sub_type, n)
    for m in got[individually] if individually else []:
        consumer.acknowledge(m)
    if cumulative is not None:
        consumer.acknowledge_cumulative(got[cumulative])
    consumer.close()
    return client.subscribe(topic, "sub", consumer_type=sub_type)


@pytest.mark.parametrize("sub_type", ALL, ids=type_id)
def test_individual_acks_survive_reconnect(client, topic, sub_type):
    again = reopened_after_acks(client, topic, sub_type, 10,
                                individually=slice(None, None, 2))  # ack 0, 2, 4, 6, 8
    back = receive_n(again, 5)
    assert texts(back) == ["1", "3", "5", "7", "9"]
    assert [m.redelivery_count() for m in back] == [0] * 5
    assert_nothing(again)


@pytest.mark.parametrize("sub_type", SINGLE, ids=type_id)
def test_cumulative_ack(client, topic, sub_type):
    again = reopened_after_acks(client, topic, sub_type, 10, cumulative=5)
    assert texts(receive_n(again, 4)) == ["6", "7", "8", "9"]
    assert_nothing(again)


def test_cumulative_ack_of_batched_messages(client, topic):
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10)
    for i in range(30):
        producer.send_async(f"{i}".encode(), None)
    producer.flush()
    got = receive_n(consumer, 30)
    consumer.acknowledge_cumulative(got[19])  # last message of the second batch
    consumer.close()
    again = client.subscribe(topic, "sub")
    assert texts(receive_n(again, 10)) == [str(i) for i in range(20, 30)]
    assert_nothing(again)


@pytest.mark.parametrize("sub_type", ALL, ids=type_id)
def test_unacked_messages_come_back_after_close(client, topic, sub_type):
    again = reopened_after_acks(client, topic, sub_type, 20, individually=slice(0, 5))
    back = receive_n(again, 15)
    assert texts(back) == [str(i) for i in range(5, 20)]
    assert [m.redelivery_count() for m in back] == [0] * 15
    assert_nothing(again)


def test_shared_unacked_messages_move_to_remaining_consumer(client, topic):
    a = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared, receiver_queue_size=5,
                         consumer_name="a")
    b = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared, receiver_queue_size=5,
                         consumer_name="b")
    produce(client, topic, 10)
    got_a = receive_n(a, 3)
    for m in got_a[:1]:
        a.acknowledge(m)
    a.close()
    rest = []
    for m in receive_all(b):
        rest.append(m)
        b.acknowledge(m)
    numbers = sorted(int(x) for x in texts(rest))
    acked_by_a = int(got_a[0].data())
    assert numbers == [i for i in range(10) if i != acked_by_a]
    # Moving a closed consumer's messages is not a redelivery request: counts stay 0.
    assert all(m.redelivery_count() == 0 for m in rest)


@pytest.mark.parametrize("sub_type", MULTI, ids=type_id)
def test_negative_ack_redelivers_only_that_message_with_count(client, topic, sub_type):
    consumer, got = consumer_with(client, topic, sub_type, 5, negative_ack_redelivery_delay_ms=100)
    for m in got:
        if m.data() != b"2":
            consumer.acknowledge(m)
    for expected_count in (1, 2, 3):
        consumer.negative_acknowledge(got[2] if expected_count == 1 else m)
        m = receive_n(consumer, 1)[0]
        assert m.data() == b"2"
        assert m.redelivery_count() == expected_count
    consumer.acknowledge(m)
    assert_nothing(consumer)


@pytest.mark.parametrize("sub_type", SINGLE, ids=type_id)
def test_negative_ack_on_single_consumer_rewinds_unacked_tail(broker, client, topic, sub_type):
    consumer, got = consumer_with(client, topic, sub_type, 10,
                                  negative_ack_redelivery_delay_ms=100)
    for m in got[:5]:
        consumer.acknowledge(m)
    # The client groups acks for 100 ms, as long as the nack delay: wait until the broker holds
    # them, else the rewind (sent first) would bring 0..4 back too, on either broker.
    stats = f"{broker.admin_url}/admin/v2/{topic.replace('://', '/')}/stats"
    deadline = time.time() + 10
    while requests.get(stats, timeout=5).json()["subscriptions"]["sub"]["msgBacklog"] != 5:
        assert time.time() < deadline, "the broker never held the five acks"
        time.sleep(0.05)
    consumer.negative_acknowledge(got[6])
    back = receive_n(consumer, 5)
    assert texts(back) == ["5", "6", "7", "8", "9"]
    assert [m.redelivery_count() for m in back] == [0] * 5


@pytest.mark.parametrize("sub_type", MULTI, ids=type_id)
def test_redeliver_unacknowledged_increments_counts(client, topic, sub_type):
    consumer, got = consumer_with(client, topic, sub_type, 6)
    consumer.acknowledge(got[0])
    consumer.redeliver_unacknowledged_messages()
    back = receive_n(consumer, 5)
    assert texts(back) == ["1", "2", "3", "4", "5"]
    assert [m.redelivery_count() for m in back] == [1] * 5
    for m in back:
        consumer.acknowledge(m)
    assert_nothing(consumer)


def test_redelivery_count_resets_when_last_consumer_leaves(client, topic):
    """Pulsar keeps redelivery counts per subscription only while it has consumers."""
    consumer, (m,) = consumer_with(client, topic, ConsumerType.Shared, 1,
                                   negative_ack_redelivery_delay_ms=100)
    consumer.negative_acknowledge(m)
    m = receive_n(consumer, 1)[0]
    assert m.redelivery_count() == 1
    consumer.close()
    again = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared)
    m = receive_n(again, 1)[0]
    assert m.redelivery_count() == 0
