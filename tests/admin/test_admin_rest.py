"""The /admin/v2 and /lookup/v2 REST API of a real Magnetar broker: every path, its success answer
(Pulsar's JSON fields) and its errors (Pulsar's status codes with a JSON "reason")."""

import time
import uuid

import pulsar
import pytest
from pulsar import ConsumerType

from harness.util import wait_for


def receive_n(consumer, n, timeout_ms=10000):
    return [consumer.receive(timeout_millis=timeout_ms) for _ in range(n)]


def assert_error(r, status):
    assert r.status_code == status, r.text
    assert isinstance(r.json().get("reason"), str) and r.json()["reason"]


# --- routing -------------------------------------------------------------------------------------

def test_unknown_path_and_wrong_method(http):
    assert_error(http("GET", "/admin/v2/no-such-thing"), 404)
    assert_error(http("DELETE", "/admin/v2/clusters"), 405)


# --- clusters and brokers ------------------------------------------------------------------------

def test_clusters(http, broker):
    assert http("GET", "/admin/v2/clusters").json() == ["standalone"]
    c = http("GET", "/admin/v2/clusters/standalone").json()
    assert c["brokerServiceUrl"] == broker.service_url
    assert c["serviceUrl"] == broker.admin_url
    assert_error(http("GET", "/admin/v2/clusters/other"), 404)


def test_brokers_list_health_and_runtime_config(http, broker):
    port = broker.admin_url.rsplit(":", 1)[1]
    assert http("GET", "/admin/v2/brokers/standalone").json() == [f"127.0.0.1:{port}"]
    assert_error(http("GET", "/admin/v2/brokers/other"), 404)
    r = http("GET", "/admin/v2/brokers/health")
    assert r.status_code == 200 and r.text == "ok"
    runtime = http("GET", "/admin/v2/brokers/configuration/runtime").json()
    assert runtime["clusterName"] == "standalone"


def test_dynamic_configuration_update(http):
    keys = http("GET", "/admin/v2/brokers/configuration").json()
    assert "dispatcherMaxReadBatchSize" in keys
    r = http("POST", "/admin/v2/brokers/configuration/dispatcherMaxReadBatchSize/42")
    assert r.status_code == 204, r.text
    assert http("GET", "/admin/v2/brokers/configuration/runtime").json()[
        "dispatcherMaxReadBatchSize"] == "42"
    assert http("GET", "/admin/v2/brokers/configuration/values").json()[
        "dispatcherMaxReadBatchSize"] == "42"
    assert_error(http("POST", "/admin/v2/brokers/configuration/brokerServicePort/7000"), 412)
    assert_error(http("POST", "/admin/v2/brokers/configuration/noSuchKey/1"), 412)
    assert_error(http("POST", "/admin/v2/brokers/configuration/dispatcherMaxReadBatchSize/abc"),
                 412)
    assert http("POST", "/admin/v2/brokers/configuration/dispatcherMaxReadBatchSize/100"
                ).status_code == 204


# --- tenants -------------------------------------------------------------------------------------

def test_tenant_lifecycle(http):
    name = f"t-{uuid.uuid4().hex[:8]}"
    body = {"allowedClusters": ["standalone"], "adminRoles": ["r1"]}
    assert http("PUT", f"/admin/v2/tenants/{name}", json=body).status_code == 204
    assert_error(http("PUT", f"/admin/v2/tenants/{name}", json=body), 409)
    assert http("GET", f"/admin/v2/tenants/{name}").json() == body
    assert name in http("GET", "/admin/v2/tenants").json()
    r = http("POST", f"/admin/v2/tenants/{name}",
             json={"allowedClusters": ["standalone"], "adminRoles": ["r1", "r2"]})
    assert r.status_code == 204
    assert http("GET", f"/admin/v2/tenants/{name}").json()["adminRoles"] == ["r1", "r2"]
    assert http("PUT", f"/admin/v2/namespaces/{name}/ns").status_code == 204
    assert_error(http("DELETE", f"/admin/v2/tenants/{name}"), 409)
    assert http("DELETE", f"/admin/v2/namespaces/{name}/ns").status_code == 204
    assert http("DELETE", f"/admin/v2/tenants/{name}").status_code == 204
    assert_error(http("GET", f"/admin/v2/tenants/{name}"), 404)
    assert_error(http("DELETE", f"/admin/v2/tenants/{name}"), 404)
    assert_error(http("POST", f"/admin/v2/tenants/{name}", json=body), 404)


