"""Load shedding by the leader (issue 48; Pulsar's ModularLoadManagerImpl.doLoadShedding with
loadBalancerLoadSheddingStrategy=UniformLoadShedder): `magnetar broker` processes on this
directory's ZooKeeper and bookies (cluster "bk-topics"), the shedding pass every second
(loadBalancerSheddingIntervalMillisForTesting, Magnetar's test-only setting: Pulsar's interval is
in minutes), reports every 500 ms, at most one bundle per pass (maxUnloadBundleNumPerShedding=1).

One broker owns both bundles of a namespace, each with a topic under load; a second broker
joins, idle. The leader (the first broker) finds the msg rates far apart, unloads one bundle
through its owner's admin API, and the bundle is placed on the idle broker; the other bundle
stays (one per pass, then the grace period). Every message a producer got a receipt for is
stored exactly once, in order (a reader from the earliest position; deduplication on)."""

import os
import time
import uuid

import pulsar
import pytest
import requests
from conftest import cluster_brokers
from test_bundle_split import HALF, Load, metric, topic_in
from test_failover import CLUSTER, Broker, Cluster

QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
SETTINGS = (
    "loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.UniformLoadShedder",
    "loadBalancerSheddingIntervalMillisForTesting=1000",
    "loadBalancerReportUpdateMinIntervalMillis=500",
    "minUnloadMessage=10",
    "maxUnloadBundleNumPerShedding=1",
    "loadBalancerAutoBundleSplitEnabled=false",
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
    with cluster_brokers(bk_cluster, CLUSTER, started, 1, "magnetar-bk-shed-") as brokers:
        yield Cluster(bk_cluster, brokers)


def stored(client: pulsar.Client, topic: str, n: int) -> list[bytes]:
    """The topic's messages from the earliest: n of them, then none within a second."""
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    try:
        out = [reader.read_next(timeout_millis=20000).data() for _ in range(n)]
        with pytest.raises(pulsar.Timeout):
            reader.read_next(timeout_millis=1000)
        return out
    finally:
        reader.close()


def test_loaded_broker_sheds_a_bundle_to_the_idle_one(cluster):
    a = cluster.brokers[0]
    ns = f"public/shed-{uuid.uuid4().hex[:8]}"
    r = requests.put(f"{a.web}/admin/v2/namespaces/{ns}", json={"bundles": {"numBundles": 2}},
                     timeout=30)
    assert r.status_code == 204, r.text
    topics = [topic_in(ns, 0, HALF), topic_in(ns, HALF, 0xFFFFFFFF)]
    client = pulsar.Client(a.url, operation_timeout_seconds=60, logger=QUIET)
    b = Broker(os.path.dirname(a.dir), 1, cluster.bk.uri, SETTINGS)
    try:
        loads = [Load(client, t, 50) for t in topics]  # 50 msg/s each on the only broker
        assert {cluster.owner(t).url for t in topics} == {a.url}
        time.sleep(2)  # a report with the traffic, sampled by the leader
        b.start()
        b.wait_registered()
        cluster.brokers.append(b)
        started = time.monotonic()
        deadline = started + 30
        while True:
            owners = [cluster.owner(t).url for t in topics]
            if b.url in owners or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        moved_after = time.monotonic() - started
        assert sorted(owners) == sorted([a.url, b.url]), f"owners {owners}"
        assert metric(a.web, "pulsar_lb_unload_bundle_total") >= 1
        assert metric(a.web, "pulsar_lb_unload_broker_total") >= 1
        time.sleep(3)  # load on the new owner; a second pass moves nothing more
        assert sorted(cluster.owner(t).url for t in topics) == sorted([a.url, b.url])
        for load in loads:
            load.stop()
        for load, t in zip(loads, topics):
            assert not load.errors, load.errors[:3]
            got = stored(client, t, len(load.acked))
            assert got == load.acked, f"{t}: stored differs from the {len(load.acked)} acked"
        print(f"shed after {moved_after:.1f} s; {sum(len(x.acked) for x in loads)} messages")
    finally:
        client.close()
        b.stop()
