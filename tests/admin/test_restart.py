"""Tenants, namespaces and their policies set through the REST API survive a broker restart."""

import requests

from harness.broker import MagnetarProcess


def restart_broker() -> MagnetarProcess:
    """`magnetar standalone` on free ports in a data directory that outlives one process."""
    return MagnetarProcess(prefix="magnetar-admin-restart-")


def start(broker: MagnetarProcess) -> str:
    """Starts the broker; returns its admin URL."""
    url = broker.start().admin_url
    assert url
    return url


def stop(broker: MagnetarProcess) -> None:
    assert broker.stop() == 0


def test_tenants_namespaces_and_policies_survive_restart():
    broker = restart_broker()
    try:
        url = start(broker)
        tenant = {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}
        assert requests.put(f"{url}/admin/v2/tenants/acme", json=tenant).status_code == 204
        assert requests.put(f"{url}/admin/v2/namespaces/acme/orders").status_code == 204
        ns = f"{url}/admin/v2/namespaces/acme/orders"
        assert requests.post(f"{ns}/retention", json={"retentionTimeInMinutes": 5,
                                                      "retentionSizeInMB": 7}).status_code == 204
        assert requests.post(f"{ns}/deduplication", json=True).status_code == 204
        assert requests.post(f"{ns}/messageTTL", json=90).status_code == 204
        quota = {"limitSize": 4096, "limitTime": -1, "policy": "producer_exception"}
        assert requests.post(f"{ns}/backlogQuota", json=quota).status_code == 204
        assert requests.post(f"{ns}/permissions/app", json=["produce"]).status_code == 204
        assert requests.put(f"{url}/admin/v2/persistent/acme/orders/events/partitions",
                            data="3", headers={"Content-Type": "application/json"}
                            ).status_code == 204
        before = requests.get(ns).json()
        stop(broker)

        url = start(broker)
        ns = f"{url}/admin/v2/namespaces/acme/orders"
        assert requests.get(f"{url}/admin/v2/tenants/acme").json() == tenant
        assert requests.get(f"{url}/admin/v2/namespaces/acme").json() == ["acme/orders"]
        assert requests.get(ns).json() == before
        assert requests.get(f"{ns}/deduplication").json() is True
        assert requests.get(f"{ns}/messageTTL").json() == 90
        assert requests.get(f"{ns}/backlogQuotaMap").json() == {"destination_storage": quota}
        assert requests.get(f"{ns}/permissions").json() == {"app": ["produce"]}
        assert requests.get(f"{url}/admin/v2/persistent/acme/orders/events/partitions"
                            ).json()["partitions"] == 3

        # Deletions are persisted too.
        assert requests.delete(f"{ns}?force=true").status_code == 204
        assert requests.delete(f"{url}/admin/v2/tenants/acme").status_code == 204
        stop(broker)
        url = start(broker)
        assert requests.get(f"{url}/admin/v2/tenants/acme").status_code == 404
        assert "acme" not in requests.get(f"{url}/admin/v2/tenants").json()
    finally:
        broker.close()


def test_topic_policies_and_auto_topic_creation_survive_restart():
    broker = restart_broker()
    try:
        url = start(broker)
        topic = f"{url}/admin/v2/persistent/public/default/restart-policies"
        assert requests.put(topic).status_code == 204
        assert requests.post(f"{topic}/maxProducers", json=4).status_code == 204
        assert requests.post(f"{topic}/retention", json={"retentionTimeInMinutes": 3,
                                                         "retentionSizeInMB": 9}).status_code == 204
        ns = f"{url}/admin/v2/namespaces/public/default"
        body = {"allowAutoTopicCreation": False}
        assert requests.post(f"{ns}/autoTopicCreation", json=body).status_code == 204
        assert requests.post(f"{ns}/subscriptionExpirationTime", json=12).status_code == 204
        stop(broker)
        url = start(broker)
        topic = f"{url}/admin/v2/persistent/public/default/restart-policies"
        ns = f"{url}/admin/v2/namespaces/public/default"
        assert requests.get(f"{topic}/maxProducers").json() == 4
        assert requests.get(f"{topic}/retention").json() == {"retentionTimeInMinutes": 3,
                                                             "retentionSizeInMB": 9}
        assert requests.get(f"{ns}/autoTopicCreation").json()["allowAutoTopicCreation"] is False
        assert requests.get(f"{ns}/subscriptionExpirationTime").json() == 12
        stop(broker)
    finally:
        broker.close()
