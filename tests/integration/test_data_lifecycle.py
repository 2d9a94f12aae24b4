"""Inactive topics and subscriptions (brokerDeleteInactiveTopics*, inactive-topic-policies,
subscription-expiration-time) and the backlog-quota and TTL metrics, with the official client.

The subscription-expiration case needs the 1-minute minimum check interval: ~2 minutes; the
partitioned-metadata case (brokerDeleteInactivePartitionedTopicMetadataEnabled) starts its own
broker."""

import time
import uuid

import pulsar
import pytest
import requests

from harness.broker import MagnetarProcess
from harness.util import wait_for


@pytest.fixture(scope="module")
def broker():
    proc = MagnetarProcess(["brokerDeleteInactiveTopicsFrequencySeconds=1",
                            "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds=2",
                            "subscriptionExpiryCheckIntervalInMinutes=1",
                            "backlogQuotaCheckIntervalInSeconds=1"])
    endpoint = proc.start()
    yield endpoint
    proc.close()


def new_namespace(admin):
    ns = f"public/lc-{uuid.uuid4().hex[:8]}"
    assert requests.put(f"{admin}/admin/v2/namespaces/{ns}", timeout=30).status_code == 204
    return ns


def topics_of(admin, ns):
    r = requests.get(f"{admin}/admin/v2/persistent/{ns}", timeout=30)
    assert r.status_code == 200, r.text
    return set(r.json())


def produce(client, topic, n):
    p = client.create_producer(topic, batching_enabled=False)
    for i in range(n):
        p.send(f"m-{i}".encode())
    p.close()


def test_inactive_topics_are_deleted_with_their_data(broker):
    admin = broker.admin_url
    ns = new_namespace(admin)
    gone, kept = f"persistent://{ns}/gone", f"persistent://{ns}/kept"
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
    try:
        produce(client, gone, 5)  # no subscription: deleted once idle for 2 s
        client.subscribe(kept, "s").close()
        produce(client, kept, 5)
        assert wait_for(lambda: gone not in topics_of(admin, ns), 20)
        assert kept in topics_of(admin, ns)
        # Its data went with it: a new topic of the same name starts empty.
        reader = client.create_reader(gone, pulsar.MessageId.earliest)
        with pytest.raises(pulsar.Timeout):
            reader.read_next(1500)
        # A connected reader keeps the topic in use.
        time.sleep(4)
        assert gone in topics_of(admin, ns)
        reader.close()
    finally:
        client.close()


def index_runs(admin):
    text = requests.get(f"{admin}/metrics/", timeout=30).text
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("magnetar_storage_index_runs"))


@pytest.fixture
def own_broker():
    """A broker of the test's own: the module's broker deletes other tests' idle topics, which
    moves the global magnetar_storage_index_runs gauge while a test reads it."""
    proc = MagnetarProcess(["brokerDeleteInactiveTopicsFrequencySeconds=1",
                            "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds=2"])
    yield proc.start()
    proc.close()


def test_location_state_is_counted_and_freed_with_its_data(own_broker):
    """Each journal record of undeleted data is located in memory (docs/memory-limits.md,
    Churn): 300 messages sent one at a time are 300 records more on
    magnetar_storage_index_runs, and deleting the topic's data gives them back."""
    admin = own_broker.admin_url
    ns = new_namespace(admin)
    topic = f"persistent://{ns}/located"
    client = pulsar.Client(own_broker.service_url, operation_timeout_seconds=10)
    try:
        before = index_runs(admin)
        located = client.create_producer(topic, batching_enabled=False)
        for i in range(300):  # synchronous sends: one record each
            located.send(f"m-{i}".encode())
        # Runs reach the in-memory index at the journal's next checkpoint, taken by a write at
        # least checkpointIntervalMs (5 s) after the last one: keep writing elsewhere until then.
        # The open producer keeps the topic in use meanwhile: runs of a ledger deleted before
        # the checkpoint are never indexed.
        side = client.create_producer(f"persistent://{ns}/side")

        def checkpointed():
            side.send(b"tick")
            return index_runs(admin) - before >= 300
        assert wait_for(checkpointed, 30), index_runs(admin) - before
        side.close()
        grown = index_runs(admin) - before
        located.close()
        # No subscription: the topic and its ledgers are deleted once idle for 2 s.
        assert wait_for(lambda: topic not in topics_of(admin, ns), 20)
        assert wait_for(lambda: index_runs(admin) <= before + grown - 300, 20), \
            (before, grown, index_runs(admin))
    finally:
        client.close()


