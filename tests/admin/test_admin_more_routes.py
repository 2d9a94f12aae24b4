"""The pulsar-admin routes added for topics list, peek/expire/inspect, topic policies, namespace
unload/replication/subscriptionExpirationTime/autoTopicCreation, brokers, broker-stats and
clusters peers, against a real Magnetar broker (Pulsar's paths, shapes and status codes)."""

import time
import uuid

import pulsar
import pytest

from harness.util import wait_for


def assert_error(r, status):
    assert r.status_code == status, r.text
    assert isinstance(r.json().get("reason"), str) and r.json()["reason"]


def topic_in(namespace, prefix="t"):
    return f"persistent://{namespace}/{prefix}-{uuid.uuid4().hex[:8]}"


def rest(topic):
    return "/admin/v2/persistent/" + topic[len("persistent://"):]


def produce(client, topic, payloads, **kwargs):
    p = client.create_producer(topic, batching_enabled=False)
    ids = [p.send(x, **kwargs) for x in payloads]
    p.close()
    return ids


def create_sub(http, topic, sub):
    r = http("PUT", f"{rest(topic)}/subscription/{sub}")
    assert r.status_code == 204, r.text


def sub_stats(http, topic, sub):
    return http("GET", f"{rest(topic)}/stats").json()["subscriptions"][sub]


# --- item 1: non-persistent --------------------------------------------------------------------

def test_non_persistent_lists_and_stats(http, namespace):
    assert http("GET", f"/admin/v2/non-persistent/{namespace}").json() == []
    assert http("GET", f"/admin/v2/non-persistent/{namespace}/partitioned").json() == []
    assert_error(http("GET", f"/admin/v2/non-persistent/{namespace}/x/stats"), 404)
    assert_error(http("GET", "/admin/v2/non-persistent/nosuch/ns"), 404)


# --- item 2: peek, inspect, expire -------------------------------------------------------------

def test_peek_messages_returns_produced_bytes_and_headers(http, namespace, client):
    topic = topic_in(namespace)
    create_sub(http, topic, "s")
    ids = produce(client, topic, [b"one", b"two\x00bin", b"three"], properties={"k": "v"})
    r = http("GET", f"{rest(topic)}/subscription/s/position/2")
    assert r.status_code == 200, r.text
    assert r.content == b"two\x00bin"
    assert r.headers["X-Pulsar-Message-ID"] == f"{ids[1].ledger_id()}:{ids[1].entry_id()}"
    assert r.headers["X-Pulsar-PROPERTY-k"] == "v"
    assert "X-Pulsar-publish-time" in r.headers
    assert http("GET", f"{rest(topic)}/subscription/s/position/1").content == b"one"
    assert_error(http("GET", f"{rest(topic)}/subscription/s/position/4"), 404)
    assert_error(http("GET", f"{rest(topic)}/subscription/nosub/position/1"), 404)
    # Acked entries are skipped: after skipping one, position 1 is the second message.
    assert http("POST", f"{rest(topic)}/subscription/s/skip/1").status_code == 204
    assert http("GET", f"{rest(topic)}/subscription/s/position/1").content == b"two\x00bin"


def test_peek_batched_message_has_batch_header(http, namespace, client):
    topic = topic_in(namespace)
    create_sub(http, topic, "s")
    p = client.create_producer(topic, batching_enabled=True, batching_max_messages=3,
                               batching_max_publish_delay_ms=1000)
    for i in range(3):
        p.send_async(f"m{i}".encode(), None)
    p.flush()
    p.close()
    r = http("GET", f"{rest(topic)}/subscription/s/position/1")
    assert r.status_code == 200, r.text
    assert r.headers["X-Pulsar-num-batch-message"] == "3"
    assert b"m0" in r.content and b"m2" in r.content


