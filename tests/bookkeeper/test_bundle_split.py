"""The automatic split of a hot bundle (issue 48; Pulsar's loadBalancerAutoBundleSplitEnabled
with the loadBalancerNamespaceBundleMax* thresholds, BundleSplitterTask): 2 `magnetar broker`
processes on this directory's ZooKeeper and bookies (cluster "bk-topics"),
loadBalancerNamespaceBundleMaxMsgRate set low (50 msg/s) and reports every second
(loadBalancerReportUpdateMinIntervalMillis=1000): the leader checks its aggregated load data
(the bundle's long-term msg rate) at each update and asks the owner to split.

A namespace of one bundle with two topics under load (one in each half of the range) splits by
itself, the halves are unloaded (loadBalancerAutoUnloadSplitBundlesEnabled) and looked up again,
landing on different brokers; every message the producers got a receipt for is consumed, in
order (the receipts-before-close rule of the unload)."""

import threading
import time
import uuid
import zlib

import pulsar
import pytest
import requests
from conftest import cluster_brokers
from test_failover import Broker, Cluster

QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
HALF = 0x7FFFFFFF  # range_equally_divide's cut of the full range
SETTINGS = (
    "loadBalancerNamespaceBundleMaxMsgRate=50",
    "loadBalancerReportUpdateMinIntervalMillis=1000",
    "loadBalancerNamespaceMaximumBundles=2",
    # Every broker here runs on this one host and reports its CPU: on a loaded machine all would
    # count as overloaded and placement would pick at random (docs/cluster-mode.md "Placement").
    "loadBalancerCPUResourceWeight=0",
)


@pytest.fixture(scope="module")
def cluster(bk_cluster):
    def started(base: str, i: int) -> Broker:
        b = Broker(base, i, bk_cluster.uri, SETTINGS)
        b.start()
        return b
    with cluster_brokers(bk_cluster, "bk-topics", started, 2, "magnetar-bk-split-") as brokers:
        yield Cluster(bk_cluster, brokers)


def topic_in(ns: str, lo: int, hi: int) -> str:
    i = 0
    while not lo <= zlib.crc32(f"persistent://{ns}/hot-{i}".encode()) < hi:
        i += 1
    return f"persistent://{ns}/hot-{i}"


def metric(web: str, name: str) -> float:
    """The value of the first sample of a /metrics family (0 when absent)."""
    for line in requests.get(f"{web}/metrics", timeout=10).text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def bundles(web: str, ns: str) -> list[str]:
    r = requests.get(f"{web}/admin/v2/namespaces/{ns}/bundles", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["boundaries"]


class Load:
    """One producer (no batching) sending "n" at `rate` per second from a thread; receipts kept."""

    def __init__(self, client: pulsar.Client, topic: str, rate: int) -> None:
        self.producer = client.create_producer(topic, batching_enabled=False,
                                               send_timeout_millis=0)
        self.acked: list[bytes] = []
        self.errors: list[str] = []
        self.rate = rate
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        n = 0
        next_at = time.monotonic()
        while self.running:
            payload = str(n).encode()
            try:
                self.producer.send(payload)
                self.acked.append(payload)
            except Exception as e:  # noqa: BLE001 (recorded, the test fails on it)
                self.errors.append(repr(e))
            n += 1
            next_at += 1.0 / self.rate
            time.sleep(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self.running = False
        self.thread.join(60)


def test_hot_bundle_splits_by_itself_and_its_halves_move(cluster):
    web = cluster.brokers[0].web
    ns = f"public/hot-{uuid.uuid4().hex[:8]}"
    r = requests.put(f"{web}/admin/v2/namespaces/{ns}", json={"bundles": {"numBundles": 1}},
                     timeout=30)
    assert r.status_code == 204, r.text
    topics = [topic_in(ns, 0, HALF), topic_in(ns, HALF, 0xFFFFFFFF)]
    client = pulsar.Client(cluster.service_url, operation_timeout_seconds=60, logger=QUIET)
    try:
        consumers = [client.subscribe(t, "check") for t in topics]
        loads = [Load(client, t, 40) for t in topics]  # 80 msg/s in, 80 out: past 50
        started = time.monotonic()
        deadline = started + 40
        while bundles(web, ns) == ["0x00000000", "0xffffffff"]:
            assert time.monotonic() < deadline, "the hot bundle did not split"
            time.sleep(0.2)
        split_after = time.monotonic() - started
        assert bundles(web, ns) == ["0x00000000", "0x7fffffff", "0xffffffff"]
        # Unloaded, the halves were placed again by the leader: one on each broker.
        deadline = time.monotonic() + 30
        while True:
            owners = {cluster.owner(t).url for t in topics}
            if len(owners) == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert len(owners) == 2, f"both halves on {owners}"
        time.sleep(2)  # load on the new owners
        for load in loads:
            load.stop()
        for load, c, t in zip(loads, consumers, topics):
            assert not load.errors, load.errors[:3]
            got: list[bytes] = []
            seen: set[bytes] = set()
            while len(got) < len(load.acked):
                m = c.receive(timeout_millis=20000)
                c.acknowledge(m)
                if m.data() not in seen:  # an unacked message redelivered after the move: once
                    seen.add(m.data())
                    got.append(m.data())
            assert got == load.acked, f"{t}: {len(got)} consumed of {len(load.acked)} acked"
        print(f"split after {split_after:.1f} s; {sum(len(x.acked) for x in loads)} messages")
        assert sum(metric(b.web, "pulsar_lb_bundles_split_total") for b in cluster.brokers) >= 1
    finally:
        client.close()
