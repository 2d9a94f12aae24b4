"""Subscription types as a client sees them: who gets which message, and what happens on changes."""

import collections

import pulsar
import pytest
from pulsar import ConsumerType

from helpers import assert_nothing, predicted_failover_active, receive_all, receive_n, texts


def test_exclusive_gets_everything_in_order(client, topic):
    consumer = client.subscribe(topic, "sub", consumer_type=ConsumerType.Exclusive)
    other_sub = client.subscribe(topic, "other", consumer_type=ConsumerType.Exclusive)
    producer = client.create_producer(topic)
    for i in range(100):
        producer.send_async(f"{i}".encode(), None)
    producer.flush()
    want = [str(i) for i in range(100)]
    assert texts(receive_n(consumer, 100)) == want
    # Each subscription gets its own copy of the stream.
    assert texts(receive_n(other_sub, 100)) == want


def test_shared_spreads_messages_without_duplicates(client, topic):
    consumers = [client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared,
                                  receiver_queue_size=10, consumer_name=f"c{i}") for i in range(2)]
    producer = client.create_producer(topic)
    n = 200
    for i in range(n):
        producer.send_async(f"{i}".encode(), None)
    producer.flush()
    per_consumer = {0: [], 1: []}
    idle_rounds = 0
    while sum(len(v) for v in per_consumer.values()) < n and idle_rounds < 10:
        progressed = False
        for i, c in enumerate(consumers):
            try:
                m = c.receive(200)
            except pulsar.Timeout:
                continue
            per_consumer[i].append(int(m.data()))
            c.acknowledge(m)
            progressed = True
        idle_rounds = 0 if progressed else idle_rounds + 1
    everything = per_consumer[0] + per_consumer[1]
    assert sorted(everything) == list(range(n)), "each message exactly once"
    assert per_consumer[0] and per_consumer[1], "both consumers got messages"
    for i in (0, 1):
        assert per_consumer[i] == sorted(per_consumer[i]), "dispatch order kept per consumer"


@pytest.mark.parametrize("variant", range(3))
def test_failover_active_consumer_and_switch_over(client, topic, variant):
    topic = f"{topic}-{variant}"
    names = ["fo-a", "fo-b", "fo-c"]
    consumers = {n: client.subscribe(topic, "sub", consumer_type=ConsumerType.Failover,
                                     consumer_name=n) for n in names}
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(f"{i}".encode())

    active = predicted_failover_active(topic, names)
    got = receive_n(consumers[active], 10)
    assert texts(got) == [str(i) for i in range(10)]
    for n in names:
        if n != active:
            assert_nothing(consumers[n], 500)

    # Ack the first 4, close the active consumer with the rest unacked: the next active consumer
    # (chosen among the remaining ones the same way) gets messages 4..9 again, in order, then new
    # ones.
    for m in got[:4]:
        consumers[active].acknowledge(m)
    consumers[active].close()
    remaining = [n for n in names if n != active]
    nxt = predicted_failover_active(topic, remaining)
    redelivered = receive_n(consumers[nxt], 6)
    assert texts(redelivered) == [str(i) for i in range(4, 10)]
    assert [m.redelivery_count() for m in redelivered] == [0] * 6
    producer.send(b"10")
    assert texts(receive_n(consumers[nxt], 1)) == ["10"]
    for n in remaining:
        if n != nxt:
            assert_nothing(consumers[n], 500)


def test_failover_newcomer_can_take_over(client, topic):
    """A consumer joining a Failover subscription becomes active when the ring says so, and the
    messages the old active consumer had not acked move to it."""
    # Find a topic/name combination where the newcomer wins (deterministic, by Pulsar's ring).
    for attempt in range(50):
        t = f"{topic}-{attempt}"
        if predicted_failover_active(t, ["first"]) == "first" and \
                predicted_failover_active(t, ["first", "second"]) == "second":
            break
    else:
        pytest.fail("no topic name found where the newcomer wins")
    first = client.subscribe(t, "sub", consumer_type=ConsumerType.Failover, consumer_name="first")
    producer = client.create_producer(t)
    producer.send(b"x0")
    assert texts(receive_n(first, 1)) == ["x0"]  # received, not acked
    second = client.subscribe(t, "sub", consumer_type=ConsumerType.Failover,
                              consumer_name="second")
    producer.send(b"x1")
    got = receive_n(second, 2)
    assert texts(got) == ["x0", "x1"]
    # x0 travelled from one consumer to the other without being nacked: count stays 0.
    assert [m.redelivery_count() for m in got] == [0, 0]
    assert_nothing(first, 500)


def test_key_shared_keys_stick_to_one_consumer(client, topic):
    consumers = [client.subscribe(topic, "sub", consumer_type=ConsumerType.KeyShared,
                                  consumer_name=f"ks{i}") for i in range(3)]
    producer = client.create_producer(topic, batching_enabled=False)
    keys = [f"key-{k}" for k in range(30)]
    rounds = 20
    for r in range(rounds):
        for k in keys:
            producer.send_async(f"{k}:{r}".encode(), None, partition_key=k)
    producer.flush()

    owner = {}
    order = collections.defaultdict(list)
    total = 0
    for i, c in enumerate(consumers):
        for m in receive_all(c):
            k, r = m.data().decode().split(":")
            assert m.partition_key() == k
            assert owner.setdefault(k, i) == i, f"{k} delivered to two consumers"
            order[k].append(int(r))
            c.acknowledge(m)
            total += 1
    assert total == len(keys) * rounds
    for k in keys:
        assert order[k] == list(range(rounds)), f"{k} out of order"
    assert len(set(owner.values())) >= 2, "keys spread over consumers"

    # Stability: with one consumer gone, keys of the others stay where they were and the gone
    # consumer's keys move to the survivors.
    gone = owner[keys[0]]
    consumers[gone].close()
    for k in keys:
        producer.send_async(f"{k}:{rounds}".encode(), None, partition_key=k)
    producer.flush()
    new_owner = {}
    for i, c in enumerate(consumers):
        if i == gone:
            continue
        for m in receive_all(c):
            k, r = m.data().decode().split(":")
            assert int(r) == rounds
            assert new_owner.setdefault(k, i) == i
            c.acknowledge(m)
    assert sorted(new_owner) == sorted(keys)
    for k in keys:
        if owner[k] != gone:
            assert new_owner[k] == owner[k], f"{k} moved although its consumer stayed"


def test_key_shared_messages_without_key_all_delivered(client, topic):
    consumers = [client.subscribe(topic, "sub", consumer_type=ConsumerType.KeyShared,
                                  consumer_name=f"nk{i}") for i in range(2)]
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(50):
        producer.send_async(f"{i}".encode(), None)
    producer.flush()
    got = {i: [int(x) for x in texts(receive_all(c))] for i, c in enumerate(consumers)}
    # Every keyless message arrives exactly once. Pulsar 4.2 does not pin keyless messages to one
    # consumer: it spreads them over the Key_Shared consumers (observed ~50/50).
    assert sorted(got[0] + got[1]) == list(range(50))
    assert got[0] and got[1], "keyless messages spread over both consumers"
    for i in (0, 1):
        assert got[i] == sorted(got[i])


def test_subscription_type_mismatch_is_consumer_busy(client, topic):
    client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub", consumer_type=ConsumerType.Failover)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub", consumer_type=ConsumerType.Exclusive)
    # A second Shared consumer on it is fine.
    client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared)
