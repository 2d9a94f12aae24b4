"""Geo-replication between a Magnetar standalone cluster c1 and the reference Apache Pulsar 4.2.4
standalone cluster c2 (tools/pulsar-reference), each with its own metadata store and the other's
ClusterData (docs/geo-replication.md): a namespace replicated to both carries messages produced
on either side to the other exactly once, in order per producer, with dedup on, batched or not;
nothing comes back. One Pulsar start for the module (its own ports and data directory). Skipped
when Java is missing or the Pulsar jars are absent and cannot be resolved (no Maven)."""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator

import pulsar
import pytest
import requests

from harness.broker import REPO, MagnetarProcess, PulsarReferenceProcess, free_port
from harness.util import eventually

NS = "geo/ns"
COMMON = ["brokerDeduplicationEnabled=true"]
PULSAR_LIB = os.path.join(REPO, "tools", "pulsar-reference", "lib", ".complete")


def pulsar_available() -> str:
    """Why the reference Pulsar cannot run here, or "" when it can."""
    if shutil.which("java") is None:
        return "java not installed (scripts/install-test-deps.sh)"
    if not os.path.exists(PULSAR_LIB) and shutil.which("mvn") is None:
        return "Pulsar jars absent (tools/pulsar-reference/lib) and no mvn to resolve them"
    return ""


pytestmark = pytest.mark.skipif(bool(pulsar_available()), reason=pulsar_available() or "-")


class Side:
    """One cluster: its name, binary and admin URLs, a client factory and admin calls."""

    def __init__(self, name: str, url: str, admin: str) -> None:
        self.name = name
        self.url = url
        self.admin = admin

    def http(self, method: str, path: str, body: object = None) -> requests.Response:
        return requests.request(method, self.admin + path, json=body, timeout=60)

    def client(self) -> pulsar.Client:
        return pulsar.Client(self.url, operation_timeout_seconds=30,
                             logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))

    def stats(self, topic: str) -> dict:
        r = self.http("GET", "/admin/v2/" + topic.replace("://", "/") + "/stats")
        assert r.status_code == 200, r.text
        return r.json()


def configure(side: Side, other: Side) -> None:
    """The other cluster's ClusterData, tenant geo allowed on both, geo/ns replicated to both."""
    r = side.http("PUT", f"/admin/v2/clusters/{other.name}",
                  {"serviceUrl": other.admin, "brokerServiceUrl": other.url})
    assert r.status_code in (200, 204), r.text
    r = side.http("PUT", "/admin/v2/tenants/geo",
                  {"allowedClusters": ["c1", "c2"], "adminRoles": []})
    assert r.status_code == 204, r.text
    r = side.http("PUT", f"/admin/v2/namespaces/{NS}")
    assert r.status_code == 204, r.text
    r = side.http("POST", f"/admin/v2/namespaces/{NS}/replication", ["c1", "c2"])
    assert r.status_code == 200, r.text  # Pulsar 4.2.4 answers 200 with no body
    assert sorted(side.http("GET", f"/admin/v2/namespaces/{NS}/replication").json()) == [
        "c1", "c2"]


@pytest.fixture(scope="module")
def clusters() -> Iterator[tuple[Side, Side]]:
    """(Magnetar c1, Pulsar c2), both configured."""
    mag = MagnetarProcess(["clusterName=c1", *COMMON])
    ref = PulsarReferenceProcess(["clusterName=c2", *COMMON], broker_port=free_port(),
                                 web_port=free_port())
    try:
        mag.start(port=free_port())
        ep = ref.start()
        c1 = Side("c1", f"pulsar://127.0.0.1:{mag.port}", mag.admin_url)
        c2 = Side("c2", ep.service_url, ep.admin_url or "")
        configure(c1, c2)
        configure(c2, c1)
        yield c1, c2
    finally:
        mag.close()
        ref.close()


def fresh_topic() -> str:
    return f"persistent://{NS}/t-{uuid.uuid4().hex[:8]}"


def drain(consumer: pulsar.Consumer, want: int, timeout_s: float = 60.0,
          idle_ms: int = 2000) -> list[str]:
    """Receives (and acks) until `want` arrived and then `idle_ms` passed without another, or
    until timeout_s: everything that came, in arrival order."""
    got: list[str] = []
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            m = consumer.receive(timeout_millis=idle_ms if len(got) >= want else 500)
        except pulsar.Timeout:
            if len(got) >= want:
                break
            continue
        got.append(m.data().decode())
        consumer.acknowledge(m)
    return got


def per_producer(got: list[str], prefix: str) -> list[int]:
    return [int(x.split("-")[1]) for x in got if x.startswith(prefix + "-")]


