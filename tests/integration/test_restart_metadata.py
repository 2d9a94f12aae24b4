"""Topics, subscriptions, cursor positions and partitioned-topic metadata survive a restart."""

import tempfile

import pulsar
from test_dedup import drain  # noqa: E402

from harness.broker import restartable_magnetar


def test_partitions_and_positions_survive_restart():
    with tempfile.TemporaryDirectory(prefix="magnetar-restart-") as d:
        broker = restartable_magnetar(d)
        url = broker.start(extra=["allowAutoTopicCreationType=partitioned",
                                  "defaultNumPartitions=3"]).service_url
        topic = "persistent://public/default/restart-pt"
        client = pulsar.Client(url)
        assert len(client.get_topic_partitions(topic)) == 3
        consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(30):
            producer.send(b"%d" % i, partition_key=f"k{i}")
        first = sorted(int(x) for x in drain(consumer))
        assert first == list(range(30))
        for i in range(30, 40):
            producer.send(b"%d" % i, partition_key=f"k{i}")
        client.close()
        broker.stop()

        url = broker.start().service_url  # default (non-partitioned) auto-creation now
        client = pulsar.Client(url)
        assert len(client.get_topic_partitions(topic)) == 3
        consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        rest = sorted(int(x) for x in drain(consumer))
        assert rest == list(range(30, 40)), "acked messages stay acked, the rest is delivered"
        client.close()
        broker.stop()
