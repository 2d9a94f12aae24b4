"""Load reports and the leader's aggregation on BookKeeper (issue 48, first part): ZooKeeper + 3
bookies (conftest) + 3 `magnetar broker` processes of cluster "bk-topics", with
loadBalancerReportUpdateMinIntervalMillis=500 and loadBalancerResourceQuotaUpdateIntervalMinutes=1
(the shortest Pulsar allows: the leader's first write comes one minute after it became leader,
so this test takes about that long).

A producer sends RATE messages a second to one topic. Then, read from ZooKeeper
(tests/harness/zk.py):
- the owner's report /loadbalance/brokers/{owner} (Pulsar's LocalBrokerData) shows msgRateIn and
  its bundle's lastStats near RATE, numProducers 1, CPU with a positive limit, lastUpdate moving;
  another broker's report shows no traffic; GET /admin/v2/broker-stats/load-report on the owner
  the same, /metrics pulsar_lb_cpu_usage;
- the leader writes /loadbalance/bundle-data/{bundle} of the topic's bundle (Pulsar's windows of
  10 and 1000 samples, short-term msgRateIn near RATE) and
  /loadbalance/broker-time-average/{owner} with the owner's short-term msgRateIn near RATE."""

import json
import os
import sys
import time
import uuid

import pulsar
import pytest
import requests
from conftest import cluster_brokers
from test_failover import Broker, Cluster

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.zk import ZkClient  # noqa: E402

RATE = 200
SETTINGS = (
    "loadBalancerReportUpdateMinIntervalMillis=500",
    "loadBalancerResourceQuotaUpdateIntervalMinutes=1",
)
QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


@pytest.fixture(scope="module")
def lb_cluster(bk_cluster):
    def started(base: str, i: int) -> Broker:
        b = Broker(base, i, bk_cluster.uri, SETTINGS)
        b.start()
        return b
    with cluster_brokers(bk_cluster, "bk-topics", started, 3, "magnetar-bk-lb-") as brokers:
        yield Cluster(bk_cluster, brokers)


def broker_id(b: Broker) -> str:
    return f"127.0.0.1:{b.web_port}"


def read_json(zk: ZkClient, path: str) -> dict | None:
    data = zk.get(path)
    return None if data is None else json.loads(data)


def wait_for(what: str, timeout: float, check):
    """check() until it returns something truthy (returned), failing with `what` after timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"{what} within {timeout} s (last: {last})")


def test_reports_and_bundle_data(lb_cluster: Cluster) -> None:
    cl = lb_cluster
    topic = f"persistent://public/default/lb-{uuid.uuid4().hex[:8]}"
    client = pulsar.Client(cl.service_url, operation_timeout_seconds=30, logger=QUIET)
    zk_host, zk_port = cl.bk.zk.split(":")
    zk = ZkClient(zk_host, int(zk_port))
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        owner = cl.owner(topic)
        path = f"/loadbalance/brokers/{broker_id(owner)}"
        start = time.monotonic()
        sent = 0

        def pump() -> None:
            nonlocal sent
            target = int((time.monotonic() - start) * RATE)
            while sent < target:
                producer.send_async(b"x" * 100, lambda res, mid: None)
                sent += 1

        def loaded_report():
            pump()
            r = read_json(zk, path)
            return r if r and r["msgRateIn"] > RATE * 0.6 else None

        report = wait_for("the owner's report shows the topic's msgRateIn", 30, loaded_report)
        assert report["msgRateIn"] < RATE * 1.6, report["msgRateIn"]
        assert report["loadReportType"] == "LocalBrokerData"
        assert report["numProducers"] >= 1 and report["numTopics"] >= 1, report
        bundle = next(b for b, s in report["lastStats"].items() if s["msgRateIn"] > RATE * 0.6)
        assert bundle in report["bundles"] and bundle.startswith("public/default/0x"), report
        assert report["lastStats"][bundle]["producerCount"] == 1
        assert report["msgThroughputIn"] > RATE * 0.6 * 100, report["msgThroughputIn"]
        assert report["cpu"]["limit"] > 0, report["cpu"]
        assert report["pulsarServiceUrl"] == owner.url
        first_update = report["lastUpdate"]

        idle = next(b for b in cl.brokers if b is not owner)
        idle_report = read_json(zk, f"/loadbalance/brokers/{broker_id(idle)}")
        assert idle_report["msgRateIn"] == 0, idle_report
        assert bundle not in idle_report["bundles"]

        admin = requests.get(f"{owner.web}/admin/v2/broker-stats/load-report", timeout=10).json()
        assert admin["lastStats"][bundle]["msgRateIn"] > RATE * 0.6, admin
        metrics = requests.get(f"{owner.web}/metrics", timeout=10).text
        assert "pulsar_lb_cpu_usage{" in metrics and 'metric="loadBalancing"' in metrics

        leader = json.loads(zk.get("/loadbalance/leader"))["brokerId"]
        assert leader in {broker_id(b) for b in cl.brokers}, leader

        def bundle_data():
            pump()
            return read_json(zk, f"/loadbalance/bundle-data/{bundle}")

        data = wait_for("the leader's bundle data", 90, bundle_data)
        short, long_ = data["shortTermData"], data["longTermData"]
        assert (short["maxSamples"], long_["maxSamples"]) == (10, 1000), data
        assert short["numSamples"] >= 1 and data["topics"] == 1, data
        assert RATE * 0.3 < short["msgRateIn"] < RATE * 1.6, data
        average = read_json(zk, f"/loadbalance/broker-time-average/{broker_id(owner)}")
        assert average is not None and average["shortTermMsgRateIn"] > RATE * 0.3, average
        assert set(average) >= {"shortTermMsgThroughputIn", "longTermMsgRateOut"}, average
        # Each broker wrote its own time average at start.
        assert {broker_id(b) for b in cl.brokers} <= set(
            zk.children("/loadbalance/broker-time-average"))

        final = read_json(zk, path)
        assert final["lastUpdate"] >= first_update
        print(f"owner report msgRateIn {report['msgRateIn']:.1f}, bundle data after "
              f"{time.monotonic() - start:.0f} s: short {short['msgRateIn']:.1f} msg/s of "
              f"{short['numSamples']} samples")
        producer.flush()
        producer.close()
    finally:
        zk.close()
        client.close()