def test_both_ways_exactly_once_in_order(clusters):
    c1, c2 = clusters
    topic = fresh_topic()
    n = 200
    k1, k2 = c1.client(), c2.client()
    try:
        # The subscriptions exist first; loading the topic starts its replicators.
        s1 = k1.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        s2 = k2.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        # Each side: one batching producer and one not.
        producers = {
            "a1": k1.create_producer(topic, producer_name="a1", batching_enabled=True,
                                     batching_max_messages=10, batching_max_publish_delay_ms=5),
            "b1": k1.create_producer(topic, producer_name="b1", batching_enabled=False),
            "a2": k2.create_producer(topic, producer_name="a2", batching_enabled=True,
                                     batching_max_messages=10, batching_max_publish_delay_ms=5),
            "b2": k2.create_producer(topic, producer_name="b2", batching_enabled=False),
        }
        for i in range(n):
            for name, p in producers.items():
                p.send_async(f"{name}-{i}".encode(), None)
        for p in producers.values():
            p.flush()
        total = len(producers) * n
        for side, s in ((c1, s1), (c2, s2)):
            got = drain(s, total)
            assert len(got) == total, f"{side.name}: {len(got)} messages, {len(set(got))} distinct"
            for name in producers:
                assert per_producer(got, name) == list(range(n)), f"{side.name}: {name}"

        def replicated_out() -> None:
            for side, remote in ((c1, "c2"), (c2, "c1")):
                rep = side.stats(topic)["replication"][remote]
                assert rep["connected"] is True, (side.name, rep)
                assert rep["replicationBacklog"] == 0, (side.name, rep)
        eventually(replicated_out, 30)
        # Nothing arrives later either (no loop back).
        assert drain(s1, 0, timeout_s=3, idle_ms=3000) == []
        assert drain(s2, 0, timeout_s=3, idle_ms=3000) == []
        # The other cluster's replicator is not a publisher: it is the inbound side of its
        # cluster's "replication" entry (Pulsar's topic stats), on both sides.
        for side, remote, mine in ((c1, "c2", ["a1", "b1"]), (c2, "c1", ["a2", "b2"])):
            st = side.stats(topic)
            assert sorted(p["producerName"] for p in st["publishers"]) == mine, st["publishers"]
            assert st["replication"][remote].get("inboundConnection"), st["replication"]
            assert st["replication"][remote].get("inboundConnectedSince"), st["replication"]
    finally:
        k1.close()
        k2.close()


def others(side: Side) -> str:
    return "c2" if side.name == "c1" else "c1"


def answer(r: requests.Response, side: Side) -> tuple[int, str]:
    """(status, body) with the side's cluster names made LOCAL / OTHER, for comparing sides."""
    text = r.text
    try:
        body = r.json()
        text = body.get("reason", text) if isinstance(body, dict) else text
    except ValueError:
        pass
    if r.status_code == 400:
        text = ""  # Jackson's message vs Magnetar's own
    names = {side.name: "LOCAL", others(side): "OTHER"}
    if r.status_code != 400 and isinstance(body := (r.json() if r.text.startswith("[") else None),
                                           list):
        return r.status_code, json.dumps(sorted(names.get(c, c) for c in body))
    for name, alias in names.items():
        text = text.replace(f"[{name}]", f"[{alias}]").replace(f'"{name}"', f'"{alias}"')
    return r.status_code, text