def test_tenant_errors(http):
    assert_error(http("PUT", "/admin/v2/tenants/t-x", json={"allowedClusters": ["nocluster"]}),
                 412)
    assert_error(http("PUT", "/admin/v2/tenants/bad%20name", json={}), 412)
    assert_error(http("PUT", "/admin/v2/tenants/t-bad-json", data="{bad json"), 400)
    assert_error(http("PUT", "/admin/v2/tenants/t-bad-type", json={"adminRoles": "r1"}), 400)
    assert "t-bad-json" not in http("GET", "/admin/v2/tenants").json()


# --- namespaces and policies ---------------------------------------------------------------------

def test_namespace_lifecycle(http, tenant, client):
    ns = f"{tenant}/ns1"
    assert http("PUT", f"/admin/v2/namespaces/{ns}").status_code == 204
    assert_error(http("PUT", f"/admin/v2/namespaces/{ns}"), 409)
    assert_error(http("PUT", "/admin/v2/namespaces/no-such-tenant/ns"), 404)
    assert_error(http("PUT", f"/admin/v2/namespaces/{tenant}/bad%20ns"), 412)
    assert http("GET", f"/admin/v2/namespaces/{tenant}").json() == [ns]
    assert_error(http("GET", "/admin/v2/namespaces/no-such-tenant"), 404)

    p = http("GET", f"/admin/v2/namespaces/{ns}").json()
    assert p["replication_clusters"] == ["standalone"]
    assert p["bundles"]["numBundles"] == 4
    assert p["retention_policies"] is None and p["deduplicationEnabled"] is None

    producer = client.create_producer(f"persistent://{ns}/t1")
    producer.send(b"x")
    producer.close()
    assert http("GET", f"/admin/v2/namespaces/{ns}/topics").json() == [f"persistent://{ns}/t1"]
    assert_error(http("DELETE", f"/admin/v2/namespaces/{ns}"), 409)
    assert http("DELETE", f"/admin/v2/namespaces/{ns}?force=true").status_code == 204
    assert_error(http("GET", f"/admin/v2/namespaces/{ns}"), 404)
    assert_error(http("DELETE", f"/admin/v2/namespaces/{ns}"), 404)
    # Topics of a deleted namespace are gone: the client can no longer use it.
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer(f"persistent://{ns}/t1")


def test_retention_ttl_deduplication(http, namespace):
    base = f"/admin/v2/namespaces/{namespace}"
    assert http("GET", f"{base}/retention").status_code == 204
    r = http("POST", f"{base}/retention",
             json={"retentionTimeInMinutes": 60, "retentionSizeInMB": 100})
    assert r.status_code == 204
    assert http("GET", f"{base}/retention").json() == {"retentionTimeInMinutes": 60,
                                                       "retentionSizeInMB": 100}
    assert http("GET", base).json()["retention_policies"]["retentionSizeInMB"] == 100
    assert_error(http("POST", f"{base}/retention",
                      json={"retentionTimeInMinutes": 10, "retentionSizeInMB": 0}), 400)
    assert_error(http("POST", f"{base}/retention", data="nope"), 400)
    assert http("DELETE", f"{base}/retention").status_code == 204
    assert http("GET", f"{base}/retention").status_code == 204

    assert http("POST", f"{base}/messageTTL", data="120").status_code == 204
    assert http("GET", f"{base}/messageTTL").json() == 120
    assert_error(http("POST", f"{base}/messageTTL", data="-5"), 412)
    assert http("DELETE", f"{base}/messageTTL").status_code == 204
    assert http("GET", f"{base}/messageTTL").status_code == 204

    assert http("GET", f"{base}/deduplication").status_code == 204
    assert http("POST", f"{base}/deduplication", data="true").status_code == 204
    assert http("GET", f"{base}/deduplication").json() is True
    assert http("GET", base).json()["deduplicationEnabled"] is True
    assert_error(http("POST", f"{base}/deduplication", data="\"yes\""), 400)
    assert http("DELETE", f"{base}/deduplication").status_code == 204
    assert http("GET", f"{base}/deduplication").status_code == 204

    assert_error(http("GET", f"/admin/v2/namespaces/{namespace}-missing/retention"), 404)


