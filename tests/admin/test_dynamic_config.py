"""Dynamic settings take effect at once: for each setting Pulsar marks dynamic and Magnetar
enforces, `brokers update-dynamic-config` (POST /admin/v2/brokers/configuration/{key}/{value})
changes what the running broker does, shown against a broker process of this module's own (so
the changes do not leak into other tests). A key Pulsar does not mark dynamic is refused with
Pulsar's 412."""

import threading
import time
import uuid

import pulsar
import pytest
import requests

from harness.broker import MagnetarProcess
from harness.util import metric_sum


@pytest.fixture(scope="module")
def dyn_broker():
    # One I/O thread, so maxMessagePublishBufferSizeInMB is one share; fsync'd journal, so a
    # flood of publishes waits for storage.
    proc = MagnetarProcess(["numIOThreads=1", "journalSyncData=true"])
    endpoint = proc.start()
    try:
        yield endpoint
    finally:
        proc.stop()


@pytest.fixture
def dyn_client(dyn_broker):
    c = pulsar.Client(dyn_broker.service_url, operation_timeout_seconds=15,
                      logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    yield c
    c.close()


class Settings:
    """Sets dynamic settings on the module's broker and puts the start values back afterwards."""

    def __init__(self, admin_url):
        self.base = admin_url + "/admin/v2/brokers/configuration"
        self.saved = {}

    def set(self, key, value):
        if key not in self.saved:
            self.saved[key] = requests.get(self.base + "/values", timeout=10).json()[key]
        r = requests.post(f"{self.base}/{key}/{value}", timeout=10)
        assert r.status_code == 204, (key, value, r.status_code, r.text)

    def restore(self):
        for key, value in self.saved.items():
            requests.post(f"{self.base}/{key}/{value}", timeout=10)


@pytest.fixture
def settings(dyn_broker):
    s = Settings(dyn_broker.admin_url)
    yield s
    s.restore()


def metric(admin_url, name):
    """Sum of the samples of `name` on /metrics (0 when there are none)."""
    return metric_sum(requests.get(admin_url + "/metrics", timeout=10).text, name)


def new_topic(prefix="dyn"):
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def partitions(admin_url, topic):
    path = topic.replace("persistent://", "/admin/v2/persistent/")
    return requests.get(f"{admin_url}{path}/partitions", timeout=10).json()["partitions"]


def test_static_key_is_refused_with_pulsars_412(dyn_broker):
    # Pulsar 4.2 does not mark maxProducersPerTopic dynamic; neither does Magnetar.
    base = dyn_broker.admin_url + "/admin/v2/brokers/configuration"
    r = requests.post(f"{base}/maxProducersPerTopic/1", timeout=10)
    assert r.status_code == 412
    assert r.json()["reason"] == "Cannot update non-dynamic configuration"
    assert "maxProducersPerTopic" not in requests.get(base, timeout=10).json()


def test_blank_value_is_refused_and_changes_nothing(dyn_broker, settings):
    # Pulsar 4 stores a blank value verbatim (and fails on it later); Magnetar refuses it rather
    # than resetting the setting to its default.
    settings.set("brokerDeleteInactiveTopicsMode", "delete_when_subscriptions_caught_up")
    base = dyn_broker.admin_url + "/admin/v2/brokers/configuration"
    r = requests.post(f"{base}/brokerDeleteInactiveTopicsMode/%20%20", timeout=10)
    assert r.status_code == 412
    assert "Invalid dynamic-config value" in r.json()["reason"]
    values = requests.get(base + "/values", timeout=10).json()
    assert values["brokerDeleteInactiveTopicsMode"] == "delete_when_subscriptions_caught_up"


def test_allow_auto_topic_creation(dyn_broker, dyn_client, settings):
    settings.set("allowAutoTopicCreation", "false")
    with pytest.raises(pulsar.TopicNotFound):
        dyn_client.create_producer(new_topic())
    settings.set("allowAutoTopicCreation", "true")
    dyn_client.create_producer(new_topic()).close()


def test_allow_auto_topic_creation_type_and_default_num_partitions(dyn_broker, dyn_client,
                                                                   settings):
    plain = new_topic()
    dyn_client.create_producer(plain).close()
    assert partitions(dyn_broker.admin_url, plain) == 0
    settings.set("allowAutoTopicCreationType", "partitioned")
    settings.set("defaultNumPartitions", "3")
    three = new_topic()
    dyn_client.create_producer(three).close()
    assert partitions(dyn_broker.admin_url, three) == 3
    settings.set("defaultNumPartitions", "2")
    two = new_topic()
    dyn_client.create_producer(two).close()
    assert partitions(dyn_broker.admin_url, two) == 2


def test_allow_auto_subscription_creation(dyn_broker, dyn_client, settings):
    topic = new_topic()
    subs = dyn_broker.admin_url + topic.replace("persistent://", "/admin/v2/persistent/") + \
        "/subscriptions"
    dyn_client.subscribe(topic, "existing").close()
    settings.set("allowAutoSubscriptionCreation", "false")
    # The broker answers SubscriptionNotFound, which the official client retries until its
    # operation timeout (as against Pulsar).
    short = pulsar.Client(dyn_broker.service_url, operation_timeout_seconds=3,
                          logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    with pytest.raises((pulsar.SubscriptionNotFound, pulsar.Timeout)):
        short.subscribe(topic, "new-one")
    short.close()
    assert requests.get(subs, timeout=10).json() == ["existing"]
    dyn_client.subscribe(topic, "existing").close()  # an existing one is still fine
    settings.set("allowAutoSubscriptionCreation", "true")
    dyn_client.subscribe(topic, "new-one").close()
    assert sorted(requests.get(subs, timeout=10).json()) == ["existing", "new-one"]


def test_managed_ledger_cache_size(dyn_broker, dyn_client, settings):
    url = dyn_broker.admin_url
    topic = new_topic()
    dyn_client.subscribe(topic, "holds-the-entries").close()  # a backlog stays cached
    producer = dyn_client.create_producer(topic, batching_enabled=False)
    for _ in range(50):
        producer.send(b"c" * 10000)
    assert metric(url, "pulsar_ml_cache_used_size") >= 50 * 10000
    settings.set("managedLedgerCacheSizeMB", "0")
    assert metric(url, "pulsar_ml_cache_used_size") == 0  # trimmed by the update itself
    producer.send(b"c" * 10000)
    assert metric(url, "pulsar_ml_cache_used_size") == 0  # and nothing new is cached
    settings.set("managedLedgerCacheSizeMB", "64")
    producer.send(b"c" * 10000)
    assert metric(url, "pulsar_ml_cache_used_size") >= 10000
    producer.close()


def disk_reads_to_drain(url, client, topic, subscription, count):
    """Journal reads it takes a new Earliest subscription to receive `count` messages."""
    before = metric(url, "magnetar_storage_disk_reads_total")
    consumer = client.subscribe(topic, subscription, receiver_queue_size=1000,
                                initial_position=pulsar.InitialPosition.Earliest)
    for _ in range(count):
        consumer.acknowledge(consumer.receive(10000))
    consumer.close()
    return metric(url, "magnetar_storage_disk_reads_total") - before


@pytest.fixture
def backlog_on_disk(dyn_client, settings):
    """A topic with 200 messages of 1000 bytes that only the journal holds (cache off)."""
    settings.set("managedLedgerCacheSizeMB", "0")
    topic = new_topic()
    producer = dyn_client.create_producer(topic, batching_enabled=False)
    for _ in range(200):
        producer.send(b"r" * 1000)
    producer.close()
    return topic


def test_dispatcher_max_read_batch_size(dyn_broker, dyn_client, settings, backlog_on_disk):
    url = dyn_broker.admin_url
    settings.set("dispatcherMaxReadBatchSize", "10")
    small = disk_reads_to_drain(url, dyn_client, backlog_on_disk, "small", 200)
    settings.set("dispatcherMaxReadBatchSize", "500")
    large = disk_reads_to_drain(url, dyn_client, backlog_on_disk, "large", 200)
    assert small >= 20, small  # 200 entries, at most 10 per read
    assert large <= 5, large


def test_dispatcher_max_read_size_bytes(dyn_broker, dyn_client, settings, backlog_on_disk):
    url = dyn_broker.admin_url
    settings.set("dispatcherMaxReadBatchSize", "500")
    settings.set("dispatcherMaxReadSizeBytes", "1500")
    small = disk_reads_to_drain(url, dyn_client, backlog_on_disk, "small", 200)
    settings.set("dispatcherMaxReadSizeBytes", "5242880")
    large = disk_reads_to_drain(url, dyn_client, backlog_on_disk, "large", 200)
    assert small >= 50, small  # ~2 entries of ~1 KB per read
    assert large <= 5, large


def received_by(consumer, timeout_ms=1000):
    got = 0
    while True:
        try:
            consumer.acknowledge(consumer.receive(timeout_ms))
            got += 1
        except pulsar.Timeout:
            return got


@pytest.mark.parametrize("key,low,high", [
    ("keySharedLookAheadMsgInReplayThresholdPerSubscription", "10", "20000"),
    ("keySharedLookAheadMsgInReplayThresholdPerConsumer", "5", "2000"),  # x 2 consumers
])
def test_key_shared_look_ahead(dyn_client, settings, key, low, high):
    # A Key_Shared consumer that takes one message and no more: its keys' messages go to the
    # replay set, and once that holds the look-ahead limit no new entries are read, so the other
    # consumer is held too, until the limit is raised.
    settings.set(key, low)
    topic = new_topic()
    stuck = dyn_client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared,
                                 receiver_queue_size=1, consumer_name="stuck")
    other = dyn_client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared,
                                 receiver_queue_size=1000, consumer_name="other")
    producer = dyn_client.create_producer(topic, batching_enabled=False)
    for i in range(400):
        producer.send_async(b"m", None, partition_key=f"k{i % 40}")
    producer.flush()
    held = received_by(other)
    assert held < 200, held
    settings.set(key, high)
    producer.send(b"wake", partition_key="k0")  # the next read decision sees the new limit
    more = received_by(other)
    assert more >= 50, (held, more)
    producer.close()
    stuck.close()
    other.close()


