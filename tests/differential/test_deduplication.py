"""Message deduplication by namespace policy, as Pulsar does it: per producer name, a publish
whose sequence id is not above the last stored one is answered without being stored, and a
producer that comes back under the same name learns its last sequence id (ProducerSuccess)."""

import uuid
from collections.abc import Iterator

import pulsar
import pytest
import requests

from harness.util import temp_namespace
from helpers import assert_nothing, receive_n, texts


@pytest.fixture
def dedup_namespace(admin_url: str) -> Iterator[str]:
    for ns in temp_namespace(admin_url, "dedup"):
        r = requests.post(f"{admin_url}/admin/v2/namespaces/{ns}/deduplication", json=True,
                          timeout=30)
        assert r.status_code == 204, r.text
        yield ns


@pytest.mark.admin
def test_resent_sequence_ids_are_stored_once(client: pulsar.Client, dedup_namespace: str) -> None:
    topic = f"persistent://{dedup_namespace}/t-{uuid.uuid4().hex[:8]}"
    name = f"dedup-producer-{uuid.uuid4().hex[:6]}"
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, producer_name=name, batching_enabled=False)
    for i in range(5):
        producer.send(f"m-{i}".encode(), sequence_id=i)
    producer.send(b"again-3", sequence_id=3)  # a resend: answered, not stored
    producer.close()

    # The same name again: the broker tells it where it was, and it goes on from there.
    producer = client.create_producer(topic, producer_name=name, batching_enabled=False)
    assert producer.last_sequence_id() == 4
    producer.send(b"again-4", sequence_id=4)
    producer.send(b"m-5", sequence_id=5)
    producer.close()

    assert texts(receive_n(consumer, 6)) == [f"m-{i}" for i in range(6)]
    assert_nothing(consumer)
    # Another producer name has its own sequence.
    other = client.create_producer(topic, producer_name=name + "-other", batching_enabled=False)
    assert other.last_sequence_id() == -1
    other.send(b"o-0", sequence_id=0)
    other.close()
    assert texts(receive_n(consumer, 1)) == ["o-0"]
    consumer.close()
