"""Placement by load (issue 48): ZooKeeper + bookies (conftest) + 3 `magnetar broker` processes
of cluster "bk-topics" on 127.0.0.1, 127.0.0.2 and 127.0.0.3 (so that isolation policies, which
match a broker's host, can tell them apart), loadBalancerReportUpdateMinIntervalMillis=500 and
loadBalancerDistributeBundlesEvenlyEnabled=false (the leader's choice is the strategy's alone).

- By msg rate, not by bundle count: a producer and a consumer make one broker ("hot") carry about
  RATE msg/s each way on its single bundle; the eight bundles of a new namespace then go to the two
  idle brokers (at least two each), and a bundle of yet another namespace goes to an idle broker
  too, although the hot broker has the fewest bundles (1 against 2 or more): Pulsar's
  LeastLongTermMessageRate.
- Unload with destinationBroker: four bundles unloaded naming the hot broker land there (a
  destination that is not registered: 409).
- Anti-affinity: three namespaces of one anti-affinity group land on three different brokers,
  the last one on the hot broker (the only one without a namespace of the group).
- Isolation: with a policy naming 127.0.0.3 the primary of public/iso-.*, a namespace it matches
  lands on 127.0.0.3 and one it does not match never does (127.0.0.3 is no longer shared)."""

import time
import uuid
import zlib

import pulsar
import pytest
import requests
from conftest import cluster_brokers
from test_failover import Broker

RATE = 1000
CLUSTER = "bk-topics"
SETTINGS = (
    "loadBalancerReportUpdateMinIntervalMillis=500",
    "loadBalancerDistributeBundlesEvenlyEnabled=false",
    # The three brokers share one host (its CPU is every broker's): weighted 0, so that a busy CI
    # machine does not make them all "overloaded" (placed at random, as Pulsar does then).
    "loadBalancerCPUResourceWeight=0",
)
QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


class HostBroker(Broker):
    """A broker bound to and advertising 127.0.0.{i + 1}."""

    def __init__(self, base: str, i: int, uri: str) -> None:
        self.host = f"127.0.0.{i + 1}"
        super().__init__(base, i, uri, SETTINGS + (f"advertisedAddress={self.host}",
                                                   f"bindAddress={self.host}"))

    def wait_registered(self) -> None:
        super().wait_registered()
        self.url = f"pulsar://{self.host}:{self.port}"
        self.web = f"http://{self.host}:{self.web_port}"

    @property
    def id(self) -> str:
        return f"{self.host}:{self.web_port}"


@pytest.fixture(scope="module")
def brokers(bk_cluster):
    def started(base: str, i: int) -> HostBroker:
        b = HostBroker(base, i, bk_cluster.uri)
        b.start()
        return b
    with cluster_brokers(bk_cluster, CLUSTER, started, 3, "magnetar-bk-place-") as bs:
        yield bs


def create_namespace(web: str, ns: str, bundles: int = 1) -> None:
    r = requests.put(f"{web}/admin/v2/namespaces/{ns}", json={"bundles": {"numBundles": bundles}},
                     timeout=10)
    assert r.status_code in (204, 409), r.text


def owner_of(brokers: list[HostBroker], topic: str) -> HostBroker:
    """The broker a lookup through the first broker names (its bundle placed by the leader)."""
    path = topic.replace("://", "/")
    deadline = time.monotonic() + 30
    while True:
        r = requests.get(f"{brokers[0].web}/lookup/v2/topic/{path}", timeout=10)
        if r.status_code == 200:
            url = r.json()["brokerUrl"]
            return next(b for b in brokers if b.url == url)
        assert time.monotonic() < deadline, r.text
        time.sleep(0.2)


def topic_in_bundle(ns: str, bundles: list[str], index: int) -> str:
    """A topic name of namespace ns whose bundle is bundles[index] (by Pulsar's hash)."""
    lo, hi = (int(x, 16) for x in bundles[index].split("_"))
    for n in range(100000):
        name = f"persistent://{ns}/t{n}"
        if lo <= zlib.crc32(name.encode()) < hi:
            return name
    raise AssertionError("no topic name found")


