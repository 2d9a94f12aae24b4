"""maxProducersPerTopic, maxConsumersPerTopic, maxConsumersPerSubscription and
maxSubscriptionsPerTopic: beyond each limit the client gets Pulsar's error, everyone already
connected keeps working, and a freed slot can be taken again."""

import time

import pulsar
import pytest
from pulsar import ConsumerType

from harness.broker import MagnetarProcess


@pytest.fixture(scope="module")
def client():
    broker = MagnetarProcess(["maxProducersPerTopic=2", "maxConsumersPerTopic=3",
                                             "maxConsumersPerSubscription=2",
                                             "maxSubscriptionsPerTopic=2"])
    endpoint = broker.start()
    c = pulsar.Client(endpoint.service_url, operation_timeout_seconds=10)
    yield c
    c.close()
    broker.close()


def receive_any(consumers, seconds=5):
    deadline = time.time() + seconds
    while time.time() < deadline:
        for c in consumers:
            try:
                return c.receive(100).data()
            except pulsar.Timeout:
                pass
    raise AssertionError("nothing received")


def topic(name):
    return f"persistent://public/default/limits-{name}-{int(time.time() * 1000)}"


def test_producers_per_topic(client):
    t = topic("producers")
    a = client.create_producer(t, producer_name="a")
    b = client.create_producer(t, producer_name="b")
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(t, producer_name="c")
    a.send(b"still-serving")
    b.close()
    client.create_producer(t, producer_name="c").send(b"slot-freed")


def test_consumers_per_subscription_and_topic(client):
    t = topic("consumers")
    s1 = [client.subscribe(t, "s1", consumer_type=ConsumerType.Shared) for _ in range(2)]
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(t, "s1", consumer_type=ConsumerType.Shared)
    client.subscribe(t, "s2", consumer_type=ConsumerType.Shared)  # the topic's third consumer
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(t, "s2", consumer_type=ConsumerType.Shared)
    # Those connected still receive.
    p = client.create_producer(t)
    p.send(b"m")
    assert receive_any(s1) == b"m"
    s1[0].close()
    client.subscribe(t, "s1", consumer_type=ConsumerType.Shared)  # the freed slot


def test_subscriptions_per_topic(client):
    t = topic("subs")
    client.subscribe(t, "a").close()
    client.subscribe(t, "b").close()
    with pytest.raises(pulsar.NotAllowedError):
        client.subscribe(t, "c")
    client.subscribe(t, "a").close()  # an existing subscription is not a new one