def test_internal_info_properties_backlog_size_and_analyze(http, namespace, client):
    topic = topic_in(namespace)
    create_sub(http, topic, "s")
    ids = produce(client, topic, [b"x" * 100 for _ in range(4)])
    info = http("GET", f"{rest(topic)}/internal-info").json()
    assert sum(l["entries"] for l in info["ledgers"]) == 4
    assert "s" in info["cursors"] and "markDelete" in info["cursors"]["s"]
    assert http("GET", f"{rest(topic)}/properties").json() == {}
    first = {"ledgerId": ids[0].ledger_id(), "entryId": ids[0].entry_id()}
    size_all = http("PUT", f"{rest(topic)}/backlogSize", json=first)
    assert size_all.status_code == 200, size_all.text
    half = {"ledgerId": ids[2].ledger_id(), "entryId": ids[2].entry_id()}
    size_half = http("PUT", f"{rest(topic)}/backlogSize", json=half).json()
    assert size_all.json() > size_half > 0
    assert_error(http("PUT", f"{rest(topic)}/backlogSize", json={"x": 1}), 412)
    assert_error(http("PUT", f"{rest(topic)}/backlogSize", data="{bad"), 400)
    a = http("POST", f"{rest(topic)}/subscription/s/analyzeBacklog")
    assert a.status_code == 200, a.text
    assert a.json()["entries"] == 4 and a.json()["messages"] == 4
    assert a.json()["filterAcceptedEntries"] == 4 and a.json()["aborted"] is False
    assert_error(http("POST", f"{rest(topic)}/subscription/nosub/analyzeBacklog"), 404)
    assert_error(http("GET", f"{rest(topic_in(namespace))}/internal-info"), 404)


def test_message_id_by_timestamp(http, namespace, client):
    topic = topic_in(namespace)
    produce(client, topic, [b"a"])
    time.sleep(0.05)
    mid = int(time.time() * 1000)
    time.sleep(0.05)
    ids = produce(client, topic, [b"b"])
    r = http("GET", f"{rest(topic)}/messageid/{mid}")
    assert r.status_code == 200, r.text
    assert r.json()["ledgerId"] == ids[0].ledger_id() and r.json()["entryId"] == ids[0].entry_id()
    assert_error(http("GET", f"{rest(topic)}/messageid/{mid + 3600_000}"), 404)
    part = topic_in(namespace)
    assert http("PUT", f"{rest(part)}/partitions", json=2).status_code == 204
    assert_error(http("GET", f"{rest(part)}/messageid/{mid}"), 405)


def test_expire_messages_by_time_moves_only_old_messages(http, namespace, client):
    topic = topic_in(namespace)
    create_sub(http, topic, "s")
    produce(client, topic, [b"old1", b"old2", b"old3"])
    time.sleep(2.5)
    produce(client, topic, [b"new1", b"new2"])
    assert sub_stats(http, topic, "s")["msgBacklog"] == 5
    r = http("POST", f"{rest(topic)}/subscription/s/expireMessages/2")
    assert r.status_code == 204, r.text
    st = sub_stats(http, topic, "s")
    assert st["msgBacklog"] == 2
    assert st["totalMsgExpired"] == 3
    assert st["lastExpireTimestamp"] > 0
    assert http("GET", f"{rest(topic)}/subscription/s/position/1").content == b"new1"
    assert_error(http("POST", f"{rest(topic)}/subscription/nosub/expireMessages/2"), 404)
    assert_error(http("POST", f"{rest(topic)}/subscription/s/expireMessages/-1"), 412)
    assert wait_for(lambda: sub_stats(http, topic, "s")["msgRateExpired"] > 0, 6)


def test_expire_messages_by_id_and_all_subscriptions(http, namespace, client):
    topic = topic_in(namespace)
    create_sub(http, topic, "a")
    create_sub(http, topic, "b")
    ids = produce(client, topic, [b"1", b"2", b"3", b"4"])
    body = {"ledgerId": ids[1].ledger_id(), "entryId": ids[1].entry_id()}
    r = http("POST", f"{rest(topic)}/subscription/a/expireMessages", json=body)
    assert r.status_code == 204, r.text
    assert sub_stats(http, topic, "a")["msgBacklog"] == 2
    assert sub_stats(http, topic, "a")["totalMsgExpired"] == 2
    assert sub_stats(http, topic, "b")["msgBacklog"] == 4
    assert_error(http("POST", f"{rest(topic)}/subscription/a/expireMessages", json={"l": 1}), 412)
    r = http("POST", f"{rest(topic)}/all_subscription/expireMessages/0")
    assert r.status_code == 204, r.text
    assert sub_stats(http, topic, "a")["msgBacklog"] == 0
    assert sub_stats(http, topic, "b")["msgBacklog"] == 0
    part = topic_in(namespace)
    assert http("PUT", f"{rest(part)}/partitions", json=2).status_code == 204
    create_sub(http, part, "s")
    assert_error(http("POST", f"{rest(part)}/subscription/s/expireMessages", json=body), 405)
    assert http("POST", f"{rest(part)}/subscription/s/expireMessages/0").status_code == 204


