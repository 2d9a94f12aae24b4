"""Admin REST API (/admin/v2, /lookup/v2): status codes and JSON fields as Pulsar answers them.

Marked `admin`: deselect with -m "not admin" for a broker without the admin API yet.
"""

import uuid

import pulsar
import pytest
from pulsar import ConsumerType

from harness.util import wait_for
from helpers import receive_n

pytestmark = pytest.mark.admin

@pytest.fixture
def http(admin_http):
    return admin_http


def test_health_and_clusters(http):
    r = http("GET", "/admin/v2/brokers/health")
    assert r.status_code == 200 and r.text == "ok"
    r = http("GET", "/admin/v2/clusters")
    assert r.status_code == 200 and r.json() == ["standalone"]


def test_default_tenant_and_namespace_exist(http):
    assert "public" in http("GET", "/admin/v2/tenants").json()
    assert "public/default" in http("GET", "/admin/v2/namespaces/public").json()


def test_tenant_lifecycle_and_errors(http):
    name = f"t-{uuid.uuid4().hex[:8]}"
    body = {"allowedClusters": ["standalone"], "adminRoles": ["r1"]}
    assert http("PUT", f"/admin/v2/tenants/{name}", json=body).status_code == 204
    r = http("PUT", f"/admin/v2/tenants/{name}", json=body)
    assert r.status_code == 409 and "reason" in r.json()
    r = http("GET", f"/admin/v2/tenants/{name}")
    assert r.status_code == 200
    assert r.json()["allowedClusters"] == ["standalone"] and r.json()["adminRoles"] == ["r1"]
    assert name in http("GET", "/admin/v2/tenants").json()
    assert http("PUT", f"/admin/v2/namespaces/{name}/ns").status_code == 204
    r = http("DELETE", f"/admin/v2/tenants/{name}")
    assert r.status_code == 409, "a tenant with namespaces is not deleted"
    assert http("DELETE", f"/admin/v2/namespaces/{name}/ns").status_code == 204
    assert http("DELETE", f"/admin/v2/tenants/{name}").status_code == 204
    r = http("GET", f"/admin/v2/tenants/{name}")
    assert r.status_code == 404 and "reason" in r.json()


def test_tenant_invalid_requests(http):
    r = http("PUT", "/admin/v2/tenants/t-bad-cluster", json={"allowedClusters": ["nocluster"]})
    assert r.status_code == 412 and "reason" in r.json()
    r = http("PUT", "/admin/v2/tenants/bad%20name", json={"allowedClusters": ["standalone"]})
    assert r.status_code == 412
    r = http("PUT", "/admin/v2/tenants/t-bad-json", data="{bad json")
    assert r.status_code == 400


def test_namespace_lifecycle_and_policies(http, tenant):
    ns = f"{tenant}/ns1"
    assert http("PUT", f"/admin/v2/namespaces/{ns}").status_code == 204
    assert http("PUT", f"/admin/v2/namespaces/{ns}").status_code == 409
    assert http("GET", f"/admin/v2/namespaces/{tenant}").json() == [ns]
    policies = http("GET", f"/admin/v2/namespaces/{ns}").json()
    assert policies["replication_clusters"] == ["standalone"]
    assert policies["bundles"]["numBundles"] >= 1

    r = http("POST", f"/admin/v2/namespaces/{ns}/retention",
             json={"retentionTimeInMinutes": 60, "retentionSizeInMB": 100})
    assert r.status_code == 204
    assert http("GET", f"/admin/v2/namespaces/{ns}/retention").json() == \
        {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}
    assert http("POST", f"/admin/v2/namespaces/{ns}/messageTTL", data="120").status_code == 204
    assert http("GET", f"/admin/v2/namespaces/{ns}/messageTTL").json() == 120
    assert http("POST", f"/admin/v2/namespaces/{ns}/deduplication", data="true").status_code == 204
    assert http("GET", f"/admin/v2/namespaces/{ns}/deduplication").json() is True
    assert http("GET", f"/admin/v2/namespaces/{ns}/backlogQuotaMap").json() == {}

    assert http("GET", f"/admin/v2/namespaces/{tenant}/missing/retention").status_code == 404
    assert http("DELETE", f"/admin/v2/namespaces/{ns}").status_code == 204
    assert http("GET", f"/admin/v2/namespaces/{ns}").status_code == 404


