"""Load reports read across kinds in a mixed cluster (issue 48): a real Apache Pulsar 4.2.4 broker
(tools/pulsar-reference/pulsar-broker.sh, ModularLoadManagerImpl) and Magnetar brokers on one
ZooKeeper (a chroot of this directory's) and the same bookies, cluster "mixed-lb"; one Pulsar
start. Every broker: loadBalancerDistributeBundlesEvenlyEnabled=false (the leader's choice is
LeastLongTermMessageRate's alone, not a bundle count), load shedding and automatic splits off (no
bundle moves during the test), CPU weight 0 (all share this host's CPU), reports every 500 ms.

1. A Magnetar leader (Magnetar broker A started first) with the Pulsar broker P among its
   candidates. The LocalBrokerData P writes has the fields Magnetar's has. All idle: a
   namespace's 8 bundles looked up through P land on both kinds. Then P carries RATE msg/s each
   way on one topic (its report shows it): the 8 bundles of another namespace all go to A, none
   to P, although P took bundles when idle: Magnetar read P's per-bundle stats.
2. A stopped: P, the only broker left, leads. Two Magnetar brokers join: HOT carries RATE msg/s
   each way on one topic, IDLE nothing. The 16 bundles of a new namespace looked up through P
   never go to HOT (a bundle count would give it some: it has the fewest), several go to IDLE:
   Pulsar's leader read Magnetar's reports. About a minute after it became leader
   (loadBalancerResourceQuotaUpdateIntervalMinutes=1, the least Pulsar takes) Pulsar's leader
   writes /loadbalance/broker-time-average/{HOT} with HOT's rate (over Magnetar's own all-zero
   one) and the hot bundle's /loadbalance/bundle-data: Pulsar's aggregation of Magnetar's
   lastStats, as Pulsar's admin API shows no other broker's report.
3. Unload with destinationBroker across kinds: through P to the Magnetar leader (phase 1: a bundle
   of A goes to the loaded P), and through a Magnetar owner to the Pulsar leader (phase 2: a
   bundle goes to HOT): each leader keeps the destination for the bundle's next placement.

Skipped like test_pulsar_interop.py without Java or the Pulsar jars."""

import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid

import pulsar
import pytest
import requests
from test_placement import bundles_of, topic_in_bundle
from test_pulsar_interop import MagnetarBroker, PulsarBroker, pulsar_available

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.zk import ZkClient  # noqa: E402

pytestmark = pytest.mark.skipif(bool(pulsar_available()), reason=pulsar_available() or "-")

CLUSTER = "mixed-lb"
RATE = 400  # msg/s each way on the hot topic
# Both kinds (Pulsar's names). The idle brokers' long-term rate is 0, the hot one's 2 x RATE.
LB_SETTINGS = (
    "loadBalancerReportUpdateMinIntervalMillis=500",
    "loadBalancerDistributeBundlesEvenlyEnabled=false",
    "loadBalancerSheddingEnabled=false",
    "loadBalancerAutoBundleSplitEnabled=false",
)
PULSAR_SETTINGS = LB_SETTINGS + (
    # Pulsar's topic rates (its report's lastStats) are taken every statsUpdateFrequencyInSecs
    # (60 by default); Magnetar's every 2 s.
    "statsUpdateInitialDelayInSecs=1",
    "statsUpdateFrequencyInSecs=1",
    "loadBalancerResourceQuotaUpdateIntervalMinutes=1",
)
QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def broker_id(b) -> str:
    return b.web.removeprefix("http://")


class Zk:
    """Reads of the cluster's chroot; a short session per read."""

    def __init__(self, hostport: str, chroot: str) -> None:
        self.host, port = hostport.split(":")
        self.port, self.chroot = int(port), chroot

    def json(self, path: str):
        with ZkClient(self.host, self.port) as zk:
            data = zk.get(self.chroot + path)
        return None if data is None else json.loads(data)


class Traffic:
    """A producer and a consumer on `topic` through `owner`: RATE msg/s each way, on a thread."""

    def __init__(self, owner, topic: str) -> None:
        self.client = pulsar.Client(owner.url, operation_timeout_seconds=30, logger=QUIET)
        self.consumer = self.client.subscribe(topic, "s")
        self.producer = self.client.create_producer(topic, batching_enabled=False)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        start, sent = time.monotonic(), 0
        while not self.stopping.is_set():
            target = int((time.monotonic() - start) * RATE)
            while sent < target:
                self.producer.send_async(b"x" * 100, lambda res, mid: None)
                sent += 1
            while True:
                try:
                    self.consumer.acknowledge(self.consumer.receive(timeout_millis=1))
                except pulsar.Timeout:
                    break
            time.sleep(0.01)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.producer.flush()
        self.producer.close()
        self.consumer.close()
        self.client.close()


