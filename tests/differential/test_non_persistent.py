"""Non-persistent topics as Pulsar lists and serves them: GET_TOPICS_OF_NAMESPACE by mode, the
/admin/v2/non-persistent routes, pattern consumers, and read_compacted refused; and as Pulsar's
NonPersistentTopic delivers: receipts at once for message id 0:0, messages only to connected
consumers that have permits (each subscription type), the rest dropped and shown as msgDropRate
(stats and pulsar_subscription_msg_drop_rate), nothing kept for a consumer that comes back; and
at the publisher side, SENDs over maxConcurrentNonPersistentMessagePerConnection dropped (a
receipt for -1:-1, the publisher's msgDropRate) on a broker of its own.
Passes on Magnetar and Pulsar."""

import os
import re
import sys
import time
import uuid

import pulsar
import pytest
import requests

from harness.broker import broker_process
from harness.fixtures import wait_namespace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from harness.util import metric_sum, receive_all, round_trip, temp_namespace  # noqa: E402
from hostile_wire import (  # noqa: E402
    ERROR,
    SUBSCRIBE,
    WireClient,
    base_command,
    error_name,
    fb,
    frame,
    fv,
)

GET_TOPICS, GET_TOPICS_RESPONSE = 32, 33
PERSISTENT, NON_PERSISTENT, ALL = 0, 1, 2  # CommandGetTopicsOfNamespace.Mode


@pytest.fixture
def namespace(admin_url):
    yield from temp_namespace(admin_url, "np")


@pytest.fixture
def wire(broker):
    c = WireClient(int(broker.service_url.rsplit(":", 1)[1]), timeout=15)
    c.handshake()
    yield c
    c.close()


def topics_of(c, ns, mode, request_id):
    c.send(frame(base_command(GET_TOPICS, fv(1, request_id) + fb(2, ns) + fv(3, mode))))
    r = c.expect(GET_TOPICS_RESPONSE)
    assert r[1] == [request_id]
    return sorted(t.decode() for t in r.get(2, []))


@pytest.mark.admin
def test_non_persistent_topics_are_listed_by_mode(client, admin_url, namespace, wire):
    np_topic = f"non-persistent://{namespace}/live"
    p_topic = f"persistent://{namespace}/stored"
    np_producer = client.create_producer(np_topic)
    p_producer = client.create_producer(p_topic)
    assert topics_of(wire, namespace, NON_PERSISTENT, 1) == [np_topic]
    assert topics_of(wire, namespace, PERSISTENT, 2) == [p_topic]
    assert topics_of(wire, namespace, ALL, 3) == sorted([np_topic, p_topic])
    admin = f"{admin_url}/admin/v2"
    assert requests.get(f"{admin}/non-persistent/{namespace}", timeout=30).json() == [np_topic]
    assert requests.get(f"{admin}/persistent/{namespace}", timeout=30).json() == [p_topic]
    r = requests.get(f"{admin}/namespaces/{namespace}/topics", params={"mode": "ALL"},
                     timeout=30)
    assert sorted(r.json()) == sorted([np_topic, p_topic])
    np_producer.close()
    p_producer.close()


