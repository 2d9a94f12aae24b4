"""The placement policies' admin routes (issue 48): namespace isolation policies (`pulsar-admin
ns-isolation-policy set|get|list|delete|brokers|broker`: /admin/v2/clusters/{c}/
namespaceIsolationPolicies...) and anti-affinity groups (`pulsar-admin namespaces
set|get|delete-anti-affinity-group`, `get-anti-affinity-namespaces`): Pulsar 4.2.4's status codes,
reasons and JSON. The policies name no real broker ("nohost-..."), so the broker stays shared and
every other test's namespaces keep their broker. Passes on Magnetar and Pulsar."""

import json
import uuid

import pytest
import requests

POLICY = {
    "namespaces": ["public/iso-x.*"],
    "primary": ["nohost-a"],
    "secondary": ["nohost-b"],
    "auto_failover_policy": {"parameters": {"min_limit": "1", "usage_threshold": "80"},
                             "policy_type": "min_available"},
}


@pytest.fixture
def cluster(admin_url) -> str:
    r = requests.get(f"{admin_url}/admin/v2/clusters", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()[0]


def test_isolation_policies(admin_url, cluster) -> None:
    base = f"{admin_url}/admin/v2/clusters/{cluster}/namespaceIsolationPolicies"
    name = f"p-{uuid.uuid4().hex[:8]}"
    # A cluster that does not exist: 404 for the list, 412 for the rest (Pulsar's mix).
    r = requests.get(f"{admin_url}/admin/v2/clusters/nope/namespaceIsolationPolicies", timeout=10)
    assert (r.status_code, r.json()) == (404, {"reason": "Cluster nope does not exist."})
    r = requests.get(f"{admin_url}/admin/v2/clusters/nope/namespaceIsolationPolicies/x",
                     timeout=10)
    assert (r.status_code, r.json()) == (412, {"reason": "Cluster nope does not exist."})
    r = requests.post(f"{admin_url}/admin/v2/clusters/nope/namespaceIsolationPolicies/x",
                      json=POLICY, timeout=10)
    assert r.status_code == 412, r.text
    try:
        r = requests.post(f"{base}/{name}", json=POLICY, timeout=30)
        assert r.status_code == 204, r.text
        r = requests.get(f"{base}/{name}", timeout=10)
        assert r.status_code == 200 and r.text == json.dumps(POLICY, separators=(",", ":")), r.text
        r = requests.get(base, timeout=10)
        assert r.status_code == 200 and r.json()[name] == POLICY, r.text
        r = requests.get(f"{base}/zz-{name}", timeout=10)
        reason = f"Cannot find NamespaceIsolationPolicy zz-{name} for cluster {cluster}"
        assert (r.status_code, r.json()) == (404, {"reason": reason})
        # Every registered broker, none of them named by the policy.
        r = requests.get(f"{base}/brokers", timeout=10)
        assert r.status_code == 200, r.text
        brokers = r.json()
        assert len(brokers) >= 1 and all(
            list(b) == ["brokerName", "namespaceRegex", "primary"] and b["namespaceRegex"] == []
            and b["primary"] is False for b in brokers), brokers
        one = brokers[0]["brokerName"]
        r = requests.get(f"{base}/brokers/{one}", timeout=10)
        assert r.status_code == 200 and r.json() == brokers[0], r.text
        # A policy naming the broker id as primary: listed with it.
        named = dict(POLICY, primary=[one.replace(".", "\\.")],
                     namespaces=[f"public/never-{name}"])
        r = requests.post(f"{base}/{name}-b", json=named, params={"unloadBundles": "false"},
                          timeout=30)
        assert r.status_code == 204, r.text
        r = requests.get(f"{base}/brokers/{one}", timeout=10)
        assert r.json() == {"brokerName": one, "policyName": f"{name}-b",
                            "namespaceRegex": [f"public/never-{name}"], "primary": True}, r.text
        requests.delete(f"{base}/{name}-b", timeout=10)
        # Invalid data: 400 with Pulsar's reason.
        for bad in ({"namespaces": [], "primary": ["a"], "secondary": []},
                    dict(POLICY, primary=[]),
                    {k: v for k, v in POLICY.items() if k != "auto_failover_policy"}):
            r = requests.post(f"{base}/bad-{name}", json=bad, timeout=10)
            assert r.status_code == 400, (bad, r.text)
            assert r.json()["reason"].startswith(
                f"Invalid format of input policy data. policy: bad-{name}; data: "), r.text
        assert f"bad-{name}" not in requests.get(base, timeout=10).json()
        # Deleting a policy that does not exist is fine.
        assert requests.delete(f"{base}/zz-{name}", timeout=10).status_code == 204
    finally:
        r = requests.delete(f"{base}/{name}", timeout=10)
    assert r.status_code == 204, r.text
    r = requests.get(base, timeout=10)
    assert r.status_code == 200 and name not in r.json(), r.text


def test_anti_affinity_group(admin_url, cluster) -> None:
    run = uuid.uuid4().hex[:8]
    ns = f"public/aa-{run}"
    assert requests.put(f"{admin_url}/admin/v2/namespaces/{ns}", timeout=30).status_code == 204
    url = f"{admin_url}/admin/v2/namespaces/{ns}/antiAffinity"
    try:
        r = requests.get(url, timeout=10)
        assert (r.status_code, r.text) == (200, ""), r.text
        # No LocalPolicies to remove the group from yet: Pulsar's NotFound without a reason.
        r = requests.delete(url, timeout=10)
        assert (r.status_code, r.json()) == (404, {"reason": ""}), r.text
        r = requests.post(url, data=" ", headers={"Content-Type": "application/json"}, timeout=10)
        assert (r.status_code, r.json()) == (412, {"reason": "Anti-affinity group can't be empty"})
        group = f"Grp-{run}"
        r = requests.post(url, data=group, headers={"Content-Type": "application/json"},
                          timeout=10)
        assert r.status_code == 204, r.text
        r = requests.get(url, timeout=10)
        assert (r.status_code, r.text) == (200, group), r.text
        # The group's namespaces of a tenant, the group matched without case.
        lst = f"{admin_url}/admin/v2/namespaces/{cluster}/antiAffinity/{group.lower()}"
        r = requests.get(lst, params={"tenant": "public"}, timeout=10)
        assert (r.status_code, r.json()) == (200, [ns]), r.text
        r = requests.get(lst, timeout=10)
        assert (r.status_code, r.json()) == (400, {"reason": "Tenant should not be null"})
        r = requests.get(f"{admin_url}/admin/v2/namespaces/nope/antiAffinity/{group}",
                         params={"tenant": "public"}, timeout=10)
        assert (r.status_code, r.json()) == (412, {"reason": "Cluster nope does not exist."})
        r = requests.delete(url, timeout=10)
        assert r.status_code == 204, r.text
        r = requests.get(url, timeout=10)
        assert (r.status_code, r.text) == (200, ""), r.text
        r = requests.get(lst, params={"tenant": "public"}, timeout=10)
        assert (r.status_code, r.json()) == (200, []), r.text
    finally:
        requests.delete(f"{admin_url}/admin/v2/namespaces/{ns}", timeout=30)
