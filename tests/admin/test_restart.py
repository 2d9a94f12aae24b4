"""Tenants, namespaces and their policies set through the REST API survive a broker restart."""

import os
import shutil
import subprocess
import tempfile
import time

import requests

from brokers import DEFAULT_MAGNETAR_BIN, read_ports_file, tail, wait_tcp


class RestartableBroker:
    """`magnetar standalone` on free ports in a data directory that outlives one process."""

    def __init__(self, workdir):
        self.binary = os.environ.get("MAGNETAR_BIN", DEFAULT_MAGNETAR_BIN)
        self.workdir = workdir
        self.proc = None

    def start(self, timeout_s=30):
        ports_file = os.path.join(self.workdir, "ports")
        if os.path.exists(ports_file):
            os.remove(ports_file)
        log = open(os.path.join(self.workdir, "magnetar.log"), "ab")
        self.proc = subprocess.Popen(
            [self.binary, "standalone", "--set", "brokerServicePort=0", "--set",
             "webServicePort=0", "--ports-file", ports_file,
             "--set", f"journalDirectory={self.workdir}/journal",
             "--set", f"metadataStoreUrl=rocksdb:{self.workdir}/metadata"],
            cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            assert self.proc.poll() is None, tail(os.path.join(self.workdir, "magnetar.log"))
            ports = read_ports_file(ports_file)
            if "webServicePort" in ports and wait_tcp(ports["brokerServicePort"], deadline):
                return f"http://127.0.0.1:{ports['webServicePort']}"
            time.sleep(0.1)
        raise RuntimeError("magnetar did not start")

    def stop(self):
        self.proc.terminate()
        assert self.proc.wait(timeout=15) == 0


def test_tenants_namespaces_and_policies_survive_restart():
    workdir = tempfile.mkdtemp(prefix="magnetar-admin-restart-")
    broker = RestartableBroker(workdir)
    try:
        url = broker.start()
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
        broker.stop()

        url = broker.start()
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
        broker.stop()
        url = broker.start()
        assert requests.get(f"{url}/admin/v2/tenants/acme").status_code == 404
        assert "acme" not in requests.get(f"{url}/admin/v2/tenants").json()
    finally:
        if broker.proc and broker.proc.poll() is None:
            broker.proc.kill()
            broker.proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def test_topic_policies_and_auto_topic_creation_survive_restart():
    workdir = tempfile.mkdtemp(prefix="magnetar-admin-restart-")
    broker = RestartableBroker(workdir)
    try:
        url = broker.start()
        topic = f"{url}/admin/v2/persistent/public/default/restart-policies"
        assert requests.put(topic).status_code == 204
        assert requests.post(f"{topic}/maxProducers", json=4).status_code == 204
        assert requests.post(f"{topic}/retention", json={"retentionTimeInMinutes": 3,
                                                         "retentionSizeInMB": 9}).status_code == 204
        ns = f"{url}/admin/v2/namespaces/public/default"
        body = {"allowAutoTopicCreation": False}
        assert requests.post(f"{ns}/autoTopicCreation", json=body).status_code == 204
        assert requests.post(f"{ns}/subscriptionExpirationTime", json=12).status_code == 204
        broker.stop()
        url = broker.start()
        topic = f"{url}/admin/v2/persistent/public/default/restart-policies"
        ns = f"{url}/admin/v2/namespaces/public/default"
        assert requests.get(f"{topic}/maxProducers").json() == 4
        assert requests.get(f"{topic}/retention").json() == {"retentionTimeInMinutes": 3,
                                                             "retentionSizeInMB": 9}
        assert requests.get(f"{ns}/autoTopicCreation").json()["allowAutoTopicCreation"] is False
        assert requests.get(f"{ns}/subscriptionExpirationTime").json() == 12
        broker.stop()
    finally:
        if broker.proc and broker.proc.poll() is None:
            broker.proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)
