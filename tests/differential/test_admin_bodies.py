"""Admin REST bodies in the forms Pulsar's own admin clients send, read as Pulsar's Jackson reads
them (issue 43): the partitioned-topic-metadata object, topic bodies that are null or absent,
numbers and booleans written as JSON strings; namespaces created with a policies body; clusters
created, updated and deleted; producer and consumer metadata in topic stats.

Marked `admin`: deselect with -m "not admin" for a broker without the admin API yet.
"""

import uuid

import pytest

pytestmark = pytest.mark.admin

JSON = "application/json"
METADATA_JSON = "application/vnd.partitioned-topic-metadata+json"


@pytest.fixture
def http(admin_http):
    def call(method, path, body=None, content_type=JSON):
        """body: raw text sent as is (None: no body and no Content-Type)."""
        headers = {"Content-Type": content_type} if body is not None else None
        return admin_http(method, path, data=body, headers=headers)
    return call


def status(r):
    return r.status_code


def test_partitions_body_forms(http, namespace):
    base = f"/admin/v2/persistent/{namespace}"
    # Java and Go admin clients: PartitionedTopicMetadata with its own content type; the
    # properties are kept with the partitioned topic (values are Strings: 1 becomes "1").
    r = http("PUT", f"{base}/meta/partitions",
             '{"partitions":3,"properties":{"owner":"go","n":1}}', METADATA_JSON)
    assert status(r) == 204, r.text
    meta = http("GET", f"{base}/meta/partitions").json()
    assert meta["partitions"] == 3
    assert meta["properties"] == {"owner": "go", "n": "1"}
    assert http("GET", f"{base}/meta/properties").json() == {"owner": "go", "n": "1"}
    # A bare number under that content type, and without properties.
    assert status(http("PUT", f"{base}/meta2/partitions", "2", METADATA_JSON)) == 204
    assert status(http("PUT", f"{base}/meta3/partitions", '{"partitions":"2"}',
                       METADATA_JSON)) == 204
    assert http("GET", f"{base}/meta3/partitions").json()["partitions"] == 2
    # A bare int: Jackson takes "3" and truncates 2.9.
    assert status(http("PUT", f"{base}/str/partitions", '"3"')) == 204
    assert http("GET", f"{base}/str/partitions").json()["partitions"] == 3
    assert status(http("PUT", f"{base}/float/partitions", "2.9")) == 204
    assert http("GET", f"{base}/float/partitions").json()["partitions"] == 2
    assert status(http("POST", f"{base}/str/partitions", '"4"')) == 204
    assert http("GET", f"{base}/str/partitions").json()["partitions"] == 4
    # Refused as Jackson refuses them (400), and Pulsar's count check (406).
    for bad in ("true", '"x"', '"2.5"', '{"partitions":2}'):
        assert status(http("PUT", f"{base}/bad/partitions", bad)) == 400, bad
    assert status(http("POST", f"{base}/str/partitions", '{"partitions":5}',
                       METADATA_JSON)) == 400
    assert status(http("PUT", f"{base}/bad/partitions", '{"partitions":0}', METADATA_JSON)) == 406
    assert status(http("PUT", f"{base}/bad/partitions", "0")) == 406
    assert status(http("PUT", f"{base}/bad/partitions", "-1")) == 406
    assert status(http("GET", f"{base}/bad/partitions")) == 404


def test_topic_create_bodies(http, namespace):
    base = f"/admin/v2/persistent/{namespace}"
    # Go's admin client sends the JSON null; pulsar-admin no body; both create the topic.
    assert status(http("PUT", f"{base}/nulled", "null")) == 204
    assert status(http("PUT", f"{base}/bare")) == 204
    assert status(http("PUT", f"{base}/empty", "{}")) == 204
    assert status(http("PUT", f"{base}/typed", '{"a":1,"b":true,"c":1.5}')) == 204
    assert http("GET", f"{base}/typed/properties").json() == {"a": "1", "b": "true", "c": "1.5"}
    topics = http("GET", base).json()
    for t in ("nulled", "bare", "empty", "typed"):
        assert f"persistent://{namespace}/{t}" in topics
    assert status(http("PUT", f"{base}/arr", "[]")) == 400
    assert status(http("PUT", f"{base}/txt", '"x"')) == 400
    assert status(http("PUT", f"{base}/nested", '{"a":{"b":1}}')) == 400
    assert status(http("PUT", f"{base}/plain", "null", "text/plain")) == 415


