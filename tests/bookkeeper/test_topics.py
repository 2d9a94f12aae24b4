"""Topics on BookKeeper: two `magnetar broker` processes in cluster mode with
bookkeeperMetadataServiceUri on this directory's ZooKeeper and bookies. Messages acknowledged by
the owner are all read from the other broker after a kill -9 of the owner (it recovers the
ledgers, fencing the dead owner's, and the subscription resumes at its cursor); the ledgers carry
Pulsar's custom metadata as BookKeeper's own shell lists them."""

import base64
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

import pulsar
import requests
from conftest import broker_urls, magnetar_bin, stop_process, wait_registered

SESSION_TIMEOUT_MS = 4000
CLUSTER = "bk-topics"


def zk_url(uri: str) -> str:
    """zk://127.0.0.1:PORT/ledgers -> zk:127.0.0.1:PORT"""
    return "zk:" + re.match(r"zk://([^/]+)/", uri).group(1)


class Broker:
    def __init__(self, base: str, i: int, uri: str) -> None:
        self.dir = os.path.join(base, f"broker-{i}")
        os.makedirs(self.dir, exist_ok=True)
        self.ports_file = os.path.join(self.dir, "ports")
        self.log = open(os.path.join(self.dir, "broker.log"), "w")
        self.proc = subprocess.Popen(
            [
                magnetar_bin(),
                "broker",
                "--ports-file",
                self.ports_file,
                *[
                    arg
                    for kv in (
                        f"metadataStoreUrl={zk_url(uri)}",
                        f"clusterName={CLUSTER}",
                        "advertisedAddress=127.0.0.1",
                        "bindAddress=127.0.0.1",
                        "brokerServicePort=0",
                        "webServicePort=0",
                        f"journalDirectory={self.dir}/data/journal",
                        f"metadataStoreSessionTimeoutMillis={SESSION_TIMEOUT_MS}",
                        f"bookkeeperMetadataServiceUri={uri}",
                        "managedLedgerDefaultEnsembleSize=2",
                        "managedLedgerDefaultWriteQuorum=2",
                        "managedLedgerDefaultAckQuorum=2",
                        "managedLedgerMaxEntriesPerLedger=50",
                        "managedLedgerMinLedgerRolloverTimeMinutes=0",
                    )
                    for arg in ("--set", kv)
                ],
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.url = self.web = ""

    def wait_registered(self) -> None:
        ports = wait_registered(self.proc, os.path.join(self.dir, "broker.log"), self.ports_file)
        self.url, self.web = broker_urls(ports)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        stop_process(self.proc, sig)
        self.log.close()


def test_killed_owner_loses_no_acknowledged_message(bk_cluster):
    bk_cluster.start_bookies()  # earlier tests kill bookies
    bk_cluster.init_cluster_metadata(CLUSTER)
    base = tempfile.mkdtemp(prefix="magnetar-bk-topics-")
    brokers = [Broker(base, i, bk_cluster.uri) for i in range(2)]
    client = None
    try:
        for b in brokers:
            b.wait_registered()
        topic = f"persistent://public/default/bk-{uuid.uuid4().hex[:8]}"
        owner_url = requests.get(
            f"{brokers[0].web}/lookup/v2/topic/{topic.replace('://', '/')}", timeout=10
        ).json()["brokerUrl"]
        owner = next(b for b in brokers if b.url == owner_url)
        other = next(b for b in brokers if b is not owner)

        client = pulsar.Client(owner.url, operation_timeout_seconds=30)
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        sent = [f"m-{i}".encode() for i in range(120)]  # rolls over ledgers of 50 entries
        for m in sent:
            producer.send(m)  # returns once the owner acknowledged it: Qa bookies have it
        for _ in range(20):  # the subscription acknowledges the first 20
            consumer.acknowledge(consumer.receive(timeout_millis=10000))
        # Acknowledgements reach the broker (the client sends them on a timer) and the bookies:
        # without a receipt asked, a cursor writes at most once a second
        # (managedLedgerDefaultMarkDeleteRateLimit), the rest on the next 1 s tick after that.
        time.sleep(3)
        client.close()
        client = None

        owner.stop(signal.SIGKILL)
        start = time.monotonic()
        client = pulsar.Client(other.url, operation_timeout_seconds=60)
        consumer = client.subscribe(topic, "sub")
        got = []
        while len(got) < 100:
            got.append(consumer.receive(timeout_millis=60000).data())
        took = time.monotonic() - start
        # Every acknowledged message after the cursor, in order; the acked 20 are not redelivered.
        assert got == sent[20:], (got[:5], len(got))
        print(
            f"\nfailover: the survivor served the topic {took:.1f} s after the kill "
            f"(session timeout {SESSION_TIMEOUT_MS / 1000:.0f} s)"
        )
        # And it writes on, into a new ledger of its own.
        producer = client.create_producer(topic)
        producer.send(b"after")
        assert consumer.receive(timeout_millis=30000).data() == b"after"

        # BookKeeper's shell lists the ledgers with Pulsar's custom metadata (values in base64).
        rc, out = bk_cluster.shell("listledgers", "-m")
        assert rc == 0, out[-2000:]
        name = "public/default/persistent/" + topic.rsplit("/", 1)[1]
        encoded = base64.b64encode(name.encode()).decode()
        assert f"pulsar/managed-ledger=base64:{encoded}" in out, out[-3000:]
        assert "component=base64:" + base64.b64encode(b"managed-ledger").decode() in out
    finally:
        if client:
            client.close()
        for b in brokers:
            b.stop()
        shutil.rmtree(base, ignore_errors=True)
