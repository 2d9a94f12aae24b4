"""maxUnackedMessagesPerConsumer: a Shared consumer that never acks stops receiving at the limit
while the others go on; it resumes once it acks (at half the limit, as Pulsar)."""

import time
import urllib.request

import pulsar
from pulsar import ConsumerType

from harness.util import receive_for

LIMIT = 50


def metric(admin_url, name, labels=""):
    """The value of the /metrics sample `name{...}` whose labels contain `labels`."""
    text = urllib.request.urlopen(admin_url + "/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} {labels} not on /metrics")


def send_numbers(producer, numbers):
    for i in numbers:
        producer.send_async(b"%d" % i, None)
    producer.flush()


def two_shared_consumers(magnetar, setting, names, n):
    """A broker with setting=LIMIT, two Shared consumers `names` (receiver queues of 500) on
    subscription `sub` of a fresh topic, then n messages sent; returns the broker's admin URL,
    the client, the two consumers and the producer."""
    broker = magnetar([f"{setting}={LIMIT}"])
    client = pulsar.Client(broker.endpoint.service_url)
    topic = f"persistent://public/default/unacked-{int(time.time() * 1000)}"
    consumers = [client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared,
                                  consumer_name=name, receiver_queue_size=500) for name in names]
    producer = client.create_producer(topic, batching_enabled=False)
    send_numbers(producer, range(n))
    return broker.admin_url, client, *consumers, producer


def test_consumer_that_never_acks_stops_at_the_limit_and_resumes(magnetar):
    admin_url, client, lazy, busy, producer = two_shared_consumers(
        magnetar, "maxUnackedMessagesPerConsumer", ["lazy", "busy"], 400)
    held = receive_for(lazy, 2, ack=False)
    done = receive_for(busy, 2, ack=True)
    # The lazy consumer got exactly up to the limit; everything else went to the busy one.
    assert len(held) == LIMIT
    assert len(done) == 400 - LIMIT
    assert metric(admin_url, "magnetar_consumers_blocked_on_unacked_messages") == 1
    assert metric(admin_url, "magnetar_subscriptions_blocked_on_unacked_messages") == 0
    for m in held[: LIMIT // 2 + 1]:
        lazy.acknowledge(m)
    send_numbers(producer, range(400, 500))
    more = receive_for(lazy, 2, ack=True)
    assert len(more) > 0, "the lazy consumer resumes after acking down to half the limit"
    # The busy consumer got its share of the new messages too: ack them, then nobody is held.
    receive_for(busy, 1, ack=True)
    time.sleep(0.5)  # the client groups acks for up to 100 ms
    assert metric(admin_url, "magnetar_consumers_blocked_on_unacked_messages") == 0
    client.close()


def test_subscription_blocked_on_unacked_limit_shows_on_metrics(magnetar):
    """maxUnackedMessagesPerSubscription: dispatch stops for the whole subscription at the limit
    (Pulsar's pulsar_subscription_blocked_on_unacked_messages is 1, the broker-wide count too)
    and resumes once acks bring the unacked count down to half."""
    admin_url, client, a, b, _producer = two_shared_consumers(
        magnetar, "maxUnackedMessagesPerSubscription", ["a", "b"], 200)
    held_a = receive_for(a, 2, ack=False)
    held_b = receive_for(b, 1, ack=False)
    assert len(held_a) + len(held_b) == LIMIT, "the subscription stops at its unacked limit"
    labels = 'subscription="sub"'
    assert metric(admin_url, "pulsar_subscription_blocked_on_unacked_messages", labels) == 1
    assert metric(admin_url, "magnetar_subscriptions_blocked_on_unacked_messages") == 1
    assert metric(admin_url, "magnetar_consumers_blocked_on_unacked_messages") == 0
    for m in held_a:
        a.acknowledge(m)
    for m in held_b:
        b.acknowledge(m)
    # Drain both consumers in turns (acking), so neither sits on unacked prefetched messages.
    rest = 0
    deadline = time.time() + 10
    while LIMIT + rest < 200 and time.time() < deadline:
        rest += len(receive_for(a, 0.3, ack=True)) + len(receive_for(b, 0.3, ack=True))
    assert LIMIT + rest == 200, "dispatch resumed after the acks"
    assert metric(admin_url, "magnetar_subscriptions_blocked_on_unacked_messages") == 0
    assert metric(admin_url, "pulsar_subscription_blocked_on_unacked_messages", labels) == 0
    client.close()