@pytest.mark.admin
def test_non_persistent_admin_stats_and_partitions(client, admin_url, namespace):
    topic = f"non-persistent://{namespace}/t"
    path = f"{admin_url}/admin/v2/non-persistent/{namespace}/t"
    consumer, producer = round_trip(client, topic, subscription="s1")
    stats = requests.get(f"{path}/stats", timeout=30)
    assert stats.status_code == 200, stats.text
    s = stats.json()
    assert s["msgInCounter"] == 1
    assert len(s["publishers"]) == 1
    assert list(s["subscriptions"]) == ["s1"]
    assert requests.get(f"{path}/subscriptions", timeout=30).json() == ["s1"]
    r = requests.get(f"{path}/partitions", timeout=30).json()
    assert r["partitions"] == 0
    # A partitioned non-persistent topic.
    part = f"{admin_url}/admin/v2/non-persistent/{namespace}/parted"
    assert requests.put(f"{part}/partitions", json=2, timeout=30).status_code == 204
    assert requests.get(f"{part}/partitions", timeout=30).json()["partitions"] == 2
    listed = requests.get(f"{admin_url}/admin/v2/non-persistent/{namespace}/partitioned",
                          timeout=30).json()
    assert listed == [f"non-persistent://{namespace}/parted"]
    assert requests.get(f"{admin_url}/admin/v2/persistent/{namespace}/partitioned",
                        timeout=30).json() == []
    # An unknown non-persistent topic's stats are 404, as Pulsar's.
    r = requests.get(f"{admin_url}/admin/v2/non-persistent/{namespace}/missing/stats", timeout=30)
    assert r.status_code == 404
    producer.close()
    consumer.close()


def test_pattern_consumer_sees_non_persistent_topics(client, broker, namespace):
    a, b = (f"non-persistent://{namespace}/sensor-{n}" for n in ("a", "b"))
    pa = client.create_producer(a)
    pb = client.create_producer(b)
    consumer = client.subscribe(
        re.compile(f"{namespace}/sensor-.*"), "pat", pattern_auto_discovery_period=1,
        regex_subscription_mode=pulsar.RegexSubscriptionMode.NonPersistentOnly)
    # Non-persistent messages reach only connected consumers: send until both topics deliver.
    seen = set()
    deadline = time.time() + 30
    while seen != {a, b} and time.time() < deadline:
        pa.send(b"a")
        pb.send(b"b")
        try:
            while True:
                m = consumer.receive(timeout_millis=500)
                seen.add(re.sub(r"-partition-\d+$", "", m.topic_name()))
                consumer.acknowledge(m)
        except pulsar.Timeout:
            pass
    assert seen == {a, b}
    consumer.close()
    pa.close()
    pb.close()


def test_read_compacted_on_a_non_persistent_topic_is_not_allowed(wire):
    # public/default: a raw connection without LOOKUP is served there by Pulsar standalone.
    topic = f"non-persistent://public/default/rc-{uuid.uuid4().hex[:8]}"
    body = (fb(1, topic) + fb(2, "rc") + fv(3, 0) + fv(4, 1)
            + fv(5, 7) + fv(11, 1))
    wire.send(frame(base_command(SUBSCRIBE, body)))
    r = wire.expect(ERROR)
    assert r[1] == [7]
    assert error_name(r, 2) == "NotAllowedError"
    assert b"readCompacted" in r[3][0]
    assert wire.alive()