# --- item 3: topic policies --------------------------------------------------------------------

def test_topic_max_producers_policy_is_enforced(http, namespace, client):
    topic = topic_in(namespace)
    assert http("PUT", rest(topic)).status_code == 204
    assert http("GET", f"{rest(topic)}/maxProducers").status_code == 204
    assert http("GET", f"{rest(topic)}/maxProducers?applied=true").json() == 0
    assert http("POST", f"{rest(topic)}/maxProducers", json=1).status_code == 204
    assert http("GET", f"{rest(topic)}/maxProducers").json() == 1
    p1 = client.create_producer(topic)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)
    assert http("DELETE", f"{rest(topic)}/maxProducers").status_code == 204
    assert http("GET", f"{rest(topic)}/maxProducers").status_code == 204
    p2 = client.create_producer(topic)
    p2.close()
    p1.close()
    assert_error(http("POST", f"{rest(topic)}/maxProducers", json=-1), 412)


def test_topic_max_consumers_and_subscriptions_policies(http, namespace, client):
    topic = topic_in(namespace)
    assert http("PUT", rest(topic)).status_code == 204
    assert http("POST", f"{rest(topic)}/maxConsumers", json=1).status_code == 204
    assert http("POST", f"{rest(topic)}/maxSubscriptionsPerTopic", json=2).status_code == 204
    c1 = client.subscribe(topic, "s1", consumer_type=pulsar.ConsumerType.Shared)
    with pytest.raises(Exception):
        client.subscribe(topic, "s1", consumer_type=pulsar.ConsumerType.Shared)
    c1.close()
    assert http("DELETE", f"{rest(topic)}/maxConsumers").status_code == 204
    client.subscribe(topic, "s2").close()
    with pytest.raises(Exception):
        client.subscribe(topic, "s3")


def test_topic_policies_stored_shown_removed(http, namespace, admin_url):
    topic = topic_in(namespace)
    assert http("PUT", rest(topic)).status_code == 204
    cases = {
        "retention": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10},
        "maxConsumers": 3,
        "maxUnackedMessagesOnConsumer": 10,
        "maxUnackedMessagesOnSubscription": 20,
        "deduplicationEnabled": True,
        "delayedDelivery": {"tickTime": 500, "active": True, "maxDeliveryDelayInMillis": 0},
        "compactionThreshold": 1048576,
        "maxSubscriptionsPerTopic": 5,
        "inactiveTopicPolicies": {"inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
                                  "maxInactiveDurationSeconds": 120,
                                  "deleteWhileInactive": True},
        "persistence": {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 2,
                        "bookkeeperAckQuorum": 2, "managedLedgerMaxMarkDeleteRate": 1.5},
    }
    for name, value in cases.items():
        assert http("GET", f"{rest(topic)}/{name}").status_code == 204, name
        r = http("POST", f"{rest(topic)}/{name}", json=value)
        assert r.status_code == 204, (name, r.text)
        assert http("GET", f"{rest(topic)}/{name}").json() == value, name
    # messageTTL takes a query parameter, as in Pulsar.
    assert http("POST", f"{rest(topic)}/messageTTL?messageTTL=30", data="").status_code == 204
    assert http("GET", f"{rest(topic)}/messageTTL").json() == 30
    assert_error(http("POST", f"{rest(topic)}/messageTTL?messageTTL=-5", data=""), 412)
    r = http("POST", f"{rest(topic)}/backlogQuota?backlogQuotaType=destination_storage",
             json={"limitSize": 1024, "limitTime": -1, "policy": "producer_exception"})
    assert r.status_code == 204, r.text
    assert http("GET", f"{rest(topic)}/backlogQuotaMap").json() == {
        "destination_storage": {"limitSize": 1024, "limitTime": -1,
                                "policy": "producer_exception"}}
    assert_error(http("POST", f"{rest(topic)}/retention",
                      json={"retentionTimeInMinutes": 0, "retentionSizeInMB": 5}), 400)
    assert_error(http("POST", f"{rest(topic)}/persistence",
                      json={"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 2,
                            "bookkeeperAckQuorum": 1}), 412)
    for name in cases:
        assert http("DELETE", f"{rest(topic)}/{name}").status_code == 204
        assert http("GET", f"{rest(topic)}/{name}").status_code == 204
    assert http("DELETE", f"{rest(topic)}/backlogQuota").status_code == 204
    assert http("GET", f"{rest(topic)}/backlogQuotaMap").json() == {}
    # applied=true falls back to the namespace, then the broker.
    assert http("POST", f"/admin/v2/namespaces/{namespace}/messageTTL", json=77).status_code == 204
    assert http("DELETE", f"{rest(topic)}/messageTTL").status_code == 204
    assert http("GET", f"{rest(topic)}/messageTTL?applied=true").json() == 77
    assert http("GET", f"{rest(topic)}/maxUnackedMessagesOnConsumer?applied=true").json() == 50000
    assert "destination_storage" in http(
        "GET", f"{rest(topic)}/backlogQuotaMap?applied=true").json()
    # Errors: a missing topic, a partition's name.
    assert_error(http("GET", f"{rest(topic_in(namespace))}/retention"), 404)
    part = topic_in(namespace)
    assert http("PUT", f"{rest(part)}/partitions", json=2).status_code == 204
    assert http("POST", f"{rest(part)}/maxProducers", json=2).status_code == 204
    assert_error(http("GET", f"{rest(part)}-partition-0/maxProducers"), 412)