def test_namespace_policy_numbers_as_strings(http, namespace):
    ns = f"/admin/v2/namespaces/{namespace}"
    # Backlog quota: limit (the older name) and limitSize as strings, limitTime from a float.
    assert status(http("POST", f"{ns}/backlogQuota",
                       '{"limit":"1000","limitSize":"2000","policy":"producer_exception"}')) == 204
    q = http("GET", f"{ns}/backlogQuotaMap").json()["destination_storage"]
    assert (q["limitSize"], q["limitTime"], q["policy"]) == (2000, 0, "producer_exception")
    assert status(http("POST", f"{ns}/backlogQuota",
                       '{"limitSize":1e3,"limitTime":"60","policy":"producer_exception"}')) == 204
    q = http("GET", f"{ns}/backlogQuotaMap").json()["destination_storage"]
    assert (q["limitSize"], q["limitTime"]) == (1000, 60)
    for bad in ('{"limitSize":"x","policy":"producer_exception"}',
                '{"limitSize":true,"policy":"producer_exception"}'):
        assert status(http("POST", f"{ns}/backlogQuota", bad)) == 400, bad
    # Retention.
    assert status(http("POST", f"{ns}/retention",
                       '{"retentionTimeInMinutes":"10","retentionSizeInMB":"20"}')) == 204
    assert http("GET", f"{ns}/retention").json() == {"retentionTimeInMinutes": 10,
                                                     "retentionSizeInMB": 20}
    assert status(http("POST", f"{ns}/retention",
                       '{"retentionTimeInMinutes":15.9,"retentionSizeInMB":20}')) == 204
    assert http("GET", f"{ns}/retention").json()["retentionTimeInMinutes"] == 15
    assert status(http("POST", f"{ns}/retention",
                       '{"retentionTimeInMinutes":false,"retentionSizeInMB":20}')) == 400
    # A bare int and a bare boolean.
    assert status(http("POST", f"{ns}/messageTTL", '"30"')) == 204
    assert http("GET", f"{ns}/messageTTL").json() == 30
    assert status(http("POST", f"{ns}/messageTTL", "40.5")) == 204
    assert http("GET", f"{ns}/messageTTL").json() == 40
    assert status(http("POST", f"{ns}/messageTTL", '" 50 "')) == 204
    assert http("GET", f"{ns}/messageTTL").json() == 50
    for bad in ('"1e2"', '"x"', "true", '"99999999999"'):
        assert status(http("POST", f"{ns}/messageTTL", bad)) == 400, bad
    assert status(http("POST", f"{ns}/maxProducersPerTopic", '"5"')) == 204
    assert http("GET", f"{ns}/maxProducersPerTopic").json() == 5
    for body, expected in (('"true"', True), ("0", False), ('"True"', True), ('"FALSE"', False),
                           ("2", True)):
        assert status(http("POST", f"{ns}/deduplication", body)) == 204, body
        assert http("GET", f"{ns}/deduplication").json() is expected, body
    for bad in ('"yes"', "1.0", "{}"):
        assert status(http("POST", f"{ns}/deduplication", bad)) == 400, bad
    # Objects with every field a string.
    assert status(http("POST", f"{ns}/inactiveTopicPolicies",
                       '{"inactiveTopicDeleteMode":"delete_when_no_subscriptions",'
                       '"maxInactiveDurationSeconds":"120","deleteWhileInactive":"true"}')) == 204
    assert http("GET", f"{ns}/inactiveTopicPolicies").json() == {
        "inactiveTopicDeleteMode": "delete_when_no_subscriptions",
        "maxInactiveDurationSeconds": 120, "deleteWhileInactive": True}
    assert status(http("POST", f"{ns}/delayedDelivery",
                       '{"active":"true","tickTime":"500","maxDeliveryDelayInMillis":"0"}')) == 204
    d = http("GET", f"{ns}/delayedDelivery").json()
    assert (d["active"], d["tickTime"], d["maxDeliveryDelayInMillis"]) == (True, 500, 0)
    assert status(http("POST", f"{ns}/autoTopicCreation",
                       '{"allowAutoTopicCreation":"true","topicType":"partitioned",'
                       '"defaultNumPartitions":"2"}')) == 204
    a = http("GET", f"{ns}/autoTopicCreation").json()
    assert (a["allowAutoTopicCreation"], a["defaultNumPartitions"]) == (True, 2)


