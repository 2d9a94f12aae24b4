"""Key_Shared with the official Python client against a real broker process: per-key order and
completeness while consumers join, leave and crash, and a slow consumer that holds one key.

A key's messages must never arrive out of order at the subscription as a whole: once a message of
a key has been delivered, an earlier one of that key may only arrive again as a redelivery of a
message that was not acknowledged (then everything after it follows again in order).
"""

import multiprocessing
import os
import signal
import threading
import time

import pulsar
import pytest
from pulsar import ConsumerType

from harness.broker import MagnetarProcess
from harness.util import proc_status_kb

KEYS = 200
PER_KEY = 60


@pytest.fixture(scope="module")
def broker():
    proc = MagnetarProcess()
    endpoint = proc.start()
    yield endpoint
    proc.close()


class OrderTracker:
    """Per key: the highest sequence acknowledged; checks each delivery against it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}       # key -> set of acked seqs
        self.last = {}        # key -> last seq delivered (any consumer)
        self.violations = []

    def on_message(self, key, seq, redelivered):
        with self.lock:
            last = self.last.get(key, -1)
            done = self.acked.setdefault(key, set())
            if seq <= last and not redelivered and seq not in done:
                # Going backwards is only allowed for a message never acked (redelivery).
                pass
            if seq > last + 1 and not all(s in done for s in range(last + 1, seq)):
                missing = [s for s in range(last + 1, seq) if s not in done]
                self.violations.append((key, seq, missing[:5]))
            self.last[key] = seq
            done.add(seq)

    def complete(self):
        with self.lock:
            return sum(len(v) for v in self.acked.values()) >= KEYS * PER_KEY


def _crashing_consumer(url, topic, ready):
    # A consumer in its own process, killed with SIGKILL by the test: its connection dies without
    # a CLOSE_CONSUMER, and the broker must hand its keys on.
    client = pulsar.Client(url)
    client.subscribe(topic, "ks", consumer_type=ConsumerType.KeyShared, consumer_name="crasher",
                     receiver_queue_size=50)
    ready.set()
    time.sleep(3600)


def test_key_order_and_completeness_under_churn(broker):
    url = broker.service_url
    topic = f"persistent://public/default/ks-churn-{int(time.time() * 1000)}"
    client = pulsar.Client(url, operation_timeout_seconds=30)
    tracker = OrderTracker()

    def listener(consumer, msg):
        tracker.on_message(msg.partition_key(), int(msg.data()), msg.redelivery_count() > 0)
        time.sleep(0.002)  # keep receive queues non-empty, so hash moves meet unacked messages
        consumer.acknowledge(msg)

    # Each consumer has its own client (connection and listener thread), as separate
    # applications do, so a key delivered to two consumers at once would show up out of order.
    clients = []

    def new_consumer(i):
        c = pulsar.Client(url, operation_timeout_seconds=30)
        clients.append(c)
        return c.subscribe(topic, "ks", consumer_type=ConsumerType.KeyShared,
                           consumer_name=f"c{i}", message_listener=listener,
                           receiver_queue_size=100)

    consumers = [new_consumer(i) for i in range(20)]
    producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
    ctx = multiprocessing.get_context("spawn")
    crash_ready = ctx.Event()
    crasher = ctx.Process(target=_crashing_consumer, args=(url, topic, crash_ready))

    for seq in range(PER_KEY):
        for k in range(KEYS):
            producer.send_async(str(seq).encode(), None, partition_key=f"key-{k}")
        if seq == 10:
            crasher.start()
            assert crash_ready.wait(30)
        if seq == 20:
            consumers.pop(3).close()          # a consumer leaves
        if seq == 30:
            os.kill(crasher.pid, signal.SIGKILL)  # a consumer crashes
            crasher.join()
        if seq == 40:                            # consumers join
            for i in range(20, 23):
                consumers.append(new_consumer(i))
        producer.flush()
    deadline = time.time() + 60
    while time.time() < deadline and not tracker.complete():
        time.sleep(0.2)
    for c in clients:
        c.close()
    client.close()
    assert tracker.violations == []
    missing = {k: PER_KEY - len(v) for k, v in tracker.acked.items() if len(v) != PER_KEY}
    assert len(tracker.acked) == KEYS and not missing


def test_slow_consumer_holding_one_key_does_not_stop_others(broker):
    url = broker.service_url
    topic = f"persistent://public/default/ks-slow-{int(time.time() * 1000)}"
    client = pulsar.Client(url, operation_timeout_seconds=30)
    # STICKY ranges make the split deterministic: the slow consumer owns the hash of "hot".
    from pulsar import ConsumerKeySharedPolicy, KeySharedMode
    hot_hash = _sticky_hash(b"hot")
    slow = client.subscribe(
        topic, "ks", consumer_type=ConsumerType.KeyShared, consumer_name="slow",
        receiver_queue_size=5,
        key_shared_policy=ConsumerKeySharedPolicy(KeySharedMode.Sticky,
                                                  sticky_ranges=[(hot_hash, hot_hash)]))
    ranges = [(0, hot_hash - 1)] if hot_hash > 0 else []
    if hot_hash < 65535:
        ranges.append((hot_hash + 1, 65535))
    fast = client.subscribe(
        topic, "ks", consumer_type=ConsumerType.KeyShared, consumer_name="fast",
        key_shared_policy=ConsumerKeySharedPolicy(KeySharedMode.Sticky, sticky_ranges=ranges))
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(50):
        producer.send_async(b"h%d" % i, None, partition_key="hot")
    for i in range(500):
        producer.send_async(b"%d" % i, None, partition_key=f"cold-{i % 37}")
    producer.flush()
    # The slow consumer takes nothing (its 5 permits fill up); the others' keys all arrive.
    got = []
    while len(got) < 500:
        m = fast.receive(10000)
        got.append(m.data())
        fast.acknowledge(m)
    assert sorted(int(x) for x in got) == list(range(500))
    hot = [slow.receive(5000).data() for _ in range(5)]
    assert hot == [b"h%d" % i for i in range(5)]
    client.close()


def _sticky_hash(key: bytes) -> int:
    from harness.hashes import murmur3_32
    return (murmur3_32(key) & 0x7FFFFFFF) % 65536


@pytest.mark.skipif(bool(os.environ.get("MAGNETAR_SANITIZED")),
                    reason="RSS says nothing under a sanitizer (shadow memory, zeroing allocator)")
def test_a_key_shared_subscription_with_few_keys_costs_little_memory():
    """Each Key_Shared subscription keeps a table of its 65,536 hashes; only the pages of the
    hashes in use may be resident. 300 subscriptions with 10 keys each (before: a zero-filled
    1 MiB table each, +300 MB)."""
    broker = MagnetarProcess([], prefix="magnetar-ks-rss-")
    endpoint = broker.start()
    client = pulsar.Client(endpoint.service_url, logger=pulsar.FileLogger(
        pulsar.LoggerLevel.Error, os.devnull))
    try:
        topics = [f"persistent://public/default/ks-rss-{time.time_ns()}-{i}" for i in range(300)]
        client.subscribe(topics[0], "s", consumer_type=ConsumerType.KeyShared)
        before = proc_status_kb(broker.pid, "VmRSS") / 1024
        consumers = [client.subscribe(t, "s", consumer_type=ConsumerType.KeyShared)
                     for t in topics[1:]]
        for t in topics[1:]:
            p = client.create_producer(t, batching_enabled=False)
            for k in range(10):
                p.send_async(b"x", None, partition_key=f"key-{k}")
            p.flush()
            p.close()
        assert consumers[-1].receive(10000).data() == b"x"  # dispatched: the tables are in use
        grown = proc_status_kb(broker.pid, "VmRSS") / 1024 - before
        assert grown < 100, f"RSS grew {grown:.0f} MB for 299 Key_Shared subscriptions"
    finally:
        client.close()
        broker.close()