def test_topic_policy_on_partitioned_topic_applies_to_partitions(http, namespace, client):
    topic = topic_in(namespace)
    assert http("PUT", f"{rest(topic)}/partitions", json=2).status_code == 204
    assert http("POST", f"{rest(topic)}/maxProducers", json=1).status_code == 204
    p1 = client.create_producer(f"{topic}-partition-0")
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(f"{topic}-partition-0")
    p1.close()


# --- item 4: namespaces ------------------------------------------------------------------------

def test_namespace_unload_replication_and_subscription_expiration(http, namespace, client):
    topic = topic_in(namespace)
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic)
    assert wait_for(lambda: len(http("GET", f"{rest(topic)}/stats").json()["publishers"]) == 1)
    assert http("PUT", f"/admin/v2/namespaces/{namespace}/unload").status_code == 204
    # The clients reconnect and keep working.
    producer.send(b"after-unload")
    assert consumer.receive(timeout_millis=10000).data() == b"after-unload"
    assert http("GET", f"/admin/v2/namespaces/{namespace}/replication").json() == ["standalone"]
    path = f"/admin/v2/namespaces/{namespace}/subscriptionExpirationTime"
    assert http("GET", path).status_code == 204
    assert http("POST", path, json=30).status_code == 204
    assert http("GET", path).json() == 30
    assert_error(http("POST", path, json=-2), 412)
    assert http("DELETE", path).status_code == 204
    assert http("GET", path).status_code == 204
    assert_error(http("PUT", "/admin/v2/namespaces/nosuch/ns/unload"), 404)


def test_namespace_auto_topic_creation_is_enforced(http, namespace, client):
    path = f"/admin/v2/namespaces/{namespace}/autoTopicCreation"
    assert http("GET", path).status_code == 204
    assert http("POST", path, json={"allowAutoTopicCreation": False}).status_code == 204
    assert http("GET", path).json()["allowAutoTopicCreation"] is False
    with pytest.raises(Exception):
        client.create_producer(topic_in(namespace), send_timeout_millis=3000)
    with pytest.raises(Exception):
        client.subscribe(topic_in(namespace), "s")
    body = {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 3}
    assert http("POST", path, json=body).status_code == 204
    assert http("GET", path).json() == body
    topic = topic_in(namespace)
    client.create_producer(topic).close()
    assert http("GET", f"{rest(topic)}/partitions").json()["partitions"] == 3
    assert_error(http("POST", path, json={"allowAutoTopicCreation": True,
                                          "topicType": "partitioned"}), 412)
    assert_error(http("POST", path, json={"allowAutoTopicCreation": True,
                                          "topicType": "non-partitioned",
                                          "defaultNumPartitions": 2}), 412)
    assert_error(http("POST", path, json={"allowAutoTopicCreation": True, "topicType": "x"}), 412)
    assert http("DELETE", path).status_code == 204
    client.create_producer(topic_in(namespace)).close()


# --- item 5: brokers, broker-stats, clusters ---------------------------------------------------