def test_backlog_quota(http, namespace):
    base = f"/admin/v2/namespaces/{namespace}"
    assert http("GET", f"{base}/backlogQuotaMap").json() == {}
    quota = {"limitSize": 1 << 20, "limitTime": -1, "policy": "producer_exception"}
    assert http("POST", f"{base}/backlogQuota", json=quota).status_code == 204
    assert http("GET", f"{base}/backlogQuotaMap").json() == {"destination_storage": quota}
    assert http("GET", base).json()["backlog_quota_map"] == {"destination_storage": quota}
    age = {"limitSize": -1, "limitTime": 3600, "policy": "consumer_backlog_eviction"}
    r = http("POST", f"{base}/backlogQuota?backlogQuotaType=message_age", json=age)
    assert r.status_code == 204
    assert http("GET", f"{base}/backlogQuotaMap").json()["message_age"] == age
    assert_error(http("POST", f"{base}/backlogQuota", json={"policy": "drop_everything"}), 400)
    # Not a BacklogQuotaType: 404, as Pulsar's JAX-RS answers it, for POST and DELETE.
    r = http("POST", f"{base}/backlogQuota?backlogQuotaType=bogus", json=quota)
    assert r.status_code == 404
    assert http("DELETE", f"{base}/backlogQuota?backlogQuotaType=bogus").status_code == 404
    assert "destination_storage" in http("GET", f"{base}/backlogQuotaMap").json()
    assert http("DELETE", f"{base}/backlogQuota").status_code == 204
    assert list(http("GET", f"{base}/backlogQuotaMap").json()) == ["message_age"]


def test_permissions(http, namespace):
    base = f"/admin/v2/namespaces/{namespace}/permissions"
    assert http("GET", base).json() == {}
    assert http("POST", f"{base}/app-1", json=["consume", "produce"]).status_code == 204
    assert http("POST", f"{base}/app-2", json=["consume"]).status_code == 204
    assert http("GET", base).json() == {"app-1": ["produce", "consume"], "app-2": ["consume"]}
    assert http("GET", f"/admin/v2/namespaces/{namespace}").json()["auth_policies"][
        "namespace_auth"]["app-2"] == ["consume"]
    # An unknown action is taken as Pulsar 4.2.4 takes it: 204, stored as null.
    assert http("POST", f"{base}/app-3", json=["fly"]).status_code == 204
    assert http("GET", base).json()["app-3"] == [None]
    assert_error(http("POST", f"{base}/app-4", json={"produce": True}), 400)
    assert http("DELETE", f"{base}/app-1").status_code == 204
    assert http("DELETE", f"{base}/app-3").status_code == 204
    assert http("GET", base).json() == {"app-2": ["consume"]}


# --- topics --------------------------------------------------------------------------------------

def test_topic_create_list_delete(http, namespace, client):
    base = f"/admin/v2/persistent/{namespace}"
    assert http("GET", base).json() == []
    assert http("PUT", f"{base}/plain").status_code == 204
    assert_error(http("PUT", f"{base}/plain"), 409)
    assert_error(http("PUT", "/admin/v2/persistent/public/no-such-ns/t"), 404)
    assert_error(http("PUT", "/admin/v2/persistent/bad%20tenant/ns/t"), 412)
    assert http("GET", base).json() == [f"persistent://{namespace}/plain"]
    assert http("GET", f"{base}/plain/partitions").json()["partitions"] == 0

    producer = client.create_producer(f"persistent://{namespace}/plain")
    assert_error(http("DELETE", f"{base}/plain"), 412)  # a producer is connected
    assert http("DELETE", f"{base}/plain?force=true").status_code == 204
    assert_error(http("DELETE", f"{base}/plain"), 404)
    assert_error(http("GET", f"{base}/plain/stats"), 404)
    producer.close()


