"""Geo-replication with one side in cluster mode on BookKeeper (issue 50's done-when): cluster
geo-a is 2 `magnetar broker` processes on this directory's ZooKeeper and bookies, cluster geo-b a
`magnetar standalone`; namespace geo/ns is replicated to both, deduplication on both. A producer
on each side (official Python client, no send timeout) sends while the topic's owner in geo-a is
killed (-9) and restarted, then geo-b's broker is killed (-9) and restarted. Afterwards every
message either side acknowledged is on both sides exactly once, in order per producer, as the
chaos suite's checker (tests/chaos/checker.py) checks the stored messages.

geo-b's ClusterData on geo-a names geo-b's broker; geo-a's on geo-b lists both geo-a brokers
(pulsar://h:p1,h:p2): geo-b's replicator looks the topic up there and produces on its owner.

The long form: MAGNETAR_GEO_BK_ROUNDS=N (default 1) rounds of both kills, e.g.
`MAGNETAR_GEO_BK_ROUNDS=5 .venv/bin/python -m pytest -s
tests/bookkeeper/test_geo_replication_bk.py`.
Figures are printed (pytest -s)."""

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
from test_failover import QUIET, Broker, Cluster

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chaos"))
from checker import Send, check  # noqa: E402

from harness.broker import MagnetarProcess, free_port  # noqa: E402
from harness.util import eventually  # noqa: E402

ROUNDS = int(os.environ.get("MAGNETAR_GEO_BK_ROUNDS", "1"))
RATE = 200  # messages per second per producer
NS = "geo/ns"
A, B = "geo-a", "geo-b"


class Side:
    """One cluster as the test sees it: its admin URL(s), service URL and a kill/restart."""

    def __init__(self, name: str, admin: list[str], service_url: str) -> None:
        self.name = name
        self.admins = admin
        self.service_url = service_url

    def http(self, method: str, path: str, body: object = None) -> requests.Response:
        last = None
        for admin in self.admins:  # the first live broker answers
            try:
                return requests.request(method, admin + path, json=body, timeout=30)
            except requests.RequestException as e:
                last = e
        raise AssertionError(f"no broker of {self.name} answered: {last}")


def configure(side: Side, other: str, other_url: str, other_admin: str) -> None:
    steps = [("PUT", f"/admin/v2/clusters/{other}",
              {"serviceUrl": other_admin, "brokerServiceUrl": other_url}, (200, 204)),
             ("PUT", "/admin/v2/tenants/geo", {"allowedClusters": [A, B], "adminRoles": []},
              (204, 409)),
             ("PUT", f"/admin/v2/namespaces/{NS}", None, (204, 409)),
             ("POST", f"/admin/v2/namespaces/{NS}/replication", [A, B], (200,))]
    for method, path, body, ok in steps:
        eventually(lambda m=method, p=path, b=body, o=ok: ok_answer(side.http(m, p, b), o), 30)


def ok_answer(r: requests.Response, ok: tuple[int, ...]) -> requests.Response:
    assert r.status_code in ok, f"{r.request.method} {r.url}: {r.status_code} {r.text}"
    return r


class Producer:
    """A producer named `name` on `side` sending "<name>:<i>" at RATE per second from a thread;
    every send is recorded for the checker (result and message id when answered)."""

    def __init__(self, service_url: str, topic: str, name: str) -> None:
        self.topic, self.name = topic, name
        self.client = pulsar.Client(service_url, operation_timeout_seconds=60, logger=QUIET)
        self.producer = self.client.create_producer(
            topic, producer_name=name, batching_enabled=False, send_timeout_millis=0,
            max_pending_messages=5000, block_if_queue_full=True)
        self.lock = threading.Lock()
        self.sends: dict[tuple[str, str, int], Send] = {}
        self.receipts: list[float] = []
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        next_at = time.monotonic()
        while self.running:
            ident = (self.topic, self.name, i)
            with self.lock:
                self.sends[ident] = Send(key="", sent_at=time.monotonic())

            def done(res, msg_id, ident=ident):
                with self.lock:
                    s = self.sends[ident]
                    s.result = "Ok" if res == pulsar.Result.Ok else str(res)
                    s.answered_at = time.monotonic()
                    if res == pulsar.Result.Ok:
                        self.receipts.append(s.answered_at)

            self.producer.send_async(f"{self.name}:{i}".encode(), done)
            i += 1
            next_at += 1.0 / RATE
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def acked(self) -> int:
        with self.lock:
            return len(self.receipts)

    def wait_more(self, n: int, timeout: float) -> float:
        """Until n more receipts came: the seconds it took."""
        t0 = time.monotonic()
        want = self.acked() + n
        while self.acked() < want:
            assert time.monotonic() - t0 < timeout, f"{self.name}: {self.acked()} of {want}"
            time.sleep(0.02)
        return time.monotonic() - t0

    def stop(self) -> None:
        self.running = False
        self.thread.join()
        self.producer.flush()
        self.producer.close()
        self.client.close()