def np_stats(admin_url, topic):
    path = topic.replace("non-persistent://", "")
    r = requests.get(f"{admin_url}/admin/v2/non-persistent/{path}/stats", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_receipts_at_once_and_delivery_to_a_connected_consumer(client, admin_url, namespace):
    topic = f"non-persistent://{namespace}/deliver"
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m-{i}".encode()) for i in range(50)]
    # Pulsar's NonPersistentTopic answers every SEND with message id 0:0.
    assert {(m.ledger_id(), m.entry_id()) for m in ids} == {(0, 0)}
    got = [consumer.receive(10000) for _ in range(50)]
    assert [m.data() for m in got] == [f"m-{i}".encode() for i in range(50)]
    assert {(m.message_id().ledger_id(), m.message_id().entry_id()) for m in got} == {(0, 0)}
    for m in got:
        consumer.acknowledge(m)
    batched = client.create_producer(topic, batching_enabled=True,
                                     batching_max_publish_delay_ms=50)
    receipts = []
    for i in range(3):
        batched.send_async(f"b-{i}".encode(), lambda res, mid: receipts.append(mid))
    batched.flush()
    assert sorted(m.batch_index() for m in receipts) == [0, 1, 2]
    assert {(m.ledger_id(), m.entry_id()) for m in receipts} == {(0, 0)}
    assert [consumer.receive(10000).data() for _ in range(3)] == [b"b-0", b"b-1", b"b-2"]
    s = np_stats(admin_url, topic)
    assert s["msgInCounter"] == 53
    assert s["storageSize"] == 0
    assert s["subscriptions"]["s"]["msgBacklog"] == 0
    assert s["subscriptions"]["s"]["msgOutCounter"] == 53
    assert s["subscriptions"]["s"]["isDurable"] is False
    assert "msgDropRate" in s and "msgDropRate" in s["publishers"][0]
    for c in (batched, producer, consumer):
        c.close()


def test_slow_consumer_drops_show_in_stats_and_metrics(client, admin_url, namespace):
    topic = f"non-persistent://{namespace}/drops"
    fast = client.subscribe(topic, "fast", consumer_type=pulsar.ConsumerType.Shared)
    # 10 permits, never received: the 11th message on has no consumer that can take it.
    slow = client.subscribe(topic, "slow", receiver_queue_size=10)
    producer = client.create_producer(topic, batching_enabled=False)
    for _ in range(300):
        producer.send(b"x" * 100)
    assert len(receive_all(fast, 1000)) == 300
    s = np_stats(admin_url, topic)
    assert s["subscriptions"]["slow"]["msgOutCounter"] == 10
    assert s["subscriptions"]["fast"]["msgOutCounter"] == 300
    assert s["subscriptions"]["slow"]["msgBacklog"] == 0
    # msgDropRate is a rate over the broker's stats interval (Pulsar: statsUpdateFrequencyInSecs,
    # 60 s by default): keep dropping until an interval shows it.
    deadline = time.time() + 150
    while True:
        for _ in range(20):
            producer.send(b"y" * 100)
        receive_all(fast, 200)
        subs = np_stats(admin_url, topic)["subscriptions"]
        if subs["slow"]["msgDropRate"] > 0:
            break
        assert time.time() < deadline, subs["slow"]
        time.sleep(0.5)
    assert subs["fast"]["msgDropRate"] == 0
    metrics = requests.get(f"{admin_url}/metrics/", timeout=30).text
    assert metric_sum(metrics, "pulsar_subscription_msg_drop_rate", topic=topic,
                      subscription="slow") > 0
    assert metric_sum(metrics, "pulsar_subscription_msg_drop_rate", topic=topic,
                      subscription="fast") == 0
    for c in (producer, slow, fast):
        c.close()


def test_nothing_kept_for_a_consumer_that_comes_back(client, admin_url, namespace):
    topic = f"non-persistent://{namespace}/gone"
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"first")
    assert consumer.receive(10000).data() == b"first"
    consumer.close()
    for i in range(5):
        producer.send(f"missed-{i}".encode())
    consumer = client.subscribe(topic, "s")
    assert np_stats(admin_url, topic)["subscriptions"]["s"]["msgBacklog"] == 0
    producer.send(b"after")
    assert consumer.receive(10000).data() == b"after"
    with pytest.raises(pulsar.Timeout):
        consumer.receive(1000)
    consumer.close()
    producer.close()


@pytest.mark.parametrize("sub_type", ["Shared", "Key_Shared", "Failover"])
def test_subscription_types_share_out_what_is_published(client, namespace, sub_type):
    topic = f"non-persistent://{namespace}/types-{sub_type.lower()}"
    kind = getattr(pulsar.ConsumerType, "KeyShared" if sub_type == "Key_Shared" else sub_type)
    consumers = [client.subscribe(topic, "s", consumer_type=kind, consumer_name=f"c{i}")
                 for i in range(2)]
    producer = client.create_producer(topic, batching_enabled=False)
    time.sleep(1)  # Failover: the active consumer is settled before the messages go
    for i in range(40):
        producer.send(f"{i}".encode(), partition_key=f"k{i % 4}")
    got = [receive_all(c, 1500) for c in consumers]
    every = sorted(int(m.data()) for g in got for m in g)
    assert every == list(range(40))  # each message once, none dropped (permits suffice)
    if sub_type == "Failover":
        assert sorted(len(g) for g in got) == [0, 40]
    if sub_type == "Key_Shared":
        owners = {}
        for i, g in enumerate(got):
            for m in g:
                assert owners.setdefault(m.partition_key(), i) == i
    for c in consumers + [producer]:
        c.close()