def test_partitioned_topic_lifecycle(http, namespace, client):
    base = f"/admin/v2/persistent/{namespace}"
    assert http("PUT", f"{base}/parted/partitions", data="3").status_code == 204
    assert_error(http("PUT", f"{base}/parted/partitions", data="3"), 409)
    assert_error(http("PUT", f"{base}/other/partitions", data="0"), 406)  # as Pulsar
    assert_error(http("PUT", f"{base}/other/partitions", data="many"), 400)
    assert http("GET", f"{base}/parted/partitions").json()["partitions"] == 3
    assert http("GET", f"{base}/partitioned").json() == [f"persistent://{namespace}/parted"]
    assert http("GET", base).json() == [f"persistent://{namespace}/parted-partition-{i}"
                                        for i in range(3)]
    assert http("POST", f"{base}/parted/partitions", data="5").status_code == 204
    assert http("GET", f"{base}/parted/partitions").json()["partitions"] == 5
    assert_error(http("POST", f"{base}/parted/partitions", data="2"), 422)
    assert_error(http("POST", f"{base}/missing/partitions", data="2"), 404)
    topic = f"persistent://{namespace}/parted"
    assert len(client.get_topic_partitions(topic)) == 5
    assert http("DELETE", f"{base}/parted/partitions").status_code == 204
    assert http("GET", f"{base}/partitioned").json() == []
    assert_error(http("DELETE", f"{base}/parted/partitions"), 404)


def test_stats_fields_and_counters(http, client, namespace):
    topic = f"persistent://{namespace}/stats"
    path = f"/admin/v2/persistent/{namespace}/stats"
    consumer = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared,
                                consumer_name="c1", receiver_queue_size=100)
    producer = client.create_producer(topic, producer_name="p1")
    for _ in range(10):
        producer.send(b"0123456789")
    got = receive_n(consumer, 10)
    for m in got[:4]:
        consumer.acknowledge(m)
    wait_for(lambda: http("GET", f"{path}/stats").json()["subscriptions"]["sub"]["msgBacklog"]
             == 6)
    st = http("GET", f"{path}/stats").json()
    assert st["msgInCounter"] == 10 and st["bytesInCounter"] >= 100
    assert st["msgOutCounter"] == 10 and st["bytesOutCounter"] == st["bytesInCounter"]
    assert st["storageSize"] == st["bytesInCounter"]
    assert 0 < st["backlogSize"] < st["storageSize"]
    (p,) = st["publishers"]
    assert p["producerName"] == "p1" and p["accessMode"] == "Shared" and p["address"]
    sub = st["subscriptions"]["sub"]
    assert sub["type"] == "Shared" and sub["msgBacklog"] == 6 and sub["unackedMessages"] == 6
    assert sub["isDurable"] is True
    (c,) = sub["consumers"]
    assert c["consumerName"] == "c1" and c["unackedMessages"] == 6
    assert 0 < c["availablePermits"] <= 100
    assert c["blockedConsumerOnUnackedMsgs"] is False


def test_rates_move_after_traffic(http, client, namespace):
    topic = f"persistent://{namespace}/rates"
    path = f"/admin/v2/persistent/{namespace}/rates/stats"
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for _ in range(200):
        producer.send_async(b"x" * 100, None)
    producer.flush()
    receive_n(consumer, 200)
    st = wait_for(lambda: (lambda s: s if s["msgRateIn"] > 0 and s["msgRateOut"] > 0 else None)(
        http("GET", path).json()), timeout_s=8)
    assert st, "rates stayed 0 after traffic"
    assert st["msgThroughputIn"] > st["msgRateIn"]  # 100-byte messages
    assert st["publishers"][0]["msgRateIn"] > 0
    assert st["subscriptions"]["sub"]["msgRateOut"] > 0
    # With no traffic the rates fall back to 0 after the next intervals.
    assert wait_for(lambda: http("GET", path).json()["msgRateIn"] == 0, timeout_s=8)


def test_key_shared_stats(http, client, namespace):
    topic = f"persistent://{namespace}/ks"
    client.subscribe(topic, "ks", consumer_type=ConsumerType.KeyShared, consumer_name="a")
    client.subscribe(topic, "ks", consumer_type=ConsumerType.KeyShared, consumer_name="b")
    sub = http("GET", f"/admin/v2/persistent/{namespace}/ks/stats").json()["subscriptions"]["ks"]
    assert sub["type"] == "Key_Shared" and sub["keySharedMode"] == "AUTO_SPLIT"
    ranges = [r for c in sub["consumers"] for r in c["keyHashRanges"]]
    covered = 0
    for r in ranges:
        start, end = (int(x) for x in r.strip("[]").split(","))
        covered += end - start + 1
    assert covered == 65535  # the two consumers own all of [1, 65535] (Pulsar 4 consistent hashing)


