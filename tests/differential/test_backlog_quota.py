"""Backlog quotas (destination_storage) as Pulsar enforces them: a producer is refused on a topic
over its quota (producer_exception / producer_request_hold, each with its own error), and the
periodic check (backlogQuotaCheckIntervalInSeconds) disconnects producers or evicts the slowest
subscriptions' oldest messages (consumer_backlog_eviction)."""

import contextlib
import time
import uuid

import pulsar
import pytest
import requests

LIMIT = 10240


def quota_namespace(admin, policy, quota_type=None, body=None):
    """A fresh namespace with a backlog quota: `body` (default: limitSize LIMIT) and `policy`, of
    `quota_type` (None: no backlogQuotaType parameter, Pulsar's default destination_storage)."""
    ns = f"public/bq-{uuid.uuid4().hex[:8]}"
    assert requests.put(f"{admin}/admin/v2/namespaces/{ns}", timeout=30).status_code == 204
    params = {"backlogQuotaType": quota_type} if quota_type else None
    r = requests.post(f"{admin}/admin/v2/namespaces/{ns}/backlogQuota", params=params,
                      json=dict(body or {"limitSize": LIMIT}, policy=policy), timeout=30)
    assert r.status_code == 204, r.text
    return ns


@contextlib.contextmanager
def quota_topic(endpoint, policy, quota_type=None, body=None, timeout_s=30):
    """A client on `endpoint` (closed afterwards), persistent://NS/t with NS a quota_namespace,
    and the admin URL."""
    ns = quota_namespace(endpoint.admin_url, policy, quota_type, body)
    client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=timeout_s)
    try:
        yield client, f"persistent://{ns}/t", endpoint.admin_url
    finally:
        client.close()


def fill(client, topic, n=40, size=1024):
    """A subscription that does not consume, and n messages of `size` bytes (by default ~4x the
    quota); returns the producer."""
    client.subscribe(topic, "s").close()
    p = client.create_producer(topic, batching_enabled=False)
    for _ in range(n):
        p.send(b"x" * size)
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
    ns = quota_namespace(admin_url, policy)
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
    ns = quota_namespace(admin_url, "consumer_backlog_eviction")
    topic = f"persistent://{ns}/t"
    first = fill(client, topic)
    client.create_producer(topic).close()  # eviction never refuses producers
    first.close()


@pytest.mark.admin
def test_periodic_check_evicts_the_oldest_messages(start_broker):
    endpoint = start_broker(["backlogQuotaCheckIntervalInSeconds=2"])
    with quota_topic(endpoint, "consumer_backlog_eviction") as (client, topic, admin):
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


@pytest.mark.admin
def test_periodic_check_disconnects_producers_over_the_quota(start_broker):
    endpoint = start_broker(["backlogQuotaCheckIntervalInSeconds=2"])
    with quota_topic(endpoint, "producer_exception") as (client, topic, admin):
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


# --- one broker with a 1 s check and Pulsar's precise message_age check, for the tests below ---
# (with --broker-url the running broker is used: start it with
#  --set backlogQuotaCheckIntervalInSeconds=1 --set preciseTimeBasedBacklogQuotaCheck=true)
QUOTA_SETTINGS = ["backlogQuotaCheckIntervalInSeconds=1", "preciseTimeBasedBacklogQuotaCheck=true"]


@pytest.fixture(scope="module")
def quota_broker(request):
    from harness.broker import BrokerEndpoint, broker_process
    from harness.fixtures import wait_namespace
    url = request.config.getoption("--broker-url", None)
    if url:
        yield BrokerEndpoint("external", url, request.config.getoption("--admin-url", None))
        return
    proc = broker_process(request.config.getoption("--broker", "magnetar"), QUOTA_SETTINGS)
    endpoint = proc.start()
    wait_namespace(endpoint.admin_url)
    try:
        yield endpoint
    finally:
        proc.close()


def send_until_fails(producer, deadline_s=30):
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        try:
            producer.send(b"more")
            time.sleep(0.3)
        except pulsar.PulsarException as e:
            return e
    return None