def shape(value):
    """The JSON shape of a value: objects by their keys' shapes, lists by their first item's,
    any number as "number" (Jackson reads 1 and 1.0 alike)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, (int, float)) else type(value).__name__


def same_shape(mine: dict, theirs: dict) -> None:
    """Magnetar's and Pulsar's LocalBrokerData: the same fields of the same JSON types, those of
    one bundle of lastStats too (lists may be empty on one side; maps by name left out)."""
    def flat(report: dict) -> dict:
        s = shape(report)
        for k in ("lastStats", "protocols", "advertisedListeners"):
            s.pop(k)
        for k in ("bundles", "lastBundleGains", "lastBundleLosses"):
            s[k] = "list"
        return s
    assert flat(mine) == flat(theirs), (mine, theirs)
    stats = [next(iter(r["lastStats"].values())) for r in (mine, theirs)]
    assert shape(stats[0]) == shape(stats[1]), stats


def wait_for(what: str, timeout: float, check):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"{what} within {timeout} s (last: {last})")


def create_namespace(web: str, ns: str, bundles: int) -> None:
    r = requests.put(f"{web}/admin/v2/namespaces/{ns}",
                     json={"bundles": {"numBundles": bundles}}, timeout=10)
    assert r.status_code == 204, r.text


def owners(via, brokers: list, ns: str, n: int) -> list:
    """Creates ns with n bundles and looks a topic of each up through `via` (HTTP, redirects
    followed to the leader and the broker it picks): the owners, in bundle order."""
    create_namespace(via.web, ns, n)
    bundles = bundles_of(via.web, ns)
    assert len(bundles) == n, bundles
    found = []
    for i in range(n):
        path = topic_in_bundle(ns, bundles, i).replace("://", "/")
        r = requests.get(f"{via.web}/lookup/v2/topic/{path}", timeout=30)
        assert r.status_code == 200, (r.status_code, r.text)
        url = r.json()["brokerUrl"]
        found.append(next(b for b in brokers if b.url == url))
    return found


def unload_to(via, ns: str, index: int, dest, brokers: list, old) -> object:
    """Unloads bundle `index` of ns (owned by `old`) through `via` with destinationBroker=dest
    (redirects followed: to the leader, then to the owner); the owner a lookup through `via`
    names next (once it no longer names `old`: a broker's ownership view may lag)."""
    bundle = bundles_of(via.web, ns)[index]
    r = requests.put(f"{via.web}/admin/v2/namespaces/{ns}/{bundle}/unload",
                     params={"destinationBroker": broker_id(dest)}, timeout=30)
    assert r.status_code == 204, (r.status_code, r.text)
    path = topic_in_bundle(ns, bundles_of(via.web, ns), index).replace("://", "/")
    deadline = time.monotonic() + 10
    while True:
        r = requests.get(f"{via.web}/lookup/v2/topic/{path}", timeout=30)
        assert r.status_code == 200, (r.status_code, r.text)
        owner = next(b for b in brokers if b.url == r.json()["brokerUrl"])
        if owner is not old or time.monotonic() > deadline:
            return owner
        time.sleep(0.1)


def hot_topic(owner, ns: str) -> str:
    """A topic of a new one-bundle namespace, its bundle taken by `owner` (authoritative
    lookup there)."""
    create_namespace(owner.web, ns, 1)
    topic = f"persistent://{ns}/hot"
    r = requests.get(f"{owner.web}/lookup/v2/topic/{topic.replace('://', '/')}",
                     params={"authoritative": "true"}, timeout=30)
    assert r.status_code == 200 and r.json()["brokerUrl"] == owner.url, r.text
    return topic


def names(bs: list) -> list:
    return [broker_id(b) for b in bs]


def test_leaders_of_either_kind_place_by_the_other_kinds_reports(bk_cluster):
    bk_cluster.start_bookies()  # earlier tests kill bookies
    chroot = f"/mixed-lb-{uuid.uuid4().hex[:8]}"
    meta = f"zk:{bk_cluster.zk}{chroot}"
    bk_cluster.init_cluster_metadata(CLUSTER, meta)
    zk = Zk(bk_cluster.zk, chroot)
    base = tempfile.mkdtemp(prefix="magnetar-pulsar-mixed-lb-")
    run = uuid.uuid4().hex[:6]
    mag = MagnetarBroker(base, meta, bk_cluster.uri, CLUSTER, "magnetar-a", LB_SETTINGS)
    pul = PulsarBroker(base, meta, bk_cluster.uri, CLUSTER, PULSAR_SETTINGS)
    started = [mag]
    traffic = None
    try:
        mag.wait_registered()
        pul.start()
        started.append(pul)
        leader = requests.get(f"{pul.web}/admin/v2/brokers/leaderBroker", timeout=10).json()
        assert leader["brokerId"] == broker_id(mag), leader

        # Pulsar's report has every field Magnetar's has, and the reverse.
        mine = wait_for("Magnetar's report", 10, lambda: zk.json(
            f"/loadbalance/brokers/{broker_id(mag)}"))
        theirs = wait_for("Pulsar's report", 10, lambda: zk.json(
            f"/loadbalance/brokers/{broker_id(pul)}"))
        assert set(mine) == set(theirs), (set(mine) ^ set(theirs))

        # 1. The Magnetar leader: P takes bundles when idle, none when loaded.
        pair = [mag, pul]
        idle_owners = owners(pul, pair, f"public/idle-{run}", 8)
        assert pul in idle_owners and mag in idle_owners, names(idle_owners)
        traffic = Traffic(pul, hot_topic(pul, f"public/phot-{run}"))
        theirs = wait_for("P's report with its topic's rate", 30, lambda: (
            r if (r := zk.json(f"/loadbalance/brokers/{broker_id(pul)}"))["msgRateIn"]
            > RATE * 0.6 else None))
        time.sleep(2)  # a few reports sampled by the leader
        busy_owners = owners(pul, pair, f"public/busy-{run}", 8)
        assert pul not in busy_owners, names(busy_owners)
        # Unload with destinationBroker through P: Pulsar sends it to the Magnetar leader, which
        # keeps the destination for the next placement: the loaded P.
        moved = unload_to(pul, f"public/busy-{run}", 0, pul, pair, mag)
        assert moved is pul, broker_id(moved)
        traffic.stop()
        traffic = None

        # 2. The Pulsar leader.
        mag.stop()
        started.remove(mag)
        wait_for("P leading", 30, lambda: requests.get(
            f"{pul.web}/admin/v2/brokers/leaderBroker", timeout=10).json()["brokerId"]
            == broker_id(pul))
        led_at = time.monotonic()
        hot = MagnetarBroker(base, meta, bk_cluster.uri, CLUSTER, "magnetar-hot", LB_SETTINGS)
        started.append(hot)
        idle = MagnetarBroker(base, meta, bk_cluster.uri, CLUSTER, "magnetar-idle", LB_SETTINGS)
        started.append(idle)
        hot.wait_registered()
        idle.wait_registered()
        hot_ns = f"public/mhot-{run}"
        traffic = Traffic(hot, hot_topic(hot, hot_ns))
        mine = wait_for("HOT's report with its topic's rate", 30, lambda: (
            r if (r := zk.json(f"/loadbalance/brokers/{broker_id(hot)}"))["msgRateIn"]
            > RATE * 0.6 else None))
        same_shape(mine, theirs)  # both loaded: a lastStats entry each
        print(f"\nPulsar's report: {json.dumps(theirs)}\nMagnetar's: {json.dumps(mine)}")
        time.sleep(2)
        trio = [pul, hot, idle]
        placed = owners(pul, trio, f"public/pmany-{run}", 16)
        assert hot not in placed, names(placed)
        assert placed.count(idle) >= 3, names(placed)
        # And the reverse: through the Magnetar owner, whose 307 takes the destination to the
        # Pulsar leader; Pulsar's next placement gives the bundle to HOT.
        moved = unload_to(idle, f"public/pmany-{run}", placed.index(idle), hot, trio, idle)
        assert moved is hot, broker_id(moved)

        # Pulsar's leader's aggregation of HOT's report, once its quota task ran.
        def hot_average():
            avg = zk.json(f"/loadbalance/broker-time-average/{broker_id(hot)}")
            return avg if avg and avg["shortTermMsgRateIn"] > RATE * 0.5 else None

        average = wait_for("Pulsar's time average of HOT", 100, hot_average)
        assert average["longTermMsgRateIn"] > RATE * 0.3, average
        # Written by the same task (its writes are concurrent: this one may come a moment later).
        bundle = wait_for("Pulsar's bundle data of HOT's bundle", 10, lambda: zk.json(
            f"/loadbalance/bundle-data/{hot_ns}/0x00000000_0xffffffff"))
        assert bundle["shortTermData"]["msgRateIn"] > RATE * 0.5, bundle
        idle_average = zk.json(f"/loadbalance/broker-time-average/{broker_id(idle)}")
        assert idle_average is not None and idle_average["shortTermMsgRateIn"] < RATE * 0.1
        print(f"\nPulsar started in {pul.took:.0f} s; Magnetar leader: idle {names(idle_owners)}, "
              f"P loaded {names(busy_owners)}; Pulsar leader: {names(placed)}; its time average "
              f"of HOT {time.monotonic() - led_at:.0f} s after it led: {average}")
    finally:
        if traffic:
            traffic.stop()
        for b in started:
            b.stop()
        shutil.rmtree(base, ignore_errors=True)