NP_LIMIT = 10  # maxConcurrentNonPersistentMessagePerConnection of the np_limited broker


@pytest.fixture(scope="module")
def np_limited(request):
    """A broker of the --broker kind with a small non-persistent in-flight limit."""
    if request.config.getoption("--broker-url", None):
        pytest.skip("starts its own broker with maxConcurrentNonPersistentMessagePerConnection")
    proc = broker_process(request.config.getoption("--broker", "magnetar"),
                          [f"maxConcurrentNonPersistentMessagePerConnection={NP_LIMIT}"])
    endpoint = proc.start()
    try:
        assert wait_namespace(endpoint.admin_url), "public/default did not appear"
        yield endpoint
    finally:
        proc.close()


def send_burst(producer, n, size=100):
    """n async sends at once; the (result, ledger, entry) of each receipt."""
    receipts = []
    for _ in range(n):
        producer.send_async(b"z" * size, lambda res, mid: receipts.append(
            (res, mid.ledger_id(), mid.entry_id())))
    producer.flush()
    deadline = time.time() + 30
    while len(receipts) < n and time.time() < deadline:
        time.sleep(0.05)
    assert len(receipts) == n
    return receipts


def test_publisher_side_drops_over_the_connection_limit(np_limited):
    topic = f"non-persistent://public/default/np-pubdrop-{uuid.uuid4().hex[:8]}"
    # Each on its own connection: the limit counts one connection's SENDs in flight.
    consumer_client = pulsar.Client(np_limited.service_url, operation_timeout_seconds=10)
    producer_client = pulsar.Client(np_limited.service_url, operation_timeout_seconds=10)
    consumer = consumer_client.subscribe(topic, "s", receiver_queue_size=5000)
    producer = producer_client.create_producer(topic, batching_enabled=False,
                                               max_pending_messages=5000)
    n = 3000
    receipts = send_burst(producer, n)
    # Every SEND is answered Ok: kept ones for 0:0, dropped ones for -1:-1 (Pulsar's
    # ServerCnx.handleSend); nothing else.
    assert {r[0] for r in receipts} == {pulsar.Result.Ok}
    assert {(r[1], r[2]) for r in receipts} <= {(0, 0), (-1, -1)}
    dropped = sum(1 for r in receipts if (r[1], r[2]) == (-1, -1))
    assert 0 < dropped < n, dropped
    kept = n - dropped
    # The consumer gets exactly the kept ones (its permits cover them all).
    assert len(receive_all(consumer, 2000)) == kept
    stats = np_stats(np_limited.admin_url, topic)
    assert stats["msgInCounter"] == kept
    assert stats["subscriptions"]["s"]["msgOutCounter"] == kept
    # The publisher's msgDropRate is a rate over the stats interval (Pulsar: 60 s): keep
    # dropping until an interval shows it.
    deadline = time.time() + 150
    while True:
        publishers = np_stats(np_limited.admin_url, topic)["publishers"]
        assert len(publishers) == 1
        if publishers[0]["msgDropRate"] > 0:
            break
        assert time.time() < deadline, publishers
        send_burst(producer, 500)
        receive_all(consumer, 200)
        time.sleep(0.5)
    # A slow enough producer drops nothing: one SEND in flight at a time.
    assert all((r[1], r[2]) == (0, 0) for r in (send_burst(producer, 1)[0] for _ in range(20)))
    for c in (consumer_client, producer_client):
        c.close()
