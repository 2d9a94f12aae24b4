"""Topics, subscriptions, cursor positions, partitioned-topic metadata and schemas survive a
restart."""

import tempfile
import time

import pulsar
import pytest
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


def wait_web(web):
    """Waits until the admin API answers (the ports file may list it before it accepts)."""
    import requests
    deadline = time.time() + 20
    while True:
        try:
            return requests.get(f"{web}/admin/v2/clusters", timeout=5)
        except requests.ConnectionError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)


def test_schemas_topic_policies_and_schema_policies_survive_restart():
    import requests
    from pulsar.schema import Integer, JsonSchema, Record, String, StringSchema

    class Point(Record):
        x = Integer(required=True)
        label = String(required=True)

    with tempfile.TemporaryDirectory(prefix="magnetar-restart-schema-") as d:
        broker = restartable_magnetar(d)
        url = broker.start().service_url
        web = broker.admin_url
        wait_web(web)
        topic = "persistent://public/default/restart-schema"
        client = pulsar.Client(url)
        client.create_producer(topic, schema=JsonSchema(Point)).send(Point(x=1, label="a"))
        ns = f"{web}/admin/v2/namespaces/public/default"
        assert requests.post(ns + "/isAllowAutoUpdateSchema", json=False,
                             timeout=10).status_code == 204
        policy = f"{web}/admin/v2/persistent/public/default/restart-schema/maxConsumers"
        assert requests.post(policy, json=7, timeout=10).status_code == 204
        client.close()
        # No clean shutdown: the metadata store wrote each record before the broker answered.
        broker.kill()

        url = broker.start().service_url
        web = broker.admin_url
        wait_web(web)
        client = pulsar.Client(url)
        got = requests.get(f"{web}/admin/v2/schemas/public/default/restart-schema/schema",
                           timeout=10).json()
        assert (got["version"], got["type"]) == (0, "JSON")
        ns = f"{web}/admin/v2/namespaces/public/default"  # a new port
        assert requests.get(ns + "/isAllowAutoUpdateSchema", timeout=10).json() is False
        policy = f"{web}/admin/v2/persistent/public/default/restart-schema/maxConsumers"
        assert requests.get(policy, timeout=10).json() == 7
        with pytest.raises(pulsar.exceptions.IncompatibleSchema):
            client.create_producer(topic, schema=StringSchema())
        consumer = client.subscribe(topic, "s", schema=JsonSchema(Point),
                                    initial_position=pulsar.InitialPosition.Earliest)
        msg = consumer.receive(timeout_millis=10000)
        assert msg.value().label == "a"
        client.close()
        broker.stop()


def test_namespace_unacked_limit_applies_to_a_topic_loaded_after_restart():
    import requests

    with tempfile.TemporaryDirectory(prefix="magnetar-restart-limits-") as d:
        broker = restartable_magnetar(d)
        url = broker.start().service_url
        web = broker.admin_url
        wait_web(web)
        ns = f"{web}/admin/v2/namespaces/public/default"
        assert requests.post(ns + "/maxUnackedMessagesPerConsumer", json=2,
                             timeout=10).status_code == 204
        topic = "persistent://public/default/restart-unacked"
        client = pulsar.Client(url)
        client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared).close()
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(5):
            producer.send(b"%d" % i)
        client.close()
        broker.kill()

        url = broker.start().service_url
        wait_web(broker.admin_url)
        client = pulsar.Client(url)
        consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        got = []
        try:
            while True:
                got.append(consumer.receive(timeout_millis=2000))
        except pulsar.Timeout:
            pass
        # The limit holds for the subscription recovered from storage, as for a new one.
        assert len(got) == 2
        client.close()
        broker.stop()