def topic_replication_answers(side: Side, suffix: str) -> list[tuple[int, str]]:
    """The answers of the topic-level replication routes on one side, for a fresh topic name."""
    local, other = side.name, others(side)
    base = f"/admin/v2/persistent/{NS}"
    out = []
    # Names of this side's own (the other side gets the topics this one replicates), made
    # alike for the comparison.
    suffix = f"{suffix}-{local}"

    def call(method: str, path: str, body: object = None) -> requests.Response:
        r = side.http(method, path, body)
        status, text = answer(r, side)
        out.append((status, text.replace(suffix, "SUFFIX")))
        return r

    missing = call("POST", f"{base}/nope-{suffix}/replication", [local, other])
    assert missing.status_code == 404, missing.text
    assert missing.json()["reason"] == f"Topic persistent://{NS}/nope-{suffix} not found"
    call("GET", f"{base}/nope-{suffix}/replication")
    topic = f"{base}/tl-{suffix}"
    assert side.http("PUT", topic).status_code == 204
    r = call("GET", f"{topic}/replication")
    assert (r.status_code, r.text) == (200, ""), "unset: 200 with no body"
    r = call("GET", f"{topic}/replication?applied=true")
    assert sorted(r.json()) == ["c1", "c2"], r.text
    r = call("POST", f"{topic}/replication", [])
    assert answer(r, side) == (412, "ClusterIds should not be null or empty")
    for body in ([other], ["global"], [other, "nowhere"]):
        r = call("POST", f"{topic}/replication", body)
        assert answer(r, side) == (412, "Can not remove local cluster from the local topic-level "
                                        "replication clusters policy"), (body, r.text)
    assert call("POST", f"{topic}/replication", local).status_code == 400
    for body in ([local, "nowhere"], [local, "global"]):
        assert call("POST", f"{topic}/replication", body).status_code in (403, 412)
    r = call("POST", f"{topic}/replication", [local])
    assert r.status_code == 204, r.text
    assert call("GET", f"{topic}/replication").json() == [local]
    assert call("GET", f"{topic}/replication?applied=true").json() == [local]
    assert call("DELETE", f"{topic}/replication").status_code == 204
    r = call("GET", f"{topic}/replication")
    assert (r.status_code, r.text) == (200, "")
    assert sorted(call("GET", f"{topic}/replication?applied=true").json()) == ["c1", "c2"]
    # A tenant that may use the local cluster only.
    tenant = f"solo{suffix}"
    assert side.http("PUT", f"/admin/v2/tenants/{tenant}",
                     {"allowedClusters": [local], "adminRoles": []}).status_code == 204
    assert side.http("PUT", f"/admin/v2/namespaces/{tenant}/ns").status_code == 204
    assert side.http("PUT", f"/admin/v2/persistent/{tenant}/ns/x").status_code == 204
    r = call("POST", f"/admin/v2/persistent/{tenant}/ns/x/replication", [local, other])
    assert answer(r, side) == (
        403, f"Cluster [OTHER] is not in the list of allowed clusters list for tenant [{tenant}]")
    return out


def test_topic_replication_routes_as_pulsar(clusters):
    """`topics set-replication-clusters / get / remove` answer on Magnetar as on Pulsar."""
    c1, c2 = clusters
    suffix = uuid.uuid4().hex[:6]
    mine, pulsars = topic_replication_answers(c1, suffix), topic_replication_answers(c2, suffix)
    assert [(i, a, b) for i, (a, b) in enumerate(zip(mine, pulsars)) if a != b] == []


def internal_cursors(side: Side, topic: str) -> list[str]:
    r = side.http("GET", "/admin/v2/" + topic.replace("://", "/") + "/internalStats")
    assert r.status_code == 200, r.text
    return sorted(r.json()["cursors"])


def restrict_and_restore(side: Side, other: Side) -> None:
    topic = fresh_topic()
    ks, ko = side.client(), other.client()
    try:
        s_side = ks.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        s_other = ko.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        p_side = ks.create_producer(topic, producer_name=f"p-{side.name}")
        p_other = ko.create_producer(topic, producer_name=f"p-{other.name}")
        p_side.send(b"x-0")
        assert drain(s_other, 1) == ["x-0"], "replicated while the namespace's list applies"
        assert drain(s_side, 1) == ["x-0"]
        path = "/admin/v2/" + topic.replace("://", "/") + "/replication"
        assert side.http("POST", path, [side.name]).status_code == 204

        def stopped() -> None:
            # No replicator: an entry stays only for the inbound side (Pulsar's stats).
            rep = side.stats(topic)["replication"].get(other.name, {})
            assert rep.get("connected") is not True and not rep.get("outboundConnection"), rep
            assert f"pulsar.repl.{other.name}" not in internal_cursors(side, topic)
        eventually(stopped, 30)
        p_side.send(b"x-1")
        p_other.send(b"y-1")
        assert sorted(drain(s_side, 2)) == ["x-1", "y-1"], "the other side still replicates"
        assert drain(s_other, 1, timeout_s=5, idle_ms=3000) == ["y-1"], "x-1 stays local"
        assert side.http("DELETE", path).status_code == 204
        def restarted() -> None:
            assert side.stats(topic)["replication"][other.name]["connected"] is True
        eventually(restarted, 30)
        p_side.send(b"x-2")
        assert drain(s_other, 1) == ["x-2"], "replicated again once the policy is gone"
    finally:
        ks.close()
        ko.close()


def test_topic_level_clusters_drive_the_replicators(clusters):
    """A topic-level list without the other cluster stops the topic's replicator (its cursor
    deleted) while the other side still replicates to it; removing the policy brings the
    namespace's list back. Each side in turn as the one that restricts."""
    for side, other in (clusters, clusters[::-1]):
        restrict_and_restore(side, other)