def test_topic_create_list_partitions_delete(http, namespace):
    base = f"/admin/v2/persistent/{namespace}"
    assert http("PUT", f"{base}/plain").status_code == 204
    r = http("PUT", f"{base}/plain")
    assert r.status_code == 409 and "reason" in r.json()
    assert http("PUT", f"{base}/parted/partitions", data="4").status_code == 204
    assert http("GET", f"{base}/parted/partitions").json()["partitions"] == 4
    assert http("GET", f"{base}/plain/partitions").json()["partitions"] == 0

    listed = http("GET", base).json()
    assert f"persistent://{namespace}/plain" in listed
    assert all(f"persistent://{namespace}/parted-partition-{i}" in listed for i in range(4))
    assert http("GET", f"{base}/partitioned").json() == [f"persistent://{namespace}/parted"]

    assert http("POST", f"{base}/parted/partitions", data="6").status_code == 204
    assert http("GET", f"{base}/parted/partitions").json()["partitions"] == 6
    r = http("POST", f"{base}/parted/partitions", data="2")
    assert r.status_code == 422 and "reason" in r.json()

    assert http("DELETE", f"{base}/plain").status_code == 204
    assert http("GET", f"{base}/plain/stats").status_code == 404
    assert http("DELETE", f"{base}/parted/partitions").status_code == 204


def test_partitioned_topic_is_usable_by_clients(http, client, namespace):
    base = f"/admin/v2/persistent/{namespace}"
    assert http("PUT", f"{base}/p3/partitions", data="3").status_code == 204
    topic = f"persistent://{namespace}/p3"
    assert client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(30):
        producer.send(f"{i}".encode(), partition_key=f"k{i}")
    got = receive_n(consumer, 30)
    assert sorted(int(m.data()) for m in got) == list(range(30))
    assert len({m.topic_name() for m in got}) > 1


def test_topic_stats_and_internal_stats(http, client, namespace):
    topic = f"persistent://{namespace}/stats"
    path = f"/admin/v2/persistent/{namespace}/stats"
    consumer = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared,
                                consumer_name="stats-consumer")
    producer = client.create_producer(topic, producer_name="stats-producer")
    for _ in range(10):
        producer.send(b"0123456789")
    got = receive_n(consumer, 10)
    for m in got[:4]:
        consumer.acknowledge(m)
    consumer.close()  # acks are flushed on close; 6 stay in the backlog
    consumer = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared,
                                consumer_name="stats-consumer", receiver_queue_size=100)
    receive_n(consumer, 6)

    r = http("GET", f"{path}/stats")
    assert r.status_code == 200
    st = r.json()
    for field in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut",
                  "storageSize", "backlogSize", "publishers", "subscriptions", "msgInCounter",
                  "bytesInCounter"):
        assert field in st, field
    assert st["msgInCounter"] == 10 and st["bytesInCounter"] >= 100
    assert [p["producerName"] for p in st["publishers"]] == ["stats-producer"]
    sub = st["subscriptions"]["sub"]
    assert sub["type"] == "Shared"
    assert sub["msgBacklog"] == 6
    for field in ("msgRateOut", "unackedMessages", "consumers"):
        assert field in sub, field
    (c,) = sub["consumers"]
    assert c["consumerName"] == "stats-consumer"
    assert c["unackedMessages"] == 6
    assert "availablePermits" in c

    r = http("GET", f"{path}/internalStats")
    assert r.status_code == 200
    ist = r.json()
    assert ist["entriesAddedCounter"] == 10 and ist["numberOfEntries"] == 10
    assert ist["ledgers"] and "ledgerId" in ist["ledgers"][0]
    assert "markDeletePosition" in ist["cursors"]["sub"]