def test_topic_policy_and_cursor_numbers_as_strings(http, namespace):
    base = f"/admin/v2/persistent/{namespace}/pol"
    assert status(http("PUT", base)) == 204
    assert status(http("POST", f"{base}/retention",
                       '{"retentionTimeInMinutes":"10","retentionSizeInMB":"20"}')) == 204
    assert http("GET", f"{base}/retention").json() == {"retentionTimeInMinutes": 10,
                                                       "retentionSizeInMB": 20}
    assert status(http("POST", f"{base}/maxProducers", '"3"')) == 204
    assert http("GET", f"{base}/maxProducers").json() == 3
    assert status(http("POST", f"{base}/deduplicationEnabled", '"true"')) == 204
    assert http("GET", f"{base}/deduplicationEnabled").json() is True
    assert status(http("POST", f"{base}/backlogQuota",
                       '{"limitSize":"4096","limitTime":"-1","policy":"producer_request_hold"}')
                  ) == 204
    q = http("GET", f"{base}/backlogQuotaMap").json()["destination_storage"]
    assert (q["limitSize"], q["limitTime"]) == (4096, -1)
    # MessageId / ResetCursorData with longs as strings.
    assert status(http("PUT", f"{base}/subscription/s1",
                       '{"ledgerId":"-1","entryId":"-1"}')) == 204
    assert "s1" in http("GET", f"{base}/subscriptions").json()
    assert status(http("POST", f"{base}/subscription/s1/resetcursor",
                       '{"ledgerId":"-1","entryId":"-1","isExcluded":"false"}')) == 204


POLICIES_BODY = """{
 "auth_policies": {"namespace_auth": {"role-1": ["produce", "consume"]},
                   "destination_auth": {"persistent://%(ns)s/t": {"role-2": ["consume"]}},
                   "subscription_auth_roles": {"sub-1": ["role-3"]}},
 "replication_clusters": ["standalone"],
 "retention_policies": {"retentionTimeInMinutes": "10", "retentionSizeInMB": "20"},
 "bundles": {"numBundles": 8},
 "message_ttl_in_seconds": "30",
 "deduplicationEnabled": "true",
 "properties": {"k": "v"},
 "encryption_required": true,
 "subscription_auth_mode": "Prefix",
 "offload_threshold": "100",
 "schema_compatibility_strategy": "FULL",
 "is_allow_auto_update_schema": false,
 "schema_validation_enforced": true,
 "max_producers_per_topic": 3,
 "inactive_topic_policies": {"inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
                             "maxInactiveDurationSeconds": 100, "deleteWhileInactive": true},
 "delayed_delivery_policies": {"tickTime": 500, "active": true, "maxDeliveryDelayInMillis": 0},
 "autoTopicCreationOverride": {"allowAutoTopicCreation": true, "topicType": "non-partitioned"},
 "publishMaxMessageRate": {"standalone": {"publishThrottlingRateInMsg": 10,
                                          "publishThrottlingRateInByte": 20}},
 "no_such_field": 1
}"""