@pytest.mark.admin
@pytest.mark.parametrize("policy,error", [
    ("producer_exception", pulsar.ProducerBlockedQuotaExceededException),
    ("producer_request_hold", pulsar.ProducerBlockedQuotaExceededError),
])
def test_message_age_quota_refuses_producers(quota_broker, policy, error):
    with quota_topic(quota_broker, policy, "message_age", {"limitTime": 2},
                     10) as (client, topic, admin):
        fill(client, topic, 5, 100).close()
        time.sleep(5)  # older than 2 s, and a check ran since
        s = stats(admin, topic)
        assert s["backlogQuotaLimitTime"] == 2
        assert s["oldestBacklogMessageAgeSeconds"] >= 2
        with pytest.raises(error):
            client.create_producer(topic)
        # A size quota alone is not exceeded by this backlog.
        assert s["backlogSize"] < 10240


@pytest.mark.admin
def test_message_age_eviction_expires_the_old_backlog(quota_broker):
    with quota_topic(quota_broker, "consumer_backlog_eviction", "message_age", {"limitTime": 2},
                     10) as (client, topic, admin):
        p = fill(client, topic, 5, 100)
        deadline = time.time() + 30
        while time.time() < deadline and stats(admin, topic)["subscriptions"]["s"]["msgBacklog"]:
            time.sleep(0.5)
        sub = stats(admin, topic)["subscriptions"]["s"]
        assert sub["msgBacklog"] == 0
        p.send(b"new")  # producers are never refused by eviction
        p.close()


@pytest.mark.admin
@pytest.mark.parametrize("policy,error", [
    # Held: the client keeps its sends pending while it retries, so they time out.
    ("producer_request_hold", pulsar.Timeout),
    ("producer_exception", pulsar.ProducerBlockedQuotaExceededException),
])
def test_connected_producer_over_the_size_quota(quota_broker, policy, error):
    with quota_topic(quota_broker, policy, "destination_storage",
                     timeout_s=10) as (client, topic, admin):
        client.subscribe(topic, "s").close()
        p = client.create_producer(topic, batching_enabled=False, send_timeout_millis=3000)
        failed = None
        for _ in range(40):
            try:
                p.send(b"x" * 1024)
            except pulsar.PulsarException as e:
                # A loaded machine: the periodic check ran before the 40 sends were done (only
                # after the backlog passed the quota: 11 sends).
                failed = e
                break
        failed = failed or send_until_fails(p)
        assert isinstance(failed, error), repr(failed)
        assert stats(admin, topic)["publishers"] == []


@pytest.mark.admin
def test_backlog_quota_rest_errors(admin_url):
    ns = f"public/bq-{uuid.uuid4().hex[:8]}"
    base = f"{admin_url}/admin/v2/namespaces/{ns}"
    # A create-namespace body's backlog_quota_map is read, and refused (400) when malformed.
    assert requests.put(base, json={"backlog_quota_map": "x"}, timeout=30).status_code == 400
    bad = {"backlog_quota_map": {"destination_storage": {"limitSize": "big"}}}
    assert requests.put(base, json=bad, timeout=30).status_code == 400
    good = {"backlog_quota_map": {"destination_storage": {"limitSize": 5,
                                                           "policy": "producer_exception"}}}
    assert requests.put(base, json=good, timeout=30).status_code == 204
    q = requests.get(f"{base}/backlogQuotaMap", timeout=30).json()["destination_storage"]
    assert (q["limitSize"], q["limitTime"], q["policy"]) == (5, 0, "producer_exception")
    # An unknown backlogQuotaType is a 404 (JAX-RS), for POST and DELETE, and changes nothing.
    for method in ("post", "delete"):
        r = requests.request(method, f"{base}/backlogQuota", params={"backlogQuotaType": "bogus"},
                             json={"limitSize": 1}, timeout=30)
        assert r.status_code == 404, (method, r.status_code)
    assert "destination_storage" in requests.get(f"{base}/backlogQuotaMap", timeout=30).json()
    topic = f"{admin_url}/admin/v2/persistent/{ns}/t/backlogQuota"
    r = requests.delete(topic, params={"backlogQuotaType": "bogus"}, timeout=30)
    assert r.status_code == 404