def partitioned_created_remotely(side: Side, other: Side) -> None:
    topic = fresh_topic()
    path = "/admin/v2/" + topic.replace("://", "/") + "/partitions"
    assert side.http("PUT", path, 3).status_code == 204

    def created() -> None:
        r = other.http("GET", path)
        assert r.status_code == 200 and r.json()["partitions"] == 3, r.text
    eventually(created, 30)
    ks, ko = side.client(), other.client()
    try:
        subs = [ko.subscribe(f"{topic}-partition-{i}", "sub",
                             initial_position=pulsar.InitialPosition.Earliest)
                for i in range(3)]
        producers = [ks.create_producer(f"{topic}-partition-{i}", producer_name=f"pp{i}")
                     for i in range(3)]
        for i, p in enumerate(producers):
            for j in range(5):
                p.send(f"p{i}-{j}".encode())
        for i, sub in enumerate(subs):
            assert drain(sub, 5) == [f"p{i}-{j}" for j in range(5)], f"partition {i}"
        # More partitions here: the other cluster's partitioned topic is updated too (Pulsar's
        # updatePartitionInOtherCluster, updateLocalTopicOnly=true there), and a new
        # partition's messages arrive (found by a breaker: the new partitions' replicators
        # stayed disconnected).
        assert side.http("POST", path, 5).status_code == 204

        def updated() -> None:
            r = other.http("GET", path)
            assert r.status_code == 200 and r.json()["partitions"] == 5, r.text
        eventually(updated, 30)
        sub4 = ko.subscribe(f"{topic}-partition-4", "sub",
                            initial_position=pulsar.InitialPosition.Earliest)
        p4 = ks.create_producer(f"{topic}-partition-4", producer_name="pp4")
        for j in range(5):
            p4.send(f"p4-{j}".encode())
        assert drain(sub4, 5) == [f"p4-{j}" for j in range(5)], "partition 4"
    finally:
        ks.close()
        ko.close()


def test_partitioned_topic_created_on_the_remote(clusters):
    """A partitioned topic created on one side exists on the other with the same partitions
    (Pulsar's createTopicToRemoteClusterForReplication), and each partition's messages arrive in
    the same partition there."""
    for side, other in (clusters, clusters[::-1]):
        partitioned_created_remotely(side, other)


def delete_refused_then_forced(side: Side, other: Side) -> None:
    topic = fresh_topic()
    admin = "/admin/v2/" + topic.replace("://", "/")
    k = side.client()
    try:
        p = k.create_producer(topic)
        p.send(b"m")
        p.close()
    finally:
        k.close()
    eventually(lambda: side.stats(topic)["replication"][other.name], 30)
    eventually(lambda: other.stats(topic), 30)
    # A subscription there keeps the other side's copy from inactive-topic deletion.
    ko = other.client()
    try:
        ko.subscribe(topic, "keep").close()
    finally:
        ko.close()
    r = side.http("DELETE", admin)
    assert answer(r, side) == (422, "Delete forbidden topic is replicated on clusters [OTHER]")
    r = side.http("DELETE", admin + "?force=true")
    assert r.status_code == 204, r.text
    assert other.http("GET", admin + "/stats").status_code == 200, "kept on the other side"
    # A partitioned topic whose partitions are loaded.
    ptopic = fresh_topic()
    padmin = "/admin/v2/" + ptopic.replace("://", "/")
    assert side.http("PUT", padmin + "/partitions", 2).status_code == 204

    def created() -> None:
        r = other.http("GET", padmin + "/partitions")
        assert r.status_code == 200 and r.json()["partitions"] == 2, r.text
    eventually(created, 30)
    k = side.client()
    try:
        for i in range(2):
            k.create_producer(f"{ptopic}-partition-{i}").send(b"m")
    finally:
        k.close()
    eventually(lambda: side.stats(f"{ptopic}-partition-1")["replication"][other.name], 30)
    r = side.http("DELETE", padmin + "/partitions")
    assert answer(r, side) == (422, "Delete forbidden topic is replicated on clusters [OTHER]")
    r = side.http("DELETE", padmin + "/partitions?force=true")
    assert r.status_code == 204, r.text
    assert side.http("GET", padmin + "/partitions").status_code == 404
    created()  # kept on the other side


def test_delete_of_a_replicated_topic(clusters):
    """Deleting a loaded topic that replicates is refused (422) unless forced; a forced delete
    is local: the other cluster keeps its topic. The same for a partitioned topic."""
    for side, other in (clusters, clusters[::-1]):
        delete_refused_then_forced(side, other)

