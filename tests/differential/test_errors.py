"""Invalid requests and the error a client sees for each (Pulsar 4.2's answers).

Broker errors reach Python as exceptions named after the protocol's ServerError values:
ProducerBusy, ProducerFenced, ConsumerBusy, TopicNotFound, NotAllowedError, BrokerMetadataError.
"""

import pulsar
import pytest
from pulsar import ConsumerType, ProducerAccessMode

from helpers import assert_nothing, receive_n, texts


def test_producer_name_clash_is_producer_busy(client, topic):
    first = client.create_producer(topic, producer_name="same-name")
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic, producer_name="same-name")
    # The first one is unaffected, and the name is free again once it closes.
    first.send(b"still-works")
    first.close()
    client.create_producer(topic, producer_name="same-name").send(b"reused")


def test_new_producer_gets_generated_name_and_no_sequence(client, topic):
    p = client.create_producer(topic)
    assert p.producer_name()  # the broker assigns one
    assert p.last_sequence_id() == -1
    q = client.create_producer(topic)
    assert q.producer_name() != p.producer_name()


def test_exclusive_producer_access_mode(client, topic):
    shared = client.create_producer(topic)
    # Exclusive while any producer is connected: fenced.
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
    shared.close()
    exclusive = client.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
    # A Shared producer while an Exclusive one holds the topic: busy.
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)
    exclusive.send(b"ok")


def test_second_exclusive_consumer_is_consumer_busy(client, topic):
    first = client.subscribe(topic, "sub", consumer_type=ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub", consumer_type=ConsumerType.Exclusive)
    # The first consumer still works; after it closes the subscription accepts a new one.
    client.create_producer(topic).send(b"m")
    assert texts(receive_n(first, 1)) == ["m"]
    first.close()
    client.subscribe(topic, "sub", consumer_type=ConsumerType.Exclusive)


@pytest.mark.parametrize("name", ["persistent://no-such-tenant/ns/t",
                                  "persistent://public/no-such-namespace/t"],
                         ids=["tenant", "namespace"])
def test_missing_namespace_is_topic_not_found(client, name):
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer(name)
    with pytest.raises(pulsar.TopicNotFound):
        client.subscribe(name, "sub")


def test_partition_name_without_partitioned_topic_is_not_allowed(client, topic):
    with pytest.raises(pulsar.NotAllowedError):
        client.create_producer(f"{topic}-partition-3")
    with pytest.raises(pulsar.NotAllowedError):
        client.subscribe(f"{topic}-partition-3", "sub")


def test_unusual_but_legal_topic_names_work(client, topic):
    for suffix in ["a:b", "a=b", "x.y.z", "UPPER_lower-09"]:
        name = f"{topic}-{suffix}"
        consumer = client.subscribe(name, "sub")
        client.create_producer(name).send(suffix.encode())
        m = receive_n(consumer, 1)[0]
        assert m.data() == suffix.encode() and m.topic_name() == name


def test_message_too_big(client, topic):
    """The limit is the max_message_size the broker announces in CONNECTED (5 MiB by default),
    checked by the client before sending; a message just under it goes through."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=False)
    with pytest.raises(pulsar.MessageTooBig):
        producer.send(b"x" * (5 * 1024 * 1024))
    with pytest.raises(pulsar.MessageTooBig):
        producer.send(b"x" * (6 * 1024 * 1024))
    producer.send(b"small-after-too-big")
    assert texts(receive_n(consumer, 1)) == ["small-after-too-big"]


def test_unsubscribe_with_other_consumers_connected(client, topic):
    a = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared)
    b = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared)
    # Pulsar refuses with ServerError MetadataError ("Unconnected or shared consumer attempting
    # to unsubscribe"); the subscription and both consumers remain.
    with pytest.raises(pulsar.BrokerMetadataError):
        a.unsubscribe()
    producer = client.create_producer(topic)
    producer.send(b"still-subscribed")
    got = []
    for c in (a, b):
        try:
            got.append(c.receive(3000).data())
        except pulsar.Timeout:
            pass
    assert got == [b"still-subscribed"]
    a.close()
    b.unsubscribe()  # the only consumer left may unsubscribe
    # The subscription is gone: a new one at Latest does not see the old message.
    again = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared)
    assert_nothing(again, 1000)


def test_unsubscribe_failover_with_standby_connected(client, topic):
    a = client.subscribe(topic, "sub", consumer_type=ConsumerType.Failover, consumer_name="a")
    b = client.subscribe(topic, "sub", consumer_type=ConsumerType.Failover, consumer_name="b")
    with pytest.raises(pulsar.BrokerMetadataError):
        a.unsubscribe()
    with pytest.raises(pulsar.BrokerMetadataError):
        b.unsubscribe()


def test_unsubscribe_removes_the_subscription(client, topic):
    consumer = client.subscribe(topic, "sub", consumer_type=ConsumerType.Exclusive)
    producer = client.create_producer(topic)
    producer.send(b"before")
    consumer.unsubscribe()
    producer.send(b"between")
    again = client.subscribe(topic, "sub", consumer_type=ConsumerType.Exclusive)
    assert_nothing(again, 1000)  # a new subscription starts at Latest
    producer.send(b"after")
    assert texts(receive_n(again, 1)) == ["after"]
