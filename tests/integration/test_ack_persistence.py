"""When acknowledgements reach the disk (managedLedgerDefaultMarkDeleteRateLimit, default 1 a
second per cursor, as Pulsar): acks nobody waits for are written at the next allowed write, at the
latest on the housekeeping tick after the interval, and at a clean shutdown. After a kill -9 only
the acks of that last interval may come again (at-least-once, as Pulsar's limiter); with the limit
at 0 every ack is written in the pass it arrives in."""

import tempfile
import time

import pulsar
import pytest

from harness.broker import restartable_magnetar
from harness.util import receive_all

TOPIC = "persistent://public/default/ack-persistence"


def publish_and_consume(url, acks_then_wait):
    """200 messages; the Shared consumer acks them in groups: for (n, wait_s) in acks_then_wait,
    n messages acked one by one, then wait_s seconds. Returns the payloads of each group."""
    client = pulsar.Client(url, operation_timeout_seconds=10)
    consumer = client.subscribe(TOPIC, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(TOPIC, batching_enabled=False)
    for i in range(200):
        producer.send(b"m-%d" % i)
    got = receive_all(consumer)
    assert len(got) == 200
    groups, at = [], 0
    for n, wait_s in acks_then_wait:
        for m in got[at:at + n]:
            consumer.acknowledge(m)
        groups.append({m.data() for m in got[at:at + n]})
        at += n
        time.sleep(wait_s)
    client.close()
    return groups


def redelivered(url):
    client = pulsar.Client(url, operation_timeout_seconds=10)
    consumer = client.subscribe(TOPIC, "sub", consumer_type=pulsar.ConsumerType.Shared)
    back = {m.data() for m in receive_all(consumer)}
    client.close()
    return back


@pytest.mark.parametrize("rate", ["1.0", "0"])
def test_acks_older_than_the_interval_survive_a_kill(rate):
    with tempfile.TemporaryDirectory(prefix="magnetar-ackp-") as d:
        broker = restartable_magnetar(d, [f"managedLedgerDefaultMarkDeleteRateLimit={rate}"])
        try:
            url = broker.start().service_url
            # 100 acks, then the interval (1 s) and a tick (1 s) with room; 80 more acks (the
            # client sends them within 100 ms), the kill 0.5 s later; 20 never acked.
            old, recent = publish_and_consume(url, [(100, 3.0), (80, 0.5)])
            broker.kill()
            back = redelivered(broker.start(port=broker.port).service_url)
            assert not back & old, "acks older than the rate limit's interval came back"
            unacked = {b"m-%d" % i for i in range(180, 200)}
            assert unacked <= back, "unacknowledged messages were lost"
            if rate == "0":
                # Written in the pass each ack arrived in, long before the kill.
                assert back == unacked, sorted(back - unacked)
            else:
                assert back <= unacked | recent
        finally:
            broker.close()


def test_a_clean_shutdown_writes_what_the_limit_held_back():
    with tempfile.TemporaryDirectory(prefix="magnetar-ackp-") as d:
        broker = restartable_magnetar(d, ["managedLedgerDefaultMarkDeleteRateLimit=0.01"])
        try:
            url = broker.start().service_url
            # At 0.01 writes a second nothing acked here is written before the shutdown.
            publish_and_consume(url, [(150, 0.5)])
            assert broker.stop() == 0
            back = redelivered(broker.start(port=broker.port).service_url)
            assert back == {b"m-%d" % i for i in range(150, 200)}
        finally:
            broker.close()