def test_namespace_inactive_topic_policies(broker):
    admin = broker.admin_url
    caught_up, never = new_namespace(admin), new_namespace(admin)
    url = f"{admin}/admin/v2/namespaces/{caught_up}/inactiveTopicPolicies"
    body = {"inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
            "maxInactiveDurationSeconds": 2, "deleteWhileInactive": True}
    assert requests.post(url, json=body, timeout=30).status_code == 204
    assert requests.get(url, timeout=30).json() == body
    r = requests.post(f"{admin}/admin/v2/namespaces/{never}/inactiveTopicPolicies",
                      json={"maxInactiveDurationSeconds": 1, "deleteWhileInactive": False},
                      timeout=30)
    assert r.status_code == 204
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
    try:
        done, backlog = f"persistent://{caught_up}/done", f"persistent://{caught_up}/backlog"
        c = client.subscribe(done, "s")
        produce(client, done, 3)
        for _ in range(3):
            c.acknowledge(c.receive(5000))
        c.close()
        client.subscribe(backlog, "s").close()
        produce(client, backlog, 3)
        keep = f"persistent://{never}/t"
        produce(client, keep, 1)
        assert wait_for(lambda: done not in topics_of(admin, caught_up), 20)
        assert backlog in topics_of(admin, caught_up)
        assert keep in topics_of(admin, never)
    finally:
        client.close()


def metric(text, name, **labels):
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_backlog_quota_and_expiry_metrics(broker):
    admin = broker.admin_url
    ns = new_namespace(admin)
    r = requests.post(f"{admin}/admin/v2/namespaces/{ns}/backlogQuota",
                      params={"backlogQuotaType": "message_age"},
                      json={"limitTime": 2, "policy": "consumer_backlog_eviction"}, timeout=30)
    assert r.status_code == 204
    topic = f"persistent://{ns}/t"
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
    try:
        client.subscribe(topic, "s").close()
        produce(client, topic, 4)
        stats_url = f"{admin}/admin/v2/persistent/{ns}/t/stats"
        assert wait_for(lambda: requests.get(stats_url, timeout=30).json()
                        ["subscriptions"]["s"]["msgBacklog"] == 0, 20)
        assert requests.get(stats_url, timeout=30).json()["subscriptions"]["s"][
            "totalMsgExpired"] == 4
        text = requests.get(f"{admin}/metrics/", timeout=30).text
        assert metric(text, "pulsar_storage_backlog_quota_limit_time", topic=topic) == 2
        assert metric(text, "pulsar_storage_backlog_quota_limit", topic=topic) == -1
        assert metric(text, "pulsar_storage_backlog_quota_exceeded_evictions_total",
                      topic=topic, quota_type="time") >= 1
        assert metric(text, "pulsar_storage_backlog_quota_exceeded_evictions_total",
                      topic=topic, quota_type="size") == 0
        assert metric(text, "pulsar_subscription_total_msg_expired", topic=topic,
                      subscription="s") == 4
        assert metric(text, "pulsar_storage_backlog_age_seconds", topic=topic) == 0
        assert metric(text, "pulsar_broker_storage_backlog_quota_exceeded_evictions_total",
                      quota_type="time") >= 1
    finally:
        client.close()


def set_topic_expiration(admin, topic, minutes):
    url = f"{admin}/admin/v2/persistent/{topic[len('persistent://'):]}/subscriptionExpirationTime"
    r = requests.post(url, params={"subscriptionExpirationTime": minutes}, timeout=30)
    assert r.status_code == 204, r.text
    return url


def test_subscriptions_expire_without_consumers(broker):
    """Topic policy > namespace policy > subscriptionExpirationTimeMinutes (0 here)."""
    admin = broker.admin_url
    ns = new_namespace(admin)
    plain_ns = new_namespace(admin)
    r = requests.post(f"{admin}/admin/v2/namespaces/{ns}/subscriptionExpirationTime", json=1,
                      timeout=30)
    assert r.status_code == 204
    by_ns = f"persistent://{ns}/t"             # namespace: 1 minute
    never = f"persistent://{ns}/never"         # topic policy 0 over the namespace's 1
    by_topic = f"persistent://{plain_ns}/t"    # topic policy 1 over the broker's 0
    untouched = f"persistent://{plain_ns}/u"   # broker default: never
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
    try:
        held = []
        for topic in (by_ns, never, by_topic, untouched):
            client.subscribe(topic, "idle").close()
            held.append(client.subscribe(topic, "live"))
            held.append(client.create_producer(topic))  # keeps the topic itself in use
        url = set_topic_expiration(admin, never, 0)
        assert requests.get(url, timeout=30).json() == 0
        url = set_topic_expiration(admin, by_topic, 1)
        assert requests.get(url, timeout=30).json() == 1
        assert requests.get(url.replace(plain_ns, ns).replace("/t/", "/never/"),
                            params={"applied": "true"}, timeout=30).json() == 0
        r = requests.post(url, params={"subscriptionExpirationTime": -1}, timeout=30)
        assert r.status_code == 412
        assert r.json()["reason"] == "Invalid value for subscription expiration time"

        def subs(topic):
            r = requests.get(f"{admin}/admin/v2/persistent/{topic[len('persistent://'):]}"
                             "/subscriptions", timeout=30)
            return set(r.json())

        assert subs(by_ns) == {"idle", "live"}
        assert wait_for(lambda: subs(by_ns) == {"live"} and subs(by_topic) == {"live"}, 150)
        assert subs(never) == {"idle", "live"}
        assert subs(untouched) == {"idle", "live"}
        for h in held:
            h.close()
    finally:
        client.close()


