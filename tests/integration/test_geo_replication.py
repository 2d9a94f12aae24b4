"""Geo-replication between two standalone Magnetar brokers, clusters c1 and c2, each with its own
metadata store and both clusters' ClusterData (docs/geo-replication.md): a namespace replicated
to both carries messages produced on either side to the other exactly once, in order per
producer, with dedup on; nothing comes back; a remote broker down for a while gets its backlog
when it is back, nothing lost or duplicated. The official Python client on both sides."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pulsar
import pytest
import requests

from harness.auth import (
    CLIENT_TOKEN_PLUGIN,
    SUPER_USER,
    new_secret_key,
    role_token,
    token_auth_settings,
)
from harness.broker import MagnetarProcess, free_port
from harness.tls import tls_certs, tls_settings  # noqa: F401 (fixture)
from harness.util import eventually

NS = "geo/ns"
SETTINGS = ["brokerDeduplicationEnabled=true", "journalSyncData=true"]


class Side:
    def __init__(self, name: str, port: int, extra: tuple[str, ...] = ()) -> None:
        self.name = name
        self.port = port
        self.proc = MagnetarProcess([f"clusterName={name}", *SETTINGS, *extra])
        self.proc.start(port=port)

    @property
    def admin(self) -> str:
        return self.proc.admin_url

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    def http(self, method: str, path: str, body: object = None) -> requests.Response:
        return requests.request(method, self.admin + path, json=body, timeout=30)

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
    assert r.status_code == 200, r.text  # as Pulsar 4.2.4: 200, no body
    assert sorted(side.http("GET", f"/admin/v2/namespaces/{NS}/replication").json()) == [
        "c1", "c2"]


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


def test_set_clusters_validation(clusters):
    c1, _ = clusters
    path = f"/admin/v2/namespaces/{NS}/replication"
    assert c1.http("POST", path, []).status_code == 412
    assert c1.http("POST", path, ["global"]).status_code == 412
    r = c1.http("POST", path, ["c1", "nowhere"])
    assert r.status_code == 403 and "Invalid cluster id: nowhere" in r.text
    # A tenant that may not use c2.
    assert c1.http("PUT", "/admin/v2/tenants/solo",
                   {"allowedClusters": ["c1"], "adminRoles": []}).status_code == 204
    assert c1.http("PUT", "/admin/v2/namespaces/solo/ns").status_code == 204
    r = c1.http("POST", "/admin/v2/namespaces/solo/ns/replication", ["c1", "c2"])
    assert r.status_code == 403 and "not in the list of allowed clusters" in r.text
    assert c1.http("GET", "/admin/v2/namespaces/solo/ns/replication").json() == ["c1"]
    # The list of geo/ns is unchanged by the refused calls.
    assert sorted(c1.http("GET", path).json()) == ["c1", "c2"]


def test_both_ways_exactly_once_in_order(clusters):
    c1, c2 = clusters
    topic = fresh_topic()
    n = 300
    k1, k2 = c1.client(), c2.client()
    try:
        # The subscriptions exist first; loading the topic starts its replicators.
        s1 = k1.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        s2 = k2.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        p1 = k1.create_producer(topic, producer_name="p1", batching_enabled=True,
                                batching_max_messages=10, batching_max_publish_delay_ms=5)
        p2 = k2.create_producer(topic, producer_name="p2", batching_enabled=False)
        for i in range(n):
            p1.send_async(f"p1-{i}".encode(), None)
            p2.send_async(f"p2-{i}".encode(), None)
        p1.flush()
        p2.flush()
        got1 = drain(s1, 2 * n)
        got2 = drain(s2, 2 * n)
        for got in (got1, got2):
            assert len(got) == 2 * n, f"{len(got)} messages, {len(set(got))} distinct"
            assert per_producer(got, "p1") == list(range(n))
            assert per_producer(got, "p2") == list(range(n))

        def replicated_out() -> None:
            for side, remote in ((c1, "c2"), (c2, "c1")):
                st = side.stats(topic)
                rep = st["replication"][remote]
                assert rep["connected"] is True, rep
                assert rep["replicationBacklog"] == 0, rep
                # Only the side's own producer's entries go out: none comes back to be resent.
                assert rep["msgOutCount"] == n, rep
                # The producer is on the broker the remote's lookup names (its advertised
                # address, localhost in standalone).
                other = c2 if remote == "c2" else c1
                assert rep["outboundConnection"] == f"pulsar://localhost:{other.port}", rep
                assert list(st["subscriptions"]) == ["sub"], "the replication cursor is hidden"
        eventually(replicated_out, 30)
        # Nothing arrives later either (no loop back).
        assert drain(s1, 0, timeout_s=3, idle_ms=3000) == []
        assert drain(s2, 0, timeout_s=3, idle_ms=3000) == []
        # c2 taken off c1's list: the replicator stops (and its cursor goes).
        r = c1.http("POST", f"/admin/v2/namespaces/{NS}/replication", ["c1"])
        assert r.status_code == 200, r.text

        def removed() -> None:
            # c2 still replicates here: its entry stays for the inbound side only (as Pulsar).
            rep = c1.stats(topic)["replication"]
            assert list(rep) == ["c2"] and rep["c2"]["connected"] is False, rep
            assert "outboundConnection" not in rep["c2"] and rep["c2"]["inboundConnection"], rep
        eventually(removed, 15)
        p1.send(b"local-only")
        assert drain(s1, 1) == ["local-only"]
        assert drain(s2, 0, timeout_s=3, idle_ms=3000) == [], "not replicated any more"
    finally:
        k1.close()
        k2.close()


def test_remote_down_then_back(clusters):
    c1, c2 = clusters
    topic = fresh_topic()
    n = 200
    k1 = c1.client()
    clients = [k1]
    try:
        k2 = c2.client()
        k2.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest).close()
        k2.close()
        s1 = k1.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        p1 = k1.create_producer(topic, producer_name="p1", batching_enabled=False)
        for i in range(n // 2):
            p1.send(f"p1-{i}".encode())
        c2.proc.kill()  # SIGKILL, in the middle of the replication or just after it
        for i in range(n // 2, n):
            p1.send(f"p1-{i}".encode())

        def backlog_waits() -> None:
            rep = c1.stats(topic)["replication"]["c2"]
            assert rep["connected"] is False and rep["replicationBacklog"] > 0, rep
        eventually(backlog_waits, 20)
        time.sleep(2)  # a few reconnect attempts fail meanwhile
        c2.proc.start(port=c2.port)

        def drained() -> None:
            rep = c1.stats(topic)["replication"]["c2"]
            assert rep["connected"] is True and rep["replicationBacklog"] == 0, rep
        eventually(drained, 60)
        k2 = c2.client()
        clients.append(k2)
        s2 = k2.subscribe(topic, "sub")
        got2 = drain(s2, n)
        assert per_producer(got2, "p1") == list(range(n)), "every message once, in order"
        assert len(got2) == n
        # c1 sees its own messages only: nothing came back from c2.
        got1 = drain(s1, n)
        assert got1 == [f"p1-{i}" for i in range(n)]
    finally:
        for k in clients:
            k.close()


@pytest.mark.parametrize("source", ["cluster-data", "broker"])
def test_tls_and_authentication(tls_certs, source):  # noqa: F811
    """Pulsar's getReplicationClient. source=cluster-data: the remote's ClusterData gives a
    pulsar+ssl URL only, brokerClientTlsEnabled, its trust file and a token
    (authenticationPlugin/Parameters), while the local broker has no TLS or credentials of its
    own: the replicator connects over TLS with the token. Without the trust file first, it does
    not connect; the ClusterData's update is taken at the next attempt. source=broker: the
    ClusterData has both URLs and nothing else; the local broker's brokerClientTlsEnabled, trust
    file and token make the replicator take the pulsar+ssl one with them."""
    key = new_secret_key()
    token = role_token(key, SUPER_USER)
    auth = {"Authorization": f"Bearer {token}"}
    own = source == "cluster-data"
    c1 = Side("c1", free_port(), () if own else (
        "brokerClientTlsEnabled=true", f"brokerClientTrustCertsFilePath={tls_certs.ca}",
        f"brokerClientAuthenticationPlugin={CLIENT_TOKEN_PLUGIN}",
        f"brokerClientAuthenticationParameters=token:{token}"))
    c2_proc = MagnetarProcess(["clusterName=c2", *SETTINGS, *tls_settings(tls_certs),
                               *token_auth_settings(key)])
    ep = c2_proc.start()
    clients = []
    try:
        tls_url = ep.service_url_tls
        assert tls_url and tls_url.startswith("pulsar+ssl://")

        def c2(method: str, path: str, body: object = None) -> requests.Response:
            return requests.request(method, c2_proc.admin_url + path, json=body, headers=auth,
                                    timeout=30)
        assert c2("PUT", "/admin/v2/clusters/c1", {"brokerServiceUrl": c1.url}).status_code in (
            200, 204)
        for path, body in (("/admin/v2/tenants/geo", {"allowedClusters": ["c1", "c2"],
                                                      "adminRoles": []}),
                           (f"/admin/v2/namespaces/{NS}", None)):
            assert c2("PUT", path, body).status_code == 204
        assert c2("POST", f"/admin/v2/namespaces/{NS}/replication", ["c1", "c2"]).status_code \
            == 200
        data = {"serviceUrl": c2_proc.admin_url, "brokerServiceUrlTls": tls_url}
        if own:
            data.update({"brokerClientTlsEnabled": True,
                         "authenticationPlugin": CLIENT_TOKEN_PLUGIN,
                         "authenticationParameters": f"token:{token}"})
        else:
            data["brokerServiceUrl"] = ep.service_url
        assert c1.http("PUT", "/admin/v2/clusters/c2", data).status_code in (200, 204)
        assert c1.http("PUT", "/admin/v2/tenants/geo",
                       {"allowedClusters": ["c1", "c2"], "adminRoles": []}).status_code == 204
        assert c1.http("PUT", f"/admin/v2/namespaces/{NS}").status_code == 204
        assert c1.http("POST", f"/admin/v2/namespaces/{NS}/replication",
                       ["c1", "c2"]).status_code == 200
        topic = fresh_topic()
        k2 = pulsar.Client(tls_url, authentication=pulsar.AuthenticationToken(token),
                           tls_trust_certs_file_path=tls_certs.ca,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        clients.append(k2)
        s2 = k2.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        k1 = c1.client()
        clients.append(k1)
        p1 = k1.create_producer(topic, producer_name="p1", batching_enabled=False)
        for i in range(20):
            p1.send(f"p1-{i}".encode())
        if own:
            # No trust file: the system's CAs do not know the test CA, so no connection.
            time.sleep(3)
            rep = c1.stats(topic)["replication"]["c2"]
            assert rep["connected"] is False and rep["replicationBacklog"] == 20, rep
            data["brokerClientTrustCertsFilePath"] = tls_certs.ca
            assert c1.http("POST", "/admin/v2/clusters/c2", data).status_code in (200, 204)

        def connected() -> None:
            rep = c1.stats(topic)["replication"]["c2"]
            assert rep["connected"] is True and rep["replicationBacklog"] == 0, rep
            assert rep["outboundConnection"] == tls_url, rep
        eventually(connected, 90)
        got = drain(s2, 20)
        assert got == [f"p1-{i}" for i in range(20)]
    finally:
        for k in clients:
            k.close()
        c1.proc.close()
        c2_proc.close()
