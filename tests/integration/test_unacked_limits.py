"""maxUnackedMessagesPerConsumer: a Shared consumer that never acks stops receiving at the limit
while the others go on; it resumes once it acks (at half the limit, as Pulsar)."""

import time
import urllib.request

import pulsar
from pulsar import ConsumerType

from harness.broker import MagnetarProcess
from harness.util import receive_for

LIMIT = 50


def metric(admin_url, name, labels=""):
    """The value of the /metrics sample `name{...}` whose labels contain `labels`."""
    text = urllib.request.urlopen(admin_url + "/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} {labels} not on /metrics")


def test_consumer_that_never_acks_stops_at_the_limit_and_resumes():
    broker = MagnetarProcess([f"maxUnackedMessagesPerConsumer={LIMIT}"])
    endpoint = broker.start()
    try:
        client = pulsar.Client(endpoint.service_url)
        topic = f"persistent://public/default/unacked-{int(time.time() * 1000)}"
        lazy = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared,
                                consumer_name="lazy", receiver_queue_size=500)
        busy = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared,
                                consumer_name="busy", receiver_queue_size=500)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(400):
            producer.send_async(b"%d" % i, None)
        producer.flush()
        held = receive_for(lazy, 2, ack=False)
        done = receive_for(busy, 2, ack=True)
        # The lazy consumer got exactly up to the limit; everything else went to the busy one.
        assert len(held) == LIMIT
        assert len(done) == 400 - LIMIT
        assert metric(endpoint.admin_url, "magnetar_consumers_blocked_on_unacked_messages") == 1
        assert metric(endpoint.admin_url, "magnetar_subscriptions_blocked_on_unacked_messages") == 0
        for m in held[: LIMIT // 2 + 1]:
            lazy.acknowledge(m)
        for i in range(400, 500):
            producer.send_async(b"%d" % i, None)
        producer.flush()
        more = receive_for(lazy, 2, ack=True)
        assert len(more) > 0, "the lazy consumer resumes after acking down to half the limit"
        # The busy consumer got its share of the new messages too: ack them, then nobody is held.
        receive_for(busy, 1, ack=True)
        time.sleep(0.5)  # the client groups acks for up to 100 ms
        assert metric(endpoint.admin_url, "magnetar_consumers_blocked_on_unacked_messages") == 0
        client.close()
    finally:
        broker.close()


def test_subscription_blocked_on_unacked_limit_shows_on_metrics():
    """maxUnackedMessagesPerSubscription: dispatch stops for the whole subscription at the limit
    (Pulsar's pulsar_subscription_blocked_on_unacked_messages is 1, the broker-wide count too)
    and resumes once acks bring the unacked count down to half."""
    broker = MagnetarProcess([f"maxUnackedMessagesPerSubscription={LIMIT}"])
    endpoint = broker.start()
    try:
        client = pulsar.Client(endpoint.service_url)
        topic = f"persistent://public/default/unacked-sub-{int(time.time() * 1000)}"
        a = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared,
                             consumer_name="a", receiver_queue_size=500)
        b = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared,
                             consumer_name="b", receiver_queue_size=500)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(200):
            producer.send_async(b"%d" % i, None)
        producer.flush()
        held_a = receive_for(a, 2, ack=False)
        held_b = receive_for(b, 1, ack=False)
        assert len(held_a) + len(held_b) == LIMIT, "the subscription stops at its unacked limit"
        labels = 'subscription="sub"'
        assert metric(endpoint.admin_url, "pulsar_subscription_blocked_on_unacked_messages",
                      labels) == 1
        assert metric(endpoint.admin_url, "magnetar_subscriptions_blocked_on_unacked_messages") == 1
        assert metric(endpoint.admin_url, "magnetar_consumers_blocked_on_unacked_messages") == 0
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
        assert metric(endpoint.admin_url, "magnetar_subscriptions_blocked_on_unacked_messages") == 0
        assert metric(endpoint.admin_url, "pulsar_subscription_blocked_on_unacked_messages",
                      labels) == 0
        client.close()
    finally:
        broker.close()