def test_topic_stats_exclude_publishers_and_consumers(http, client, namespace):
    """Pulsar's GetStatsOptions as query parameters: excluded lists are empty, the rest stays;
    Jersey takes "TRUE" as true and anything but true (any case) as false."""
    topic = f"persistent://{namespace}/stats-exclude"
    path = f"/admin/v2/persistent/{namespace}/stats-exclude/stats"
    consumer = client.subscribe(topic, "sub", consumer_name="ex-consumer")
    producer = client.create_producer(topic, producer_name="ex-producer")
    for _ in range(3):
        producer.send(b"x")
    receive_n(consumer, 3)  # none acknowledged: a backlog of 3

    def stats(query=""):
        r = http("GET", path + query)
        assert r.status_code == 200, r.text
        return r.json()

    full = stats()
    assert [p["producerName"] for p in full["publishers"]] == ["ex-producer"]
    assert [c["consumerName"] for c in full["subscriptions"]["sub"]["consumers"]] == [
        "ex-consumer"]

    st = stats("?excludePublishers=true&excludeConsumers=TRUE")
    assert st["publishers"] == []
    sub = st["subscriptions"]["sub"]
    assert sub["consumers"] == []
    assert st["msgInCounter"] == 3 and sub["msgBacklog"] == 3

    st = stats("?excludeConsumers=true")
    assert [p["producerName"] for p in st["publishers"]] == ["ex-producer"]
    assert st["subscriptions"]["sub"]["consumers"] == []

    st = stats("?excludePublishers=yes&excludeConsumers=1")
    assert len(st["publishers"]) == 1 and len(st["subscriptions"]["sub"]["consumers"]) == 1


def test_subscriptions_admin(http, client, namespace):
    topic = f"persistent://{namespace}/subs"
    base = f"/admin/v2/persistent/{namespace}/subs"
    producer = client.create_producer(topic)
    assert http("PUT", f"{base}/subscription/s1").status_code == 204
    assert http("PUT", f"{base}/subscription/s1").status_code == 409
    assert http("GET", f"{base}/subscriptions").json() == ["s1"]
    ids = [producer.send(f"{i}".encode()) for i in range(5)]
    assert http("GET", f"{base}/stats").json()["subscriptions"]["s1"]["msgBacklog"] == 5

    assert http("POST", f"{base}/subscription/s1/skip/2").status_code == 204
    assert http("GET", f"{base}/stats").json()["subscriptions"]["s1"]["msgBacklog"] == 3
    assert http("POST", f"{base}/subscription/s1/skip_all").status_code == 204
    assert http("GET", f"{base}/stats").json()["subscriptions"]["s1"]["msgBacklog"] == 0

    r = http("POST", f"{base}/subscription/s1/resetcursor",
             json={"ledgerId": ids[1].ledger_id(), "entryId": ids[1].entry_id()})
    assert r.status_code == 204
    assert http("GET", f"{base}/stats").json()["subscriptions"]["s1"]["msgBacklog"] == 4
    consumer = client.subscribe(topic, "s1")
    assert [m.data() for m in receive_n(consumer, 4)] == [b"1", b"2", b"3", b"4"]

    r = http("DELETE", f"{base}/subscription/s1")
    assert r.status_code == 412 and "reason" in r.json(), "active consumers block deletion"
    consumer.close()
    assert http("DELETE", f"{base}/subscription/s1").status_code == 204
    assert http("GET", f"{base}/subscriptions").json() == []


