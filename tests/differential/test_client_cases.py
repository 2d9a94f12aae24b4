"""Client-visible cases the official clients depend on (message ids of partitions, ...), checked
with the official Python client against Magnetar and the reference Pulsar alike."""

import uuid

import pulsar
import pytest
import requests

from helpers import receive_n


@pytest.fixture
def partitioned_topic(admin_url):
    name = f"public/default/parted-{uuid.uuid4().hex[:8]}"
    r = requests.put(f"{admin_url}/admin/v2/persistent/{name}/partitions", json=3, timeout=30)
    assert r.status_code == 204, r.text
    yield f"persistent://{name}"
    requests.delete(f"{admin_url}/admin/v2/persistent/{name}/partitions",
                    params={"force": "true"}, timeout=30)


@pytest.mark.admin
def test_received_ids_of_a_partitioned_topic_carry_the_partition(client, partitioned_topic):
    consumer = client.subscribe(partitioned_topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(partitioned_topic, batching_enabled=False)
    sent = {}
    for i in range(30):
        msg_id = producer.send(f"m-{i}".encode(), partition_key=f"k-{i}")
        assert 0 <= msg_id.partition() < 3
        sent[f"m-{i}"] = (msg_id.ledger_id(), msg_id.entry_id(), msg_id.partition())
    got = receive_n(consumer, 30)
    partitions = set()
    for m in got:
        mid = m.message_id()
        # The id a consumer gets is the id the producer was given, partition included.
        assert (mid.ledger_id(), mid.entry_id(), mid.partition()) == sent[m.data().decode()]
        assert m.topic_name().endswith(f"-partition-{mid.partition()}")
        partitions.add(mid.partition())
        consumer.acknowledge(m)
    assert len(partitions) > 1, "keys spread over the partitions"
    producer.close()
    consumer.close()


@pytest.mark.admin
def test_reader_of_a_partition_stops_at_its_last_message(client, partitioned_topic):
    partition = partitioned_topic + "-partition-1"
    producer = client.create_producer(partition, batching_enabled=False)
    for i in range(5):
        producer.send(f"r-{i}".encode())
    reader = client.create_reader(partition, pulsar.MessageId.earliest)
    seen = []
    while reader.has_message_available():
        m = reader.read_next(10_000)
        assert m.message_id().partition() == 1
        seen.append(m.data())
        assert len(seen) <= 5, "has_message_available() stays true past the last message"
    assert seen == [f"r-{i}".encode() for i in range(5)]
    reader.close()
    producer.close()