def test_partitioned_stats(http, client, namespace):
    base = f"/admin/v2/persistent/{namespace}/ps"
    assert http("PUT", f"{base}/partitions", data="3").status_code == 204
    topic = f"persistent://{namespace}/ps"
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name="pp")
    for i in range(30):
        producer.send(b"m", partition_key=f"k{i}")
    receive_n(consumer, 30)
    st = http("GET", f"{base}/partitioned-stats").json()
    assert st["metadata"]["partitions"] == 3
    assert st["msgInCounter"] == 30
    assert sorted(st["partitions"]) == [f"{topic}-partition-{i}" for i in range(3)]
    assert sum(p["msgInCounter"] for p in st["partitions"].values()) == 30
    assert st["subscriptions"]["sub"]["msgOutCounter"] == 30
    (p,) = st["publishers"]  # one producer name across the partitions: merged
    assert p["producerName"] == "pp" and p["msgInCounter"] == 30
    assert http("GET", f"{base}/partitioned-stats?perPartition=false").json()["partitions"] == {}
    ist = http("GET", f"{base}/partitioned-internalStats").json()
    assert ist["metadata"]["partitions"] == 3
    assert sum(p["entriesAddedCounter"] for p in ist["partitions"].values()) == 30
    assert_error(http("GET", f"/admin/v2/persistent/{namespace}/nope/partitioned-stats"), 404)
    assert_error(http("GET", f"{base}/stats"), 404)  # stats of the partitioned name itself


def test_internal_stats(http, client, namespace):
    topic = f"persistent://{namespace}/internal"
    path = f"/admin/v2/persistent/{namespace}/internal/internalStats"
    consumer = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared)
    producer = client.create_producer(topic)
    ids = [producer.send(f"{i}".encode()) for i in range(6)]
    got = receive_n(consumer, 6)
    for i in (0, 2, 3):  # 0 moves mark-delete; 2..3 stay an individually deleted range
        consumer.acknowledge(got[i])
    consumer.close()
    ist = http("GET", path).json()
    assert ist["entriesAddedCounter"] == 6 and ist["numberOfEntries"] == 6
    assert ist["lastConfirmedEntry"] == f"{ids[5].ledger_id()}:{ids[5].entry_id()}"
    assert ist["state"] == "LedgerOpened"
    assert sum(l["entries"] for l in ist["ledgers"]) == 6
    cur = ist["cursors"]["sub"]
    assert cur["markDeletePosition"] == f"{ids[0].ledger_id()}:{ids[0].entry_id()}"
    assert cur["readPosition"] == f"{ids[1].ledger_id()}:{ids[1].entry_id()}"
    l = ids[0].ledger_id()
    assert cur["individuallyDeletedMessages"] == \
        f"[({l}:{ids[1].entry_id()}..{l}:{ids[3].entry_id()}]]"
    assert cur["messagesConsumedCounter"] == 3
    assert_error(http("GET", f"/admin/v2/persistent/{namespace}/missing/internalStats"), 404)


# --- subscriptions -------------------------------------------------------------------------------

def backlog(http, namespace, topic, sub):
    return http("GET", f"/admin/v2/persistent/{namespace}/{topic}/stats").json()[
        "subscriptions"][sub]["msgBacklog"]


