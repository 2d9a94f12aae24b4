"""Message TTL as Pulsar enforces it: every messageExpiryCheckIntervalInMinutes, each
subscription's messages older than the TTL (topic policy > namespace policy >
ttlDurationDefaultInSeconds) are expired: the backlog drops and totalMsgExpired counts them.
Starts its own broker (the check interval is at least a minute, so this test takes ~1-2 min)."""

import time
import uuid

import pulsar
import pytest
import requests


def backlog(admin, topic, sub):
    r = requests.get(f"{admin}/admin/v2/persistent/{topic}/stats", timeout=30)
    assert r.status_code == 200, r.text
    s = r.json()["subscriptions"][sub]
    return s["msgBacklog"], s.get("totalMsgExpired", 0)


@pytest.mark.admin
def test_ttl_expires_backlogs_by_topic_and_namespace_policy(start_broker):
    endpoint = start_broker(["messageExpiryCheckIntervalInMinutes=1",
                             "ttlDurationDefaultInSeconds=3600"])
    admin = endpoint.admin_url
    ns_ttl = f"public/ttl-{uuid.uuid4().hex[:6]}"
    ns_default = f"public/ttld-{uuid.uuid4().hex[:6]}"
    for ns in (ns_ttl, ns_default):
        assert requests.put(f"{admin}/admin/v2/namespaces/{ns}", timeout=30).status_code == 204
    r = requests.post(f"{admin}/admin/v2/namespaces/{ns_ttl}/messageTTL", json=2, timeout=30)
    assert r.status_code == 204, r.text
    by_ns = f"{ns_ttl}/a"         # namespace TTL 2 s
    kept = f"{ns_default}/b"      # broker default 3600 s: kept
    by_topic = f"{ns_default}/c"  # topic policy 2 s over the broker default
    client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=30)
    try:
        for t in (by_ns, kept, by_topic):
            client.subscribe(f"persistent://{t}", "s").close()
        r = requests.post(f"{admin}/admin/v2/persistent/{by_topic}/messageTTL",
                          params={"messageTTL": 2}, timeout=30)
        assert r.status_code == 204, r.text
        for t in (by_ns, kept, by_topic):
            p = client.create_producer(f"persistent://{t}", batching_enabled=False)
            for i in range(10):
                p.send(f"m-{i}".encode())
            p.close()
        for t in (by_ns, kept, by_topic):
            assert backlog(admin, t, "s")[0] == 10
        deadline = time.time() + 150
        while time.time() < deadline:
            if backlog(admin, by_ns, "s")[0] == 0 and backlog(admin, by_topic, "s")[0] == 0:
                break
            time.sleep(2)
        assert backlog(admin, by_ns, "s") == (0, 10)
        assert backlog(admin, by_topic, "s") == (0, 10)
        assert backlog(admin, kept, "s") == (10, 0)
    finally:
        client.close()
