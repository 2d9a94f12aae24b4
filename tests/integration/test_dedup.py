"""Broker-side deduplication (brokerDeduplicationEnabled) with the official Python client against
a real broker process, including SIGKILL of the broker under a deduplicated publish load."""

import time

import pulsar
import pytest

DEDUP = ["brokerDeduplicationEnabled=true"]


@pytest.fixture
def broker(restartable):
    """A restartable broker with brokerDeduplicationEnabled=true (not started yet)."""
    return restartable(DEDUP)


def drain(consumer, idle_ms=1500):
    out = []
    while True:
        try:
            m = consumer.receive(idle_ms)
        except pulsar.Timeout:
            return out
        out.append(m.data())
        consumer.acknowledge(m)


def test_duplicates_are_receipted_and_not_stored(broker):
    url = broker.start().service_url
    client = pulsar.Client(url)
    topic = "persistent://public/default/dedup-basic"
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name="gw-1", batching_enabled=False)
    for i in range(10):
        producer.send(b"%d" % i, sequence_id=i)
    # A resend of ids already persisted is answered (message id -1:-1) and not stored again.
    dup = producer.send(b"5", sequence_id=5)
    assert (dup.ledger_id(), dup.entry_id()) == (-1, -1)
    producer.close()
    # A new producer with the same name learns where it left off.
    again = client.create_producer(topic, producer_name="gw-1", batching_enabled=False)
    assert again.last_sequence_id() == 9
    again.send(b"10", sequence_id=10)
    assert drain(consumer) == [b"%d" % i for i in range(11)]
    client.close()


def create_retrying(client, topic, **kw):
    """The closed producer of the previous round may still be re-registering after the restart
    (its reconnect raced its close), so the name can be briefly busy, as on Pulsar."""
    deadline = time.time() + 20
    while True:
        try:
            return client.create_producer(topic, producer_name="gw-crash",
                                          batching_enabled=False, **kw)
        except pulsar.ProducerBusy:
            if time.time() > deadline:
                raise
            time.sleep(0.5)


def test_broker_killed_under_load_every_message_once(broker):
    url = broker.start().service_url
    port = broker.port
    topic = "persistent://public/default/dedup-crash"
    total = 3000
    client = pulsar.Client(url, operation_timeout_seconds=30)
    client.subscribe(topic, "sub").close()  # the subscription exists from the start
    receipted = set()
    next_seq = 0
    for _round in range(3):
        producer = create_retrying(client, topic, send_timeout_millis=0, block_if_queue_full=True)
        # The producer resumes after the last persisted id and resends everything after it.
        next_seq = producer.last_sequence_id() + 1
        target = min(total, next_seq + 1500)
        for seq in range(next_seq, target):
            producer.send_async(b"%d" % seq, lambda r, mid, s=seq: r == pulsar.Result.Ok and
                                receipted.add(s), sequence_id=seq)
        time.sleep(0.05)
        broker.kill()
        broker.start(port)
        try:
            producer.flush()
        except Exception:
            pass
        producer.close()
    producer = create_retrying(client, topic)
    for seq in range(producer.last_sequence_id() + 1, total):
        producer.send(b"%d" % seq, sequence_id=seq)
    consumer = client.subscribe(topic, "sub")
    got = [int(x) for x in drain(consumer, 3000)]
    client.close()
    assert got == list(range(total)), "every message exactly once, in order"
    assert receipted <= set(got)