def bundles_of(web: str, ns: str) -> list[str]:
    b = requests.get(f"{web}/admin/v2/namespaces/{ns}/bundles", timeout=10).json()["boundaries"]
    return [f"{b[i]}_{b[i + 1]}" for i in range(len(b) - 1)]


def leader_of(brokers: list[HostBroker]) -> HostBroker:
    r = requests.get(f"{brokers[0].web}/admin/v2/brokers/leaderBroker", timeout=10).json()
    return next(b for b in brokers if b.id == r["brokerId"])


def owner_after_unload(brokers: list[HostBroker], topic: str, old: HostBroker) -> HostBroker:
    """The owner a lookup names once it no longer names `old` (a broker's view of the ownership
    znodes may lag the unload by a notification)."""
    deadline = time.monotonic() + 10
    while (b := owner_of(brokers, topic)) is old and time.monotonic() < deadline:
        time.sleep(0.1)
    return b


def unload_to_destination(brokers: list[HostBroker], ns: str, dest: HostBroker) -> None:
    """ns (4 bundles) placed, then each bundle unloaded with destinationBroker=dest through a
    broker that is neither its owner nor the leader where there is one (307 to the leader, which
    keeps the destination, then to the owner): each lands on dest. A destination that is not
    registered is refused (409, Pulsar's message)."""
    create_namespace(brokers[0].web, ns, 4)
    bundles = bundles_of(brokers[0].web, ns)
    topics = [topic_in_bundle(ns, bundles, i) for i in range(4)]
    owners = [owner_of(brokers, t) for t in topics]
    assert dest not in owners, [o.id for o in owners]
    r = requests.put(f"{brokers[0].web}/admin/v2/namespaces/{ns}/{bundles[0]}/unload",
                     params={"destinationBroker": "127.0.0.9:1"}, timeout=30)
    assert r.status_code == 409, (r.status_code, r.text)
    assert "inactive destination broker" in r.json()["reason"], r.text
    leader = leader_of(brokers)
    for i, (bundle, topic, owner) in enumerate(zip(bundles, topics, owners)):
        via = next((b for b in brokers if b not in (owner, leader)), owner)
        prefix = "http://" if i % 2 else ""  # Pulsar drops an http(s):// prefix
        r = requests.put(f"{via.web}/admin/v2/namespaces/{ns}/{bundle}/unload",
                         params={"destinationBroker": prefix + dest.id}, timeout=30)
        assert r.status_code == 204, (r.status_code, r.text)
        got = owner_after_unload(brokers, topic, owner)
        assert got is dest, (i, got.id, dest.id)