def stored(service_url: str, topic: str, want: int) -> list[tuple[str, int, str]]:
    """The topic's messages in order through the "check" subscription (created before any send,
    so it holds everything): (producer, seq, key) each, until `want` came and 5 s passed idle."""
    client = pulsar.Client(service_url, operation_timeout_seconds=60, logger=QUIET)
    out = []
    try:
        consumer = client.subscribe(topic, "check")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                m = consumer.receive(timeout_millis=5000 if len(out) >= want else 1000)
            except pulsar.Timeout:
                if len(out) >= want:
                    break
                continue
            name, seq = m.data().decode().split(":")
            out.append((name, int(seq), ""))
            consumer.acknowledge(m)
    finally:
        client.close()
    return out


def replicated(side: Side, topic: str, remote: str, timeout: float) -> dict:
    """Until the topic's replicator to `remote` is connected with no backlog: its stats."""
    deadline = time.monotonic() + timeout
    rep: object = None
    while time.monotonic() < deadline:
        try:
            r = side.http("GET", "/admin/v2/" + topic.replace("://", "/") + "/stats")
            if r.status_code == 200:
                rep = r.json()["replication"].get(remote)
                if rep and rep["connected"] and rep["replicationBacklog"] == 0:
                    return rep
        except (AssertionError, ValueError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"{side.name} -> {remote} not drained: {rep}")


@pytest.fixture(scope="module")
def geo_a(bk_cluster):
    # Its own metadata store (a ZooKeeper chroot): the other modules' cluster "bk-topics" keeps
    # public/default and pulsar/system of the shared root; the ledgers share the bookies.
    meta = f"zk:{bk_cluster.zk}/geo-a-{uuid.uuid4().hex[:8]}"
    bk_cluster.start_bookies()  # earlier tests kill bookies
    bk_cluster.init_cluster_metadata(A, meta)
    base = tempfile.mkdtemp(prefix="magnetar-bk-geo-")
    brokers = []
    try:
        for i in range(2):
            b = Broker(base, i, bk_cluster.uri, extra=(f"clusterName={A}",
                                                       f"metadataStoreUrl={meta}"))
            brokers.append(b)
            b.start()
        for b in brokers:
            b.wait_registered()
        yield Cluster(bk_cluster, brokers)
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_both_ways_with_owner_and_standalone_killed(geo_a):
    b_port, b_web = free_port(), free_port()  # kept across its restarts
    b = MagnetarProcess([f"clusterName={B}", "brokerDeduplicationEnabled=true",
                         "journalSyncData=true", f"webServicePort={b_web}"])
    b.start(port=b_port)
    producers: list[Producer] = []
    try:
        b_url = f"pulsar://127.0.0.1:{b_port}"
        side_a = Side(A, [x.web for x in geo_a.brokers], geo_a.service_url)
        side_b = Side(B, [b.admin_url], b_url)
        configure(side_a, B, b_url, b.admin_url)
        configure(side_b, A, geo_a.service_url, geo_a.brokers[0].web)
        topic = f"persistent://{NS}/bk-{uuid.uuid4().hex[:8]}"
        for side in (side_a, side_b):  # subscriptions that keep everything; replicators start
            c = pulsar.Client(side.service_url, operation_timeout_seconds=60, logger=QUIET)
            c.subscribe(topic, "check").close()
            c.close()
        pa = Producer(side_a.service_url, topic, "pa")
        producers.append(pa)
        pb = Producer(b_url, topic, "pb")
        producers.append(pb)
        figures = []
        for _ in range(ROUNDS):
            pa.wait_more(400, 60)
            owner = geo_a.owner(topic)
            owner.kill()
            resumed_a = pa.wait_more(50, 60)
            owner.start()
            owner.wait_registered()
            pb.wait_more(400, 60)
            b.kill()
            time.sleep(1)
            b.start(port=b_port)
            resumed_b = pb.wait_more(50, 60)
            figures.append((resumed_a, resumed_b))
        pa.wait_more(200, 60)
        for p in producers:
            p.stop()
        replicated(side_a, topic, B, 120)
        rep = replicated(side_b, topic, A, 120)
        # geo-b's producer is on the owner its lookup found, not just any geo-a broker.
        assert rep["outboundConnection"] == geo_a.owner(topic).url, rep
        sends = {**pa.sends, **pb.sends}
        receipted = sum(1 for s in sends.values() if s.result == "Ok")
        for side in (side_a, side_b):
            got = stored(side.service_url, topic, receipted)
            report = check(sends, {topic: got}, [], [], {topic}, set(), [])
            assert report.violations({topic}) == [], (side.name, report.violations({topic}))
            assert report.failed == {}, report.failed
            # Nothing stored that no producer sent.
            assert {(p, q) for p, q, _ in got} <= {(p, q) for (_t, p, q) in sends}
        print(f"\ngeo-replication {A} (2 brokers on BookKeeper) <-> {B} (standalone), "
              f"{ROUNDS} round(s) of kill -9 of {A}'s owner and of {B}: {receipted} messages "
              f"acknowledged, each on both sides once, in order per producer; receipts resumed "
              f"after the kills (s): {[(round(x, 2), round(y, 2)) for x, y in figures]}")
    finally:
        for p in producers:
            p.running = False
        b.close()