def test_subscription_path_is_decoded_as_pulsar_admin_encodes_it(http, client, namespace):
    # Pulsar's admin client sends Codec.encode(subscription) (URLEncoder: a space as '+') and
    # PersistentTopics decodes the path's subscription once more (Codec.decode): "my+sub" names
    # "my sub", and an escape sent escaped again ("a%252Fb") names "a/b".
    topic = f"persistent://{namespace}/encoded-subs"
    base = f"/admin/v2/persistent/{namespace}/encoded-subs"
    producer = client.create_producer(topic)
    for sub in ("my sub", "a/b", "x+y"):
        client.subscribe(topic, sub).close()
    for _ in range(3):
        producer.send(b"m")

    def backlog(sub):
        return http("GET", f"{base}/stats").json()["subscriptions"][sub]["msgBacklog"]

    assert http("POST", f"{base}/subscription/my+sub/skip/1").status_code == 204
    assert backlog("my sub") == 2
    r = http("GET", f"{base}/subscription/my+sub/position/1")
    assert r.status_code == 200 and r.content == b"m"
    assert http("POST", f"{base}/subscription/a%252Fb/skip_all").status_code == 204
    assert backlog("a/b") == 0
    assert http("POST", f"{base}/subscription/a%252Fb/resetcursor/0").status_code == 204
    assert backlog("a/b") == 3
    assert http("POST", f"{base}/subscription/x%252By/skip/2").status_code == 204
    assert backlog("x+y") == 1
    # Created under the decoded name; deleted by it.
    assert http("PUT", f"{base}/subscription/new+one").status_code == 204
    assert sorted(http("GET", f"{base}/subscriptions").json()) == [
        "a/b", "my sub", "new one", "x+y"]
    for sub in ("new+one", "my+sub", "a%252Fb", "x%252By"):
        assert http("DELETE", f"{base}/subscription/{sub}").status_code == 204, sub
    assert http("GET", f"{base}/subscriptions").json() == []


def test_topic_path_is_decoded_as_pulsar_admin_encodes_it(http, client, namespace):
    # Pulsar's admin client sends Codec.encode(topic) (URLEncoder: "my topic" as my+topic, "x+y"
    # as x%2By); PersistentTopics and TopicLookup take the raw {topic} (@Encoded) and decode it
    # once (Codec.decode), SchemasResource decodes the path-decoded one once more.
    for local in ("my topic", "x+y"):
        producer = client.create_producer(f"persistent://{namespace}/{local}")
        producer.send(b"m")
        producer.close()
    base = f"/admin/v2/persistent/{namespace}"
    for seg in ("my+topic", "x%2By"):
        r = http("GET", f"{base}/{seg}/stats")
        assert r.status_code == 200, seg
        assert r.json()["msgInCounter"] == 1
        assert http("GET", f"{base}/{seg}/internalStats").json()["entriesAddedCounter"] == 1
        assert http("GET", f"{base}/{seg}/partitions").json()["partitions"] == 0
        r = http("GET", f"/lookup/v2/topic/persistent/{namespace}/{seg}")
        assert r.status_code == 200 and r.json()["brokerUrl"].startswith("pulsar://"), seg
    # Decoded once only: x%252By names "x%2By", which does not exist.
    assert http("GET", f"{base}/x%252By/stats").status_code == 404
    schema = {"type": "STRING", "schema": "", "properties": {}}
    assert http("POST", f"/admin/v2/schemas/{namespace}/my+topic/schema",
                json=schema).status_code == 200
    r = http("GET", f"/admin/v2/schemas/{namespace}/my%20topic/schema")
    assert r.status_code == 200 and r.json()["type"] == "STRING"
    for seg in ("my+topic", "x%2By"):
        assert http("DELETE", f"{base}/{seg}").status_code == 204, seg
    assert http("GET", base).json() == []


def test_last_message_id_terminate_and_unload(http, client, namespace):
    topic = f"persistent://{namespace}/term"
    base = f"/admin/v2/persistent/{namespace}/term"
    producer = client.create_producer(topic)
    last = producer.send(b"last")
    r = http("GET", f"{base}/lastMessageId").json()
    assert (r["ledgerId"], r["entryId"]) == (last.ledger_id(), last.entry_id())

    assert http("PUT", f"{base}/unload").status_code == 204
    producer.send(b"after-unload")  # the client reconnects by itself

    r = http("POST", f"{base}/terminate")
    assert r.status_code == 200
    assert set(r.json()) >= {"ledgerId", "entryId"}
    with pytest.raises(pulsar.TopicTerminated):
        producer.send(b"after-terminate")