def test_namespace_created_with_policies(http, tenant):
    ns = f"{tenant}/withpolicies"
    r = http("PUT", f"/admin/v2/namespaces/{ns}", POLICIES_BODY % {"ns": ns})
    assert status(r) == 204, r.text
    p = http("GET", f"/admin/v2/namespaces/{ns}").json()
    # Pulsar keeps the actions in a HashSet: their order is not pinned.
    actions = p["auth_policies"]["namespace_auth"]["role-1"]
    assert sorted(actions) == ["consume", "produce"]
    p["auth_policies"]["namespace_auth"]["role-1"] = ["produce", "consume"]
    assert p["auth_policies"] == {
        "namespace_auth": {"role-1": ["produce", "consume"]},
        "destination_auth": {f"persistent://{ns}/t": {"role-2": ["consume"]}},
        "subscription_auth_roles": {"sub-1": ["role-3"]}}
    assert p["replication_clusters"] == ["standalone"]
    assert p["retention_policies"] == {"retentionTimeInMinutes": 10, "retentionSizeInMB": 20}
    assert p["bundles"]["numBundles"] == 8
    assert p["bundles"]["boundaries"][:3] == ["0x00000000", "0x20000000", "0x40000000"]
    assert len(p["bundles"]["boundaries"]) == 9
    assert p["message_ttl_in_seconds"] == 30
    assert p["deduplicationEnabled"] is True
    assert p["properties"] == {"k": "v"}
    assert p["encryption_required"] is True
    assert p["subscription_auth_mode"] == "Prefix"
    assert p["offload_threshold"] == 100
    assert p["schema_compatibility_strategy"] == "FULL"
    assert p["is_allow_auto_update_schema"] is False
    assert p["schema_validation_enforced"] is True
    assert p["max_producers_per_topic"] == 3
    assert p["inactive_topic_policies"] == {
        "inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
        "maxInactiveDurationSeconds": 100, "deleteWhileInactive": True}
    assert p["delayed_delivery_policies"] == {"tickTime": 500, "active": True,
                                              "maxDeliveryDelayInMillis": 0}
    assert p["autoTopicCreationOverride"] == {"allowAutoTopicCreation": True,
                                              "topicType": "non-partitioned"}
    assert p["publishMaxMessageRate"] == {"standalone": {"publishThrottlingRateInMsg": 10,
                                                         "publishThrottlingRateInByte": 20}}
    assert "no_such_field" not in p
    # The same policies through their own routes.
    base = f"/admin/v2/namespaces/{ns}"
    permissions = http("GET", f"{base}/permissions").json()
    assert list(permissions) == ["role-1"]
    assert sorted(permissions["role-1"]) == ["consume", "produce"]
    assert http("GET", f"{base}/replication").json() == ["standalone"]
    assert http("GET", f"{base}/messageTTL").json() == 30
    assert http("GET", f"{base}/maxProducersPerTopic").json() == 3
    assert http("GET", f"{base}/schemaCompatibilityStrategy").json() == "FULL"
    # A null body is no policies; a cluster the tenant may not use is refused.
    assert status(http("PUT", f"/admin/v2/namespaces/{tenant}/nulled", "null")) == 204
    r = http("PUT", f"/admin/v2/namespaces/{tenant}/elsewhere",
             '{"replication_clusters":["no-such-cluster"]}')
    assert status(r) == 403
    assert status(http("GET", f"/admin/v2/namespaces/{tenant}/elsewhere")) == 404


