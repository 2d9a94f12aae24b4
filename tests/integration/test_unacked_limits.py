"""maxUnackedMessagesPerConsumer: a Shared consumer that never acks stops receiving at the limit
while the others go on; it resumes once it acks (at half the limit, as Pulsar)."""

import os
import sys
import time

import pulsar
from pulsar import ConsumerType

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "differential"))
from brokers import MagnetarProcess  # noqa: E402

LIMIT = 50


def receive_for(consumer, seconds, ack):
    out = []
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            m = consumer.receive(200)
        except pulsar.Timeout:
            continue
        out.append(m)
        if ack:
            consumer.acknowledge(m)
    return out


def test_consumer_that_never_acks_stops_at_the_limit_and_resumes():
    broker = MagnetarProcess(extra_settings=[f"maxUnackedMessagesPerConsumer={LIMIT}"])
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
        for m in held[: LIMIT // 2 + 1]:
            lazy.acknowledge(m)
        for i in range(400, 500):
            producer.send_async(b"%d" % i, None)
        producer.flush()
        more = receive_for(lazy, 2, ack=True)
        assert len(more) > 0, "the lazy consumer resumes after acking down to half the limit"
        client.close()
    finally:
        broker.stop()