def test_subscription_create_skip_clear_reset(http, client, namespace):
    base = f"/admin/v2/persistent/{namespace}/subs"
    topic = f"persistent://{namespace}/subs"
    producer = client.create_producer(topic)
    assert http("PUT", f"{base}/subscription/s1").status_code == 204
    assert_error(http("PUT", f"{base}/subscription/s1"), 409)
    # As Pulsar: the topic is created (auto-creation is on); a missing namespace is 404.
    assert http("PUT", f"/admin/v2/persistent/{namespace}/auto/subscription/s1").status_code == 204
    assert http("GET", f"/admin/v2/persistent/{namespace}/auto/subscriptions").json() == ["s1"]
    assert_error(http("PUT", "/admin/v2/persistent/public/missing-ns/t/subscription/s1"), 404)
    assert_error(http("PUT", f"{base}/subscription/s-bad", json={"entry": 1}), 412)
    assert http("GET", f"{base}/subscriptions").json() == ["s1"]
    ids = [producer.send(f"{i}".encode()) for i in range(5)]
    # A subscription created without a body starts at the earliest message (Pulsar's default),
    # at "latest" (Long.MAX ids) after the last one, at a message id there.
    assert http("PUT", f"{base}/subscription/s-early").status_code == 204
    assert backlog(http, namespace, "subs", "s-early") == 5
    assert http("PUT", f"{base}/subscription/s-late",
                json={"ledgerId": 2**63 - 1, "entryId": 2**63 - 1}).status_code == 204
    assert backlog(http, namespace, "subs", "s-late") == 0
    assert http("DELETE", f"{base}/subscription/s-late").status_code == 204
    assert http("PUT", f"{base}/subscription/s-mid",
                json={"ledgerId": ids[3].ledger_id(), "entryId": ids[3].entry_id()}
                ).status_code == 204
    assert backlog(http, namespace, "subs", "s-mid") == 2

    assert backlog(http, namespace, "subs", "s1") == 5
    assert http("POST", f"{base}/subscription/s1/skip/2").status_code == 204
    assert backlog(http, namespace, "subs", "s1") == 3
    assert_error(http("POST", f"{base}/subscription/s1/skip/-1"), 412)
    assert_error(http("POST", f"{base}/subscription/nope/skip/1"), 404)
    assert http("POST", f"{base}/subscription/s1/skip_all").status_code == 204
    assert backlog(http, namespace, "subs", "s1") == 0
    assert_error(http("POST", f"{base}/subscription/nope/skip_all"), 404)

    r = http("POST", f"{base}/subscription/s1/resetcursor",
             json={"ledgerId": ids[1].ledger_id(), "entryId": ids[1].entry_id()})
    assert r.status_code == 204
    assert backlog(http, namespace, "subs", "s1") == 4
    assert_error(http("POST", f"{base}/subscription/s1/resetcursor", json={"x": 1}), 412)
    assert_error(http("POST", f"{base}/subscription/s1/resetcursor", data="{"), 400)
    consumer = client.subscribe(topic, "s1")
    assert [m.data() for m in receive_n(consumer, 4)] == [b"1", b"2", b"3", b"4"]

    # Reset by time: everything published at or after the timestamp comes back, and the
    # connected consumer is disconnected and reconnects by itself.
    assert http("POST", f"{base}/subscription/s1/resetcursor/0").status_code == 204
    assert [m.data() for m in receive_n(consumer, 5)] == [b"0", b"1", b"2", b"3", b"4"]
    future = int(time.time() * 1000) + 60_000
    assert http("POST", f"{base}/subscription/s1/resetcursor/{future}").status_code == 204
    assert backlog(http, namespace, "subs", "s1") == 0
    assert_error(http("POST", f"{base}/subscription/s1/resetcursor/soon"), 412)

    assert wait_for(lambda: http("GET", f"{base}/stats").json()["subscriptions"]["s1"][
        "consumers"]), "the consumer reconnected after the reset"
    assert_error(http("DELETE", f"{base}/subscription/s1"), 412)  # a consumer is connected
    assert http("DELETE", f"{base}/subscription/s1?force=true").status_code == 204
    assert_error(http("DELETE", f"{base}/subscription/s1"), 404)
    assert http("DELETE", f"{base}/subscription/s-early").status_code == 204
    assert http("GET", f"{base}/subscriptions").json() == ["s-mid"]


def test_subscriptions_on_partitioned_topic(http, namespace):
    base = f"/admin/v2/persistent/{namespace}/psub"
    assert http("PUT", f"{base}/partitions", data="2").status_code == 204
    assert http("PUT", f"{base}/subscription/s").status_code == 204
    assert http("GET", f"{base}/subscriptions").json() == ["s"]
    for i in range(2):
        part = f"/admin/v2/persistent/{namespace}/psub-partition-{i}"
        assert http("GET", f"{part}/subscriptions").json() == ["s"]
    assert http("DELETE", f"{base}/subscription/s").status_code == 204
    assert http("GET", f"{base}/subscriptions").json() == []