def test_cluster_lifecycle(http):
    name = f"c-{uuid.uuid4().hex[:8]}"
    path = f"/admin/v2/clusters/{name}"
    try:
        r = http("PUT", path, '{"serviceUrl":"http://c2.example:8080",'
                              '"brokerServiceUrl":"pulsar://c2.example:6650","no_such":1}')
        assert status(r) == 200, r.text
        assert status(http("PUT", path, '{"serviceUrl":"http://c2.example:8080"}')) == 409
        assert name in http("GET", "/admin/v2/clusters").json()
        assert http("GET", path).json() == {
            "serviceUrl": "http://c2.example:8080", "brokerServiceUrl": "pulsar://c2.example:6650",
            "brokerClientTlsEnabled": False, "tlsAllowInsecureConnection": False,
            "brokerClientTlsEnabledWithKeyStore": False}
        r = http("POST", path, '{"serviceUrl":"http://c3.example:8080",'
                               '"brokerClientTlsEnabled":"true"}')
        assert status(r) == 200, r.text
        assert http("GET", path).json() == {
            "serviceUrl": "http://c3.example:8080", "brokerClientTlsEnabled": True,
            "tlsAllowInsecureConnection": False, "brokerClientTlsEnabledWithKeyStore": False}
        # A tenant may now name it.
        t = f"t-{uuid.uuid4().hex[:8]}"
        assert status(http("PUT", f"/admin/v2/tenants/{t}",
                           '{"allowedClusters":["%s"]}' % name)) == 204
        assert http("GET", f"/admin/v2/tenants/{t}").json()["allowedClusters"] == [name]
        assert status(http("DELETE", f"/admin/v2/tenants/{t}")) == 204
        assert status(http("DELETE", path)) == 204
        assert status(http("DELETE", path)) == 404
        assert status(http("GET", path)) == 404
        assert status(http("POST", path, '{"serviceUrl":"http://c3.example:8080"}')) == 404
        # Refused bodies and names.
        assert status(http("PUT", path)) == 400
        assert status(http("PUT", path, "null")) == 400
        assert status(http("PUT", path, '"x"')) == 400
        for field, url in (("serviceUrl", "pulsar://x:1"), ("serviceUrl", "notaurl"),
                           ("brokerServiceUrl", "http://x:1")):
            r = http("PUT", path, '{"%s":"%s"}' % (field, url))
            assert status(r) == 400, (field, url)
            assert "Illegal" in r.json()["reason"]
        assert status(http("PUT", "/admin/v2/clusters/bad%2Fname", "{}")) == 412
        assert status(http("PUT", path, '{"serviceUrl":"http://x:1"}', "text/plain")) == 415
        assert status(http("GET", path)) == 404
    finally:
        http("DELETE", path)
    assert "standalone" in http("GET", "/admin/v2/clusters").json()


def test_producer_and_consumer_metadata_in_stats(http, namespace, client):
    base = f"/admin/v2/persistent/{namespace}"
    topic = f"persistent://{namespace}/meta"
    producer = client.create_producer(topic, properties={"app": "orders", "version": "2"})
    consumer = client.subscribe(topic, "sub", properties={"team": "billing"})
    stats = http("GET", f"{base}/meta/stats").json()
    assert [p["metadata"] for p in stats["publishers"]] == [{"app": "orders", "version": "2"}]
    assert [c["metadata"] for c in stats["subscriptions"]["sub"]["consumers"]] == [
        {"team": "billing"}]
    producer.close()
    consumer.close()

    assert status(http("PUT", f"{base}/parted/partitions", "2")) == 204
    topic = f"persistent://{namespace}/parted"
    producer = client.create_producer(topic, properties={"app": "p"})
    consumer = client.subscribe(topic, "sub", properties={"team": "c"})
    stats = http("GET", f"{base}/parted/partitioned-stats?perPartition=true").json()
    # Pulsar's merged publishers and consumers (PublisherStatsImpl.add, ConsumerStatsImpl.add)
    # carry no metadata; each partition's stats do.
    assert stats["publishers"] and all("metadata" not in p for p in stats["publishers"])
    consumers = stats["subscriptions"]["sub"]["consumers"]
    assert consumers and all("metadata" not in c for c in consumers)
    assert len(stats["partitions"]) == 2
    for part in stats["partitions"].values():
        assert [p["metadata"] for p in part["publishers"]] == [{"app": "p"}]
        assert [c["metadata"] for c in part["subscriptions"]["sub"]["consumers"]] == [
            {"team": "c"}]
    producer.close()
    consumer.close()
