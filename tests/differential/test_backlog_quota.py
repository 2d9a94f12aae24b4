"""Backlog quotas (destination_storage) as Pulsar enforces them: a producer is refused on a topic
over its quota (producer_exception / producer_request_hold, each with its own error), and the
periodic check (backlogQuotaCheckIntervalInSeconds) disconnects producers or evicts the slowest
subscriptions' oldest messages (consumer_backlog_eviction)."""

import time
import uuid

import pulsar
import pytest
import requests

LIMIT = 10240


def make_namespace(admin, policy):
    ns = f"public/bq-{uuid.uuid4().hex[:8]}"
    assert requests.put(f"{admin}/admin/v2/namespaces/{ns}", timeout=30).status_code == 204
    r = requests.post(f"{admin}/admin/v2/namespaces/{ns}/backlogQuota",
                      json={"limitSize": LIMIT, "policy": policy}, timeout=30)
    assert r.status_code == 204, r.text
    return ns


def fill(client, topic, n=40):
    """A subscription that does not consume, and n 1 KB messages: ~4x the quota."""
    client.subscribe(topic, "s").close()
    p = client.create_producer(topic, batching_enabled=False)
    for _ in range(n):
        p.send(b"x" * 1024)
    return p


def stats(admin, topic):
    r = requests.get(f"{admin}/admin/v2/persistent/{topic[len('persistent://'):]}/stats",
                     timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.admin
@pytest.mark.parametrize("policy,error", [
    ("producer_exception", pulsar.ProducerBlockedQuotaExceededException),
    ("producer_request_hold", pulsar.ProducerBlockedQuotaExceededError),
])
def test_a_producer_is_refused_over_the_quota(client, admin_url, policy, error):
    ns = make_namespace(admin_url, policy)
    topic = f"persistent://{ns}/t"
    first = fill(client, topic)
    s = stats(admin_url, topic)
    assert s["backlogSize"] >= LIMIT
    assert s["backlogQuotaLimitSize"] == LIMIT
    with pytest.raises(error):
        client.create_producer(topic)
    # Under the quota again (the backlog cleared), producers are admitted.
    r = requests.post(f"{admin_url}/admin/v2/persistent/{ns}/t/subscription/s/skip_all",
                      timeout=30)
    assert r.status_code == 204
    client.create_producer(topic).close()
    first.close()


@pytest.mark.admin
def test_consumer_backlog_eviction_admits_producers(client, admin_url):
    ns = make_namespace(admin_url, "consumer_backlog_eviction")
    topic = f"persistent://{ns}/t"
    first = fill(client, topic)
    client.create_producer(topic).close()  # eviction never refuses producers
    first.close()


@pytest.mark.admin
def test_periodic_check_evicts_the_oldest_messages(start_broker):
    endpoint = start_broker(["backlogQuotaCheckIntervalInSeconds=2"])
    admin = endpoint.admin_url
    ns = make_namespace(admin, "consumer_backlog_eviction")
    topic = f"persistent://{ns}/t"
    client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=30)
    try:
        fill(client, topic).close()
        deadline = time.time() + 60
        while time.time() < deadline and stats(admin, topic)["backlogSize"] >= LIMIT:
            time.sleep(1)
        s = stats(admin, topic)
        assert s["backlogSize"] < LIMIT
        backlog = s["subscriptions"]["s"]["msgBacklog"]
        assert 0 < backlog < 40
        # The newest messages are the ones kept.
        consumer = client.subscribe(topic, "s")
        got = [consumer.receive(timeout_millis=10000) for _ in range(backlog)]
        assert got[-1].message_id().entry_id() == 39
        consumer.close()
    finally:
        client.close()


@pytest.mark.admin
def test_periodic_check_disconnects_producers_over_the_quota(start_broker):
    endpoint = start_broker(["backlogQuotaCheckIntervalInSeconds=2"])
    admin = endpoint.admin_url
    ns = make_namespace(admin, "producer_exception")
    topic = f"persistent://{ns}/t"
    client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=30)
    try:
        producer = fill(client, topic)
        # Disconnected by the check, the producer cannot reconnect: its sends fail.
        deadline = time.time() + 60
        failed = None
        while time.time() < deadline and failed is None:
            try:
                producer.send(b"more")
                time.sleep(0.5)
            except pulsar.PulsarException as e:
                failed = e
        assert failed is not None
        s = stats(admin, topic)
        assert s["publishers"] == []
    finally:
        client.close()