def test_brokers_leader_version_internal_config_owned_namespaces(http, broker, namespace, client):
    port = broker.admin_url.rsplit(":", 1)[1]
    leader = http("GET", "/admin/v2/brokers/leaderBroker").json()
    assert leader["serviceUrl"] == broker.admin_url
    assert leader["brokerId"] == f"127.0.0.1:{port}"
    v = http("GET", "/admin/v2/brokers/version")
    assert v.status_code == 200 and v.text
    internal = http("GET", "/admin/v2/brokers/internal-configuration").json()
    assert "metadataStoreUrl" in internal and "bookkeeperMetadataServiceUri" in internal
    topic = topic_in(namespace)
    client.create_producer(topic).close()
    owned = http("GET", f"/admin/v2/brokers/standalone/127.0.0.1:{port}/ownedNamespaces").json()
    mine = [k for k in owned if k.startswith(namespace + "/0x")]
    assert mine and owned[mine[0]] == {"broker_assignment": "shared", "is_controlled": False,
                                       "is_active": True}
    assert_error(http("GET", f"/admin/v2/brokers/other/127.0.0.1:{port}/ownedNamespaces"), 404)
    assert http("GET", "/admin/v2/clusters/standalone/peers").status_code == 204
    assert_error(http("GET", "/admin/v2/clusters/other/peers"), 404)


def test_broker_stats(http, namespace, client):
    topic = topic_in(namespace)
    produce(client, topic, [b"x"])
    topics = http("GET", "/admin/v2/broker-stats/topics").json()
    bundles = topics[namespace]
    assert any(topic in b["persistent"] for b in bundles.values())
    metrics = http("GET", "/admin/v2/broker-stats/metrics").json()
    # The broker-wide connection set first (Pulsar's "connection" dimension), then one per
    # namespace.
    conn = [m for m in metrics if m["dimensions"].get("metric") == "connection"]
    assert len(conn) == 1 and conn[0]["metrics"]["brk_active_connections"] >= 1, conn
    mine = [m for m in metrics if m["dimensions"].get("namespace") == namespace]
    assert mine and mine[0]["metrics"]["brk_no_of_topics"] >= 1
    report = http("GET", "/admin/v2/broker-stats/load-report").json()
    assert report["loadReportType"] == "LocalBrokerData" and report["numTopics"] >= 1


# --- item 6: every Pulsar dynamic key is accepted ----------------------------------------------

PULSAR_ONLY_DYNAMIC = {  # keys Pulsar marks dynamic that Magnetar has no feature for yet
    "loadBalancerSheddingEnabled": "false",
    "dispatchThrottlingRatePerTopicInMsg": "100",
    "maxTenants": "10",
    "subscriptionTypesEnabled": "Exclusive,Shared",
    "loadBalancerServiceUnitTableViewSyncer": "None",
    "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds": "600",
    "keySharedLookAheadMsgInReplayThresholdPerConsumer": "1000",
}


def test_update_dynamic_config_accepts_every_pulsar_dynamic_key(http):
    names = http("GET", "/admin/v2/brokers/configuration").json()
    for key, value in PULSAR_ONLY_DYNAMIC.items():
        assert key in names, key
        r = http("POST", f"/admin/v2/brokers/configuration/{key}/{value}")
        assert r.status_code == 204, (key, r.text)
        assert http("GET", "/admin/v2/brokers/configuration/values").json()[key] == value
    r = http("POST", "/admin/v2/brokers/configuration/noSuchKey/1")
    assert_error(r, 412)
    assert r.json()["reason"] == "Cannot update non-dynamic configuration"
    assert_error(http("POST", "/admin/v2/brokers/configuration/maxTenants/abc"), 412)
    http("POST", "/admin/v2/brokers/configuration/"
         "keySharedLookAheadMsgInReplayThresholdPerConsumer/2000")


# --- routing -----------------------------------------------------------------------------------

def test_literal_broker_paths_win_over_cluster_param(http):
    r = http("GET", "/admin/v2/brokers/internal-configuration")
    assert r.status_code == 200 and "Cluster" not in r.text
    assert http("GET", "/admin/v2/brokers/leaderBroker").status_code == 200


def test_topics_list_like_pulsar_admin(http, namespace, client):
    """pulsar-admin topics list calls both the persistent and the non-persistent list."""
    topic = topic_in(namespace)
    client.create_producer(topic).close()
    persistent = http("GET", f"/admin/v2/persistent/{namespace}").json()
    non_persistent = http("GET", f"/admin/v2/non-persistent/{namespace}").json()
    assert topic in set(persistent) | set(non_persistent)