def partition_exists(admin, ns, name):
    """The partition is stored or loaded (the namespace listing names every partition of the
    partitioned metadata, as Pulsar's)."""
    r = requests.get(f"{admin}/admin/v2/persistent/{ns}/{name}/internalStats", timeout=30)
    assert r.status_code in (200, 404), r.text
    return r.status_code == 200


def test_inactive_partitions_keep_their_metadata_by_default(broker):
    admin = broker.admin_url
    ns = new_namespace(admin)
    r = requests.put(f"{admin}/admin/v2/persistent/{ns}/p/partitions", json=2, timeout=30)
    assert r.status_code == 204, r.text
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
    try:
        produce(client, f"persistent://{ns}/p", 4)
        assert partition_exists(admin, ns, "p-partition-0")
        assert wait_for(lambda: not partition_exists(admin, ns, "p-partition-0")
                        and not partition_exists(admin, ns, "p-partition-1"), 20)
        time.sleep(2)
        r = requests.get(f"{admin}/admin/v2/persistent/{ns}/partitioned", timeout=30)
        assert r.json() == [f"persistent://{ns}/p"]
    finally:
        client.close()


def test_inactive_partitioned_topic_metadata_is_deleted_when_enabled():
    proc = MagnetarProcess(["brokerDeleteInactiveTopicsFrequencySeconds=1",
                            "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds=2",
                            "brokerDeleteInactivePartitionedTopicMetadataEnabled=true"])
    try:
        endpoint = proc.start()
        admin = endpoint.admin_url
        ns = new_namespace(admin)
        for name, partitions in (("gone", 3), ("busy", 2)):
            r = requests.put(f"{admin}/admin/v2/persistent/{ns}/{name}/partitions",
                             json=partitions, timeout=30)
            assert r.status_code == 204, r.text
        r = requests.post(f"{admin}/admin/v2/persistent/{ns}/gone/retention", timeout=30,
                          json={"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})
        assert r.status_code == 204, r.text
        client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=10)
        try:
            produce(client, f"persistent://{ns}/gone", 6)  # creates every partition
            # One partition of "busy" stays in use: its metadata stays.
            keep = client.subscribe(f"persistent://{ns}/busy-partition-0", "s")
            produce(client, f"persistent://{ns}/busy", 4)

            def partitioned():
                r = requests.get(f"{admin}/admin/v2/persistent/{ns}/partitioned", timeout=30)
                return set(r.json())

            assert wait_for(lambda: partitioned() == {f"persistent://{ns}/busy"}, 30)
            assert all(not partition_exists(admin, ns, f"gone-partition-{i}") for i in range(3))
            assert wait_for(lambda: not partition_exists(admin, ns, "busy-partition-1"), 20)
            time.sleep(2)
            assert partitioned() == {f"persistent://{ns}/busy"}
            assert partition_exists(admin, ns, "busy-partition-0")
            # Gone: Pulsar's partitioned metadata of a topic that does not exist is a 404.
            r = requests.get(f"{admin}/admin/v2/persistent/{ns}/gone/partitions", timeout=30)
            assert r.status_code == 404, r.text
            # The topic policies went with it.
            r = requests.put(f"{admin}/admin/v2/persistent/{ns}/gone/partitions", json=1,
                             timeout=30)
            assert r.status_code == 204, r.text
            r = requests.get(f"{admin}/admin/v2/persistent/{ns}/gone/retention", timeout=30)
            assert r.status_code in (200, 204) and r.text in ("", "null"), r.text
            keep.close()
        finally:
            client.close()
    finally:
        proc.close()