def test_placement_by_rate_anti_affinity_and_isolation(brokers: list[HostBroker]) -> None:
    web = brokers[0].web
    run = uuid.uuid4().hex[:6]
    client = pulsar.Client("pulsar://" + ",".join(f"{b.host}:{b.port}" for b in brokers),
                           operation_timeout_seconds=30, logger=QUIET)
    try:
        # One hot bundle on one broker.
        hot_ns = f"public/hot-{run}"
        create_namespace(web, hot_ns)
        hot_topic = f"persistent://{hot_ns}/t"
        hot = owner_of(brokers, hot_topic)
        consumer = client.subscribe(hot_topic, "s")
        producer = client.create_producer(hot_topic, batching_enabled=False)
        start = time.monotonic()
        sent = 0

        def pump(seconds: float) -> None:
            nonlocal sent
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                target = int((time.monotonic() - start) * RATE)
                while sent < target:
                    producer.send_async(b"x" * 100, lambda res, mid: None)
                    sent += 1
                while True:
                    try:
                        consumer.acknowledge(consumer.receive(timeout_millis=1))
                    except pulsar.Timeout:
                        break
                time.sleep(0.01)

        def reported_rate(b: HostBroker) -> float:
            r = requests.get(f"{b.web}/admin/v2/broker-stats/load-report", timeout=10).json()
            return r["msgRateIn"] + r["msgRateOut"]

        pump(4)
        deadline = time.monotonic() + 20
        while reported_rate(hot) < 1.5 * RATE:
            assert time.monotonic() < deadline, "the hot broker's report shows no traffic"
            pump(0.5)
        pump(2)  # a few of its reports sampled by the leader

        # Eight bundles of a new namespace: all on the idle brokers, several each (how many
        # each follows their rates: an idle bundle once sampled counts 0 msg/s, as in Pulsar).
        many_ns = f"public/many-{run}"
        create_namespace(web, many_ns, 8)
        many = bundles_of(web, many_ns)
        owners = [owner_of(brokers, topic_in_bundle(many_ns, many, i)) for i in range(8)]
        pump(0.2)
        assert hot not in owners, [o.id for o in owners]
        idle = [b for b in brokers if b is not hot]
        assert min(owners.count(b) for b in idle) >= 2, [o.id for o in owners]
        # The hot broker has the fewest bundles, yet a new bundle goes elsewhere.
        fresh = owner_of(brokers, f"persistent://public/fresh-{run}/t")
        assert fresh is not hot, fresh.id

        # Unload with destinationBroker (Pulsar 3+'s `namespaces unload --destinationBroker`):
        # the next placement goes there, even to the hot broker no placement picks by load.
        unload_to_destination(brokers, f"public/dest-{run}", hot)
        pump(0.2)

        # Anti-affinity: three namespaces of group g on three brokers.
        group = f"g-{run}"
        placed = []
        for k in range(3):
            ns = f"public/aa{k}-{run}"
            create_namespace(web, ns)
            r = requests.post(f"{web}/admin/v2/namespaces/{ns}/antiAffinity", data=group,
                              headers={"Content-Type": "application/json"}, timeout=10)
            assert r.status_code == 204, r.text
            placed.append(owner_of(brokers, f"persistent://{ns}/t"))
            pump(0.2)
        assert len({b.id for b in placed}) == 3, [b.id for b in placed]
        assert placed[2] is hot, [b.id for b in placed]
        listed = requests.get(f"{web}/admin/v2/namespaces/{CLUSTER}/antiAffinity/{group}",
                              params={"tenant": "public"}, timeout=10).json()
        assert listed == sorted(f"public/aa{k}-{run}" for k in range(3)), listed

        # Isolation: public/iso-.* only on 127.0.0.3, which no other namespace gets any more.
        third = brokers[2]
        policy = {"namespaces": [f"public/iso-{run}.*"], "primary": ["127\\.0\\.0\\.3(:.*)?"],
                  "secondary": [], "auto_failover_policy": {
                      "policy_type": "min_available",
                      "parameters": {"min_limit": "1", "usage_threshold": "80"}}}
        r = requests.post(f"{web}/admin/v2/clusters/{CLUSTER}/namespaceIsolationPolicies/"
                          f"iso-{run}", json=policy, timeout=30)
        assert r.status_code == 204, r.text
        # Placement matches a broker's host, the brokers route its whole id (as Pulsar).
        listed = requests.get(f"{web}/admin/v2/clusters/{CLUSTER}/namespaceIsolationPolicies/"
                              f"brokers/{third.id}", timeout=10).json()
        assert listed["primary"] is True and listed["policyName"] == f"iso-{run}", listed
        for k in range(2):
            ns = f"public/iso-{run}-{k}"
            create_namespace(web, ns)
            assert owner_of(brokers, f"persistent://{ns}/t") is third
            other = f"public/free-{run}-{k}"
            create_namespace(web, other)
            assert owner_of(brokers, f"persistent://{other}/t") is not third
        r = requests.delete(f"{web}/admin/v2/clusters/{CLUSTER}/namespaceIsolationPolicies/"
                            f"iso-{run}", timeout=10)
        assert r.status_code == 204, r.text
        print(f"hot {hot.id} at {reported_rate(hot):.0f} msg/s; many on "
              f"{[o.id for o in owners]}; anti-affinity on {[b.id for b in placed]}")
        producer.close()
        consumer.close()
    finally:
        client.close()
