"""Non-persistent topics as Pulsar lists and serves them: GET_TOPICS_OF_NAMESPACE by mode, the
/admin/v2/non-persistent routes, pattern consumers, and read_compacted refused. Passes on
Magnetar and Pulsar."""

import os
import re
import sys
import time
import uuid

import pulsar
import pytest
import requests

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from harness.util import round_trip, temp_namespace  # noqa: E402
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
