"""Namespace-level limits (Pulsar's Policies max_* fields, `pulsar-admin namespaces
set-max-producers-per-topic` and friends): stored, shown in the policies, and enforced on the
namespace's topics, with a topic policy taking precedence. Passes on Magnetar and Pulsar."""

import uuid

import pulsar
import pytest
import requests

from harness.util import temp_namespace, wait_for

LIMITS = {
    "maxProducersPerTopic": "max_producers_per_topic",
    "maxConsumersPerTopic": "max_consumers_per_topic",
    "maxConsumersPerSubscription": "max_consumers_per_subscription",
    "maxSubscriptionsPerTopic": "max_subscriptions_per_topic",
    "maxUnackedMessagesPerConsumer": "max_unacked_messages_per_consumer",
    "maxUnackedMessagesPerSubscription": "max_unacked_messages_per_subscription",
}


@pytest.fixture
def namespace(admin_url):
    yield from temp_namespace(admin_url, "lim")


def set_limit(admin_url, ns, name, value):
    r = requests.post(f"{admin_url}/admin/v2/namespaces/{ns}/{name}", json=value, timeout=30)
    assert r.status_code == 204, (name, r.status_code, r.text)


def admitted(create, busy):
    """create() again while it raises `busy` (limits reach Pulsar's loaded topics with its
    asynchronous policies update); fails the test when still refused after 20 s."""
    def attempt():
        try:
            return create()
        except busy:
            return None
    made = wait_for(attempt, 20.0)
    assert made is not None, "still refused after 20 s"
    return made


@pytest.mark.admin
def test_limits_are_stored_and_shown_in_the_policies(admin_url, namespace):
    base = f"{admin_url}/admin/v2/namespaces/{namespace}"
    for i, (name, field) in enumerate(LIMITS.items()):
        assert requests.get(f"{base}/{name}", timeout=30).text in ("", "null")
        set_limit(admin_url, namespace, name, i + 3)
        assert requests.get(f"{base}/{name}", timeout=30).json() == i + 3
        assert requests.get(base, timeout=30).json()[field] == i + 3
    # Bad values are refused with Pulsar's 412 and change nothing.
    r = requests.post(f"{base}/maxProducersPerTopic", json=-1, timeout=30)
    assert r.status_code == 412
    assert "maxProducersPerTopic must be 0 or more" in r.json()["reason"]
    assert requests.get(f"{base}/maxProducersPerTopic", timeout=30).json() == 3
    # A body that is not a number is Pulsar's JSON mapping error, 400.
    r = requests.post(f"{base}/maxProducersPerTopic", json="abc", timeout=30)
    assert r.status_code == 400
    assert requests.get(f"{base}/maxProducersPerTopic", timeout=30).json() == 3
    for name, field in LIMITS.items():
        r = requests.delete(f"{base}/{name}", timeout=30)
        assert r.status_code == 204
        assert requests.get(base, timeout=30).json().get(field) is None  # Pulsar omits it


@pytest.mark.admin
def test_max_producers_per_topic_refuses_the_next_producer(client, admin_url, namespace):
    set_limit(admin_url, namespace, "maxProducersPerTopic", 1)
    topic = f"persistent://{namespace}/p-{uuid.uuid4().hex[:6]}"
    first = client.create_producer(topic)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)
    # Raised while the topic is loaded: applies at once (Pulsar: after its policies update).
    set_limit(admin_url, namespace, "maxProducersPerTopic", 2)
    second = admitted(lambda: client.create_producer(topic), pulsar.ProducerBusy)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)
    # A topic policy takes precedence over the namespace's.
    r = requests.post(f"{admin_url}/admin/v2/persistent/{topic[len('persistent://'):]}/maxProducers",
                      json=3, timeout=30)
    assert r.status_code == 204, r.text
    third = admitted(lambda: client.create_producer(topic), pulsar.ProducerBusy)
    for p in (first, second, third):
        p.close()


@pytest.mark.admin
def test_max_consumers_per_subscription_and_per_topic(client, admin_url, namespace):
    set_limit(admin_url, namespace, "maxConsumersPerSubscription", 1)
    set_limit(admin_url, namespace, "maxConsumersPerTopic", 2)
    topic = f"persistent://{namespace}/c-{uuid.uuid4().hex[:6]}"
    shared = pulsar.ConsumerType.Shared
    a = client.subscribe(topic, "s1", consumer_type=shared)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "s1", consumer_type=shared)  # one per subscription
    b = client.subscribe(topic, "s2", consumer_type=shared)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "s3", consumer_type=shared)  # two on the topic
    set_limit(admin_url, namespace, "maxConsumersPerTopic", 3)
    c = admitted(lambda: client.subscribe(topic, "s3", consumer_type=shared), pulsar.ConsumerBusy)
    for x in (a, b, c):
        x.close()


@pytest.mark.admin
def test_max_subscriptions_per_topic(client, admin_url, namespace):
    set_limit(admin_url, namespace, "maxSubscriptionsPerTopic", 2)
    topic = f"persistent://{namespace}/s-{uuid.uuid4().hex[:6]}"
    a = client.subscribe(topic, "s1")
    b = client.subscribe(topic, "s2")
    with pytest.raises(pulsar.NotAllowedError):
        client.subscribe(topic, "s3")
    a.close()
    b.close()


@pytest.mark.admin
def test_max_unacked_messages_per_consumer_holds_dispatch(client, admin_url, namespace):
    set_limit(admin_url, namespace, "maxUnackedMessagesPerConsumer", 5)
    topic = f"persistent://{namespace}/u-{uuid.uuid4().hex[:6]}"
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                receiver_queue_size=100)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        producer.send(f"m-{i}".encode())
    got = []
    while True:
        try:
            got.append(consumer.receive(timeout_millis=2000))
        except pulsar.Timeout:
            break
    # Pulsar stops dispatching once the consumer holds the limit unacked (it may overshoot by
    # the last read's entries, never to everything).
    assert 5 <= len(got) < 20
    for m in got:
        consumer.acknowledge(m)
    more = consumer.receive(timeout_millis=10000)
    assert more is not None
    producer.close()
    consumer.close()


@pytest.mark.admin
def test_create_namespace_with_policies_body_applies_its_limits(client, admin_url):
    ns = f"public/limb-{uuid.uuid4().hex[:8]}"
    r = requests.put(f"{admin_url}/admin/v2/namespaces/{ns}",
                     json={"max_producers_per_topic": 1}, timeout=30)
    assert r.status_code == 204, r.text
    try:
        assert requests.get(f"{admin_url}/admin/v2/namespaces/{ns}/maxProducersPerTopic",
                            timeout=30).json() == 1
        topic = f"persistent://{ns}/t"
        p = client.create_producer(topic)
        with pytest.raises(pulsar.ProducerBusy):
            client.create_producer(topic)
        p.close()
    finally:
        requests.delete(f"{admin_url}/admin/v2/namespaces/{ns}", params={"force": "true"},
                        timeout=60)