def flood(service_url, topic, producers=10, per_producer=200):
    errors = []

    def run(i):
        c = pulsar.Client(service_url, operation_timeout_seconds=60,
                          logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        p = c.create_producer(topic, producer_name=f"flood-{uuid.uuid4().hex[:6]}-{i}",
                              batching_enabled=False, block_if_queue_full=True,
                              max_pending_messages=1000)
        for _n in range(per_producer):
            p.send_async(b"x" * 8192, lambda r, _m: r != pulsar.Result.Ok and errors.append(r))
        p.flush()
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_max_message_publish_buffer_size(dyn_broker, settings):
    url = dyn_broker.admin_url
    topic = new_topic("flood")
    paused = "magnetar_io_thread_read_paused_total"
    before = metric(url, paused)
    flood(dyn_broker.service_url, topic)  # 16 MB through the default 2048 MB buffer
    assert metric(url, paused) == before
    settings.set("maxMessagePublishBufferSizeInMB", "1")
    flood(dyn_broker.service_url, topic)  # the same through 1 MB: the I/O thread pauses
    assert metric(url, paused) > before
    deadline = time.time() + 10
    while metric(url, "magnetar_io_thread_publish_pending_bytes") != 0 and time.time() < deadline:
        time.sleep(0.1)
    assert metric(url, "magnetar_io_thread_publish_pending_bytes") == 0