# --- topic actions -------------------------------------------------------------------------------

def test_last_message_id(http, client, namespace):
    base = f"/admin/v2/persistent/{namespace}/last"
    assert http("PUT", base).status_code == 204
    r = http("GET", f"{base}/lastMessageId").json()
    assert (r["ledgerId"], r["entryId"]) == (-1, -1)
    producer = client.create_producer(f"persistent://{namespace}/last")
    last = [producer.send(b"x") for _ in range(3)][-1]
    r = http("GET", f"{base}/lastMessageId").json()
    assert (r["ledgerId"], r["entryId"]) == (last.ledger_id(), last.entry_id())
    assert_error(http("GET", f"/admin/v2/persistent/{namespace}/missing/lastMessageId"), 404)


def test_unload_reconnects_clients(http, client, namespace):
    topic = f"persistent://{namespace}/unload"
    base = f"/admin/v2/persistent/{namespace}/unload"
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    producer.send(b"before")
    assert receive_n(consumer, 1)[0].data() == b"before"
    assert http("PUT", f"{base}/unload").status_code == 204
    producer.send(b"after")  # the clients reconnect by themselves
    # "before" was not acked, so it may come again after the reconnect; "after" must arrive.
    got = [m.data() for m in receive_n(consumer, 1)]
    while got[-1] == b"before":
        got.append(receive_n(consumer, 1)[0].data())
    assert got[-1] == b"after"
    st = wait_for(lambda: (lambda s: s if s["publishers"] and s["subscriptions"]["sub"][
        "consumers"] else None)(http("GET", f"{base}/stats").json()))
    assert st, "producer and consumer came back after unload"
    assert_error(http("PUT", f"/admin/v2/persistent/{namespace}/missing/unload"), 404)


def test_terminate(http, client, namespace):
    topic = f"persistent://{namespace}/term"
    base = f"/admin/v2/persistent/{namespace}/term"
    producer = client.create_producer(topic)
    last = producer.send(b"last")
    r = http("POST", f"{base}/terminate")
    assert r.status_code == 200
    assert (r.json()["ledgerId"], r.json()["entryId"]) == (last.ledger_id(), last.entry_id())
    with pytest.raises(pulsar.TopicTerminated):
        producer.send(b"after-terminate")
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer(topic)
    # Terminating again answers the same last id; the data is still readable.
    again = http("POST", f"{base}/terminate").json()
    assert (again["ledgerId"], again["entryId"]) == (last.ledger_id(), last.entry_id())
    assert http("GET", f"{base}/internalStats").json()["state"] == "Terminated"
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert reader.read_next(timeout_millis=10000).data() == b"last"
    assert http("PUT", f"/admin/v2/persistent/{namespace}/pt/partitions", data="2"
                ).status_code == 204
    assert_error(http("POST", f"/admin/v2/persistent/{namespace}/pt/terminate"), 405)


def test_examine_message_and_get_by_id(http, client, namespace):
    topic = f"persistent://{namespace}/exam"
    base = f"/admin/v2/persistent/{namespace}/exam"
    producer = client.create_producer(topic, producer_name="examiner")
    ids = [producer.send(f"m{i}".encode(), properties={"k": f"v{i}"}) for i in range(3)]
    r = http("GET", f"{base}/examinemessage?initialPosition=earliest&messagePosition=1")
    assert r.status_code == 200 and r.content == b"m0"
    assert r.headers["X-Pulsar-Message-ID"] == f"{ids[0].ledger_id()}:{ids[0].entry_id()}"
    assert r.headers["X-Pulsar-PROPERTY-k"] == "v0"
    assert r.headers["X-Pulsar-producer-name"] == "examiner"
    r = http("GET", f"{base}/examinemessage?initialPosition=latest&messagePosition=1")
    assert r.content == b"m2"
    r = http("GET", f"{base}/examinemessage?initialPosition=latest&messagePosition=3")
    assert r.content == b"m0"
    assert_error(http("GET", f"{base}/examinemessage?initialPosition=latest&messagePosition=4"),
                 404)
    assert_error(http("GET", f"{base}/examinemessage?messagePosition=0"), 412)
    assert_error(http("GET", f"{base}/examinemessage?initialPosition=middle"), 412)
    r = http("GET", f"{base}/ledger/{ids[1].ledger_id()}/entry/{ids[1].entry_id()}")
    assert r.status_code == 200 and r.content == b"m1"
    assert_error(http("GET", f"{base}/ledger/{ids[1].ledger_id()}/entry/999"), 404)
    assert_error(http("GET", f"{base}/ledger/x/entry/1"), 412)