def test_termination_is_kept_across_an_unload(http, broker, client, namespace):
    """Pulsar stores the terminated position in the managed ledger's metadata: after an unload
    the reopened topic is still terminated (new producers get TopicTerminated), its messages
    are still there, and a second terminate answers the same last message."""
    topic = f"persistent://{namespace}/term-unload"
    base = f"/admin/v2/persistent/{namespace}/term-unload"
    consumer = client.subscribe(topic, "sub")
    # A client of its own for the producer the terminate closes: once the client has given it
    # up, closing it answers AlreadyClosed (both brokers).
    writer = pulsar.Client(broker.service_url, operation_timeout_seconds=15)
    producer = writer.create_producer(topic, batching_enabled=False)
    last = [producer.send(f"m-{i}".encode()) for i in range(3)][-1]
    r = http("POST", f"{base}/terminate")
    assert r.status_code == 200, r.text
    assert (r.json()["ledgerId"], r.json()["entryId"]) == (last.ledger_id(), last.entry_id())
    for close in (producer.close, writer.close):
        try:
            close()
        except pulsar.AlreadyClosed:
            pass
    consumer.close()

    assert http("PUT", f"{base}/unload").status_code == 204
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer(topic)
    consumer = client.subscribe(topic, "sub")
    assert [m.data() for m in receive_n(consumer, 3)] == [b"m-0", b"m-1", b"m-2"]
    again = http("POST", f"{base}/terminate")
    assert again.status_code == 200, again.text
    assert (again.json()["ledgerId"], again.json()["entryId"]) == (last.ledger_id(),
                                                                   last.entry_id())
    consumer.close()


def test_unload_closes_the_topic_and_reopens_it_on_a_new_ledger(http, client, namespace):
    """Pulsar's unload closes the topic (its cursors written) and forgets it; the clients
    reconnect and the reopened topic writes to a new ledger."""
    topic = f"persistent://{namespace}/reopen"
    base = f"/admin/v2/persistent/{namespace}/reopen"
    consumer = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m-{i}".encode()) for i in range(3)]
    got = receive_n(consumer, 3)
    consumer.acknowledge(got[0])
    assert wait_for(lambda: http("GET", f"{base}/stats").json()["subscriptions"]["sub"][
        "msgBacklog"] == 2)
    before = http("GET", f"{base}/internalStats").json()

    assert http("PUT", f"{base}/unload").status_code == 204
    after = http("GET", f"{base}/internalStats").json()
    assert len(after["ledgers"]) == len(before["ledgers"]) + 1, (before, after)
    assert after["ledgers"][-1]["ledgerId"] > ids[-1].ledger_id()
    assert after["currentLedgerEntries"] == 0
    # The last message is still the last one written, in the ledger before.
    r = http("GET", f"{base}/lastMessageId").json()
    assert (r["ledgerId"], r["entryId"]) == (ids[-1].ledger_id(), ids[-1].entry_id()), r
    assert after["lastConfirmedEntry"] == f"{ids[-1].ledger_id()}:{ids[-1].entry_id()}", after
    # The ack made before the unload was written at the close.
    first = f"{ids[0].ledger_id()}:{ids[0].entry_id()}"
    assert after["cursors"]["sub"]["markDeletePosition"] == first, after["cursors"]["sub"]
    # The producer came back by itself, on the new ledger; the unacked two come again.
    assert producer.send(b"after").ledger_id() == after["ledgers"][-1]["ledgerId"]
    again = sorted(m.data() for m in receive_n(consumer, 3))
    assert again == [b"after", b"m-1", b"m-2"], again
    assert http("PUT", f"/admin/v2/persistent/{namespace}/missing/unload").status_code == 404


def test_http_lookup(http, broker):
    r = http("GET", "/lookup/v2/topic/persistent/public/default/lookup-test")
    assert r.status_code == 200
    body = r.json()
    assert body["brokerUrl"] == broker.service_url
    assert body["httpUrl"] == broker.admin_url
