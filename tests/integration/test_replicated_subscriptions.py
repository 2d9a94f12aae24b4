"""Replicated subscriptions between two standalone Magnetar brokers, clusters c1 and c2, each
with its own metadata store, replicating geo/ns (docs/geo-replication.md): a consumer that
subscribed with replicate_subscription_state on c1 acknowledges part of the messages; a consumer
of the same subscription on c2 then resumes at most one snapshot interval before the first
unacknowledged message, and gets everything from there. The snapshot markers are never
delivered to a consumer; the subscription stays replicated across a restart of c1. The official
Python client on both sides."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pulsar
import pytest
import requests

from harness.broker import MagnetarProcess, free_port
from harness.util import eventually

NS = "geo/ns"
SNAPSHOT_MS = 200
SEND_GAP_S = 0.02  # 10 messages per snapshot interval
# The snapshot granularity the tests allow: messages produced during about two snapshot
# intervals plus the markers' round trip (Pulsar resumes at the last snapshot the acknowledged
# position passed).
MAX_GAP = 30
SETTINGS = ["brokerDeduplicationEnabled=true", "journalSyncData=true",
            f"replicatedSubscriptionsSnapshotFrequencyMillis={SNAPSHOT_MS}"]


class Side:
    def __init__(self, name: str, port: int) -> None:
        self.name = name
        self.port = port
        self.proc = MagnetarProcess([f"clusterName={name}", *SETTINGS])
        self.proc.start(port=port)

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    def http(self, method: str, path: str, body: object = None) -> requests.Response:
        return requests.request(method, self.proc.admin_url + path, json=body, timeout=30)

    def client(self) -> pulsar.Client:
        return pulsar.Client(self.url, operation_timeout_seconds=30,
                             logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))

    def sub_stats(self, topic: str, sub: str) -> dict:
        r = self.http("GET", "/admin/v2/" + topic.replace("://", "/") + "/stats")
        assert r.status_code == 200, r.text
        return r.json()["subscriptions"][sub]


def configure(side: Side, other: Side) -> None:
    r = side.http("PUT", f"/admin/v2/clusters/{other.name}",
                  {"serviceUrl": other.proc.admin_url, "brokerServiceUrl": other.url})
    assert r.status_code in (200, 204), r.text
    r = side.http("PUT", "/admin/v2/tenants/geo",
                  {"allowedClusters": ["c1", "c2"], "adminRoles": []})
    assert r.status_code == 204, r.text
    assert side.http("PUT", f"/admin/v2/namespaces/{NS}").status_code == 204
    r = side.http("POST", f"/admin/v2/namespaces/{NS}/replication", ["c1", "c2"])
    assert r.status_code == 200, r.text  # Pulsar 4.2.4 answers 200 with no body


@pytest.fixture
def clusters() -> Iterator[tuple[Side, Side]]:
    c1 = Side("c1", free_port())
    c2 = Side("c2", free_port())
    try:
        configure(c1, c2)
        configure(c2, c1)
        yield c1, c2
    finally:
        c1.proc.close()
        c2.proc.close()


def subscribe(client: pulsar.Client, topic: str, sub: str = "rsub",
              replicated: bool = True) -> pulsar.Consumer:
    return client.subscribe(topic, sub, initial_position=pulsar.InitialPosition.Earliest,
                            replicate_subscription_state_enabled=replicated)


def produce_slowly(producer: pulsar.Producer, first: int, last: int) -> None:
    """Messages m-first .. m-(last-1), spread over several snapshot intervals."""
    for i in range(first, last):
        producer.send(f"m-{i}".encode())
        time.sleep(SEND_GAP_S)


def receive_all(consumer: pulsar.Consumer, idle_ms: int = 3000) -> list[str]:
    """Everything that arrives until idle_ms passes without a message, acked."""
    got: list[str] = []
    while True:
        try:
            m = consumer.receive(timeout_millis=idle_ms)
        except pulsar.Timeout:
            return got
        got.append(m.data().decode())
        consumer.acknowledge(m)


def consume_and_ack(consumer: pulsar.Consumer, n: int) -> list[str]:
    got = []
    for _ in range(n):
        m = consumer.receive(timeout_millis=10000)
        got.append(m.data().decode())
        consumer.acknowledge(m)
    return got


def wait_replicating(c1: Side, c2: Side, topic: str) -> None:
    def connected() -> None:
        for side, remote in ((c1, "c2"), (c2, "c1")):
            r = side.http("GET", "/admin/v2/" + topic.replace("://", "/") + "/stats")
            assert r.json()["replication"][remote]["connected"] is True
    eventually(connected, 30)


def check_resumes(c2: Side, topic: str, acked: int, total: int) -> None:
    """A consumer of rsub on c2 starts within MAX_GAP before m-acked and gets the rest once."""
    k2 = c2.client()
    try:
        got = receive_all(subscribe(k2, topic))
    finally:
        k2.close()
    assert got, "nothing left for the subscription on c2"
    idx = [int(x.split("-")[1]) for x in got]
    assert all(x.startswith("m-") for x in got), f"a marker was delivered: {got[:5]}"
    first = idx[0]
    assert first <= acked, f"c2 skipped unacknowledged messages: starts at {first}"
    assert first >= acked - MAX_GAP, (
        f"c2 starts at {first}: {acked - first} acknowledged messages again, over {MAX_GAP}")
    assert idx == list(range(first, total)), "the rest once, in order"


def test_subscription_is_created_on_the_other_cluster(clusters):
    """c2 has no subscription: the first snapshot request from c1 starts c2's controller (as
    Pulsar's receivedReplicatedSubscriptionMarker), and the update marker creates the
    subscription there, replicated, at the acknowledged position (found by a breaker: the
    consumer moved to c2 got nothing of the unacknowledged half)."""
    c1, c2 = clusters
    topic = f"persistent://{NS}/rs-new-{uuid.uuid4().hex[:8]}"
    total, acked = 100, 50
    k1 = c1.client()
    try:
        s1 = subscribe(k1, topic)
        producer = k1.create_producer(topic)
        wait_replicating(c1, c2, topic)
        r = c2.http("GET", "/admin/v2/" + topic.replace("://", "/") + "/stats")
        assert "rsub" not in r.json()["subscriptions"], "c2 has no subscription yet"
        produce_slowly(producer, 0, total)
        assert consume_and_ack(s1, acked) == [f"m-{i}" for i in range(acked)]
        s1.close()
    finally:
        k1.close()
    def created() -> None:
        r = c2.http("GET", "/admin/v2/" + topic.replace("://", "/") + "/stats")
        assert r.json()["subscriptions"].get("rsub", {}).get("isReplicated") is True
    eventually(created, 30)
    time.sleep(3 * SNAPSHOT_MS / 1000 + 2)
    check_resumes(c2, topic, acked, total)


def test_consumer_moves_to_the_other_cluster(clusters):
    c1, c2 = clusters
    topic = f"persistent://{NS}/rs-{uuid.uuid4().hex[:8]}"
    total, acked = 100, 50
    k1, k2 = c1.client(), c2.client()
    try:
        # The subscription exists on both sides first, replicated (as Pulsar's tests make it);
        # a plain subscription on c2 sees every message and no marker.
        subscribe(k2, topic).close()
        plain = subscribe(k2, topic, "plain", replicated=False)
        s1 = subscribe(k1, topic)
        wait_replicating(c1, c2, topic)
        assert c1.sub_stats(topic, "rsub")["isReplicated"] is True
        assert c2.sub_stats(topic, "rsub")["isReplicated"] is True
        assert c2.sub_stats(topic, "plain")["isReplicated"] is False
        produce_slowly(k1.create_producer(topic), 0, total)
        assert consume_and_ack(s1, acked) == [f"m-{i}" for i in range(acked)]
        s1.close()
        got_plain = receive_all(plain)
        assert got_plain == [f"m-{i}" for i in range(total)], "markers never reach consumers"
    finally:
        k1.close()
        k2.close()
    time.sleep(3 * SNAPSHOT_MS / 1000 + 2)  # the last snapshot and its update cross over
    check_resumes(c2, topic, acked, total)
    # pulsar-admin topics set-replicated-subscription-status, both ways.
    path = ("/admin/v2/" + topic.replace("://", "/")
            + "/subscription/{}/replicatedSubscriptionStatus")
    assert c2.http("POST", path.format("plain"), True).status_code == 204
    assert c2.sub_stats(topic, "plain")["isReplicated"] is True
    assert c2.http("POST", path.format("plain"), False).status_code == 204
    assert c2.sub_stats(topic, "plain")["isReplicated"] is False
    assert c2.http("POST", path.format("nope"), True).status_code == 404
    assert c2.http("POST", path.format("plain"), {"x": 1}).status_code == 400


def test_replicated_state_survives_a_restart(clusters):
    c1, c2 = clusters
    topic = f"persistent://{NS}/rs-{uuid.uuid4().hex[:8]}"
    k2 = c2.client()
    subscribe(k2, topic).close()
    k2.close()
    k1 = c1.client()
    s1 = subscribe(k1, topic)
    wait_replicating(c1, c2, topic)
    p1 = k1.create_producer(topic, producer_name="p1")
    produce_slowly(p1, 0, 40)
    consume_and_ack(s1, 40)
    k1.close()
    c1.proc.stop()
    c1.proc.start(port=c1.port)
    # The flag is the cursor's stored property: the topic reloads replicated.
    assert c1.sub_stats(topic, "rsub")["isReplicated"] is True
    k1 = c1.client()
    try:
        s1 = subscribe(k1, topic, replicated=False)  # does not unset it (Pulsar's rule)
        wait_replicating(c1, c2, topic)
        produce_slowly(k1.create_producer(topic, producer_name="p1"), 40, 100)
        assert consume_and_ack(s1, 30) == [f"m-{i}" for i in range(40, 70)]
        assert c1.sub_stats(topic, "rsub")["isReplicated"] is True
    finally:
        k1.close()
    time.sleep(3 * SNAPSHOT_MS / 1000 + 2)
    check_resumes(c2, topic, 70, 100)