# --- lookup --------------------------------------------------------------------------------------

def test_http_lookup(http, broker):
    r = http("GET", "/lookup/v2/topic/persistent/public/default/lookup-test")
    assert r.status_code == 200
    assert r.json()["brokerUrl"] == broker.service_url
    assert r.json()["httpUrl"] == broker.admin_url
    assert_error(http("GET", "/lookup/v2/topic/persistent/public/missing/t"), 404)


def test_client_with_http_service_url(broker, http, namespace):
    """A client given the http:// URL looks topics up over HTTP, then produces over the binary
    protocol, also for a partitioned topic."""
    assert http("PUT", f"/admin/v2/persistent/{namespace}/viahttp/partitions", data="2"
                ).status_code == 204
    c = pulsar.Client(broker.admin_url, operation_timeout_seconds=15,
                      logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:
        for name in ("viahttp", "plainhttp"):
            topic = f"persistent://{namespace}/{name}"
            consumer = c.subscribe(topic, "sub")
            producer = c.create_producer(topic)
            for i in range(4):
                producer.send(f"{i}".encode(), partition_key=f"k{i}")
            assert sorted(m.data() for m in receive_n(consumer, 4)) == [b"0", b"1", b"2", b"3"]
    finally:
        c.close()


# --- robustness ----------------------------------------------------------------------------------

BAD_BODIES = ["", "{", "null", "[]", "{}", "\"text\"", "-1", "99999999999999999999999", "1e309",
              "{\"ledgerId\": \"x\", \"entryId\": []}", "\u00ff\u00fe", "[" * 2000]


def test_bad_input_never_breaks_the_broker(http, namespace):
    base = f"/admin/v2/persistent/{namespace}/robust"
    assert http("PUT", base).status_code == 204
    targets = [
        ("PUT", "/admin/v2/tenants/t-robust"), ("POST", "/admin/v2/tenants/public"),
        ("PUT", f"/admin/v2/namespaces/{namespace}-x"),
        ("POST", f"/admin/v2/namespaces/{namespace}/retention"),
        ("POST", f"/admin/v2/namespaces/{namespace}/messageTTL"),
        ("POST", f"/admin/v2/namespaces/{namespace}/deduplication"),
        ("POST", f"/admin/v2/namespaces/{namespace}/backlogQuota"),
        ("POST", f"/admin/v2/namespaces/{namespace}/permissions/r"),
        ("PUT", f"{base}-p/partitions"), ("POST", f"{base}/partitions"),
        ("PUT", f"{base}/subscription/s"), ("POST", f"{base}/subscription/s/resetcursor"),
        ("POST", "/admin/v2/brokers/configuration/dispatcherMaxReadBatchSize/%00"),
    ]
    for method, path in targets:
        for body in BAD_BODIES:
            r = http(method, path, data=body.encode("utf-8"))
            assert r.status_code < 500, (method, path, body, r.status_code, r.text)
    for path in [f"{base}/examinemessage?messagePosition=99999999999999999999",
                 f"{base}/ledger/99999999999999999999/entry/-5",
                 f"{base}/subscription/s/skip/99999999999999999999",
                 "/admin/v2/persistent/%ff%fe/ns/t/stats", f"{base}%2Fx/stats"]:
        method = "POST" if "/skip/" in path else "GET"
        r = http(method, path)
        assert r.status_code < 500, (path, r.status_code, r.text)
    assert http("GET", "/admin/v2/brokers/health").text == "ok"
    # The tenants created with a valid name and an empty/odd body are cleaned up.
    http("DELETE", "/admin/v2/tenants/t-robust")
