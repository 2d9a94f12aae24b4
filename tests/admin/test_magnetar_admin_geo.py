"""magnetar-admin's geo-replication commands against a real broker (the `cli` fixture:
conftest.py): clusters create/update/delete, namespaces set-clusters/get-clusters, the
replicator dispatch rate of namespaces and topics. Each change is read back through REST and
through the tool; each refused call exits non-zero with a clear reason and changes nothing."""

import uuid

import pytest


def cluster_name() -> str:
    return f"geo-{uuid.uuid4().hex[:8]}"


def rest_json(http, path):
    r = http("GET", path)
    assert r.status_code == 200, (path, r.status_code, r.text)
    return r.json()


def test_clusters_create_update_delete(cli, http):
    name = cluster_name()
    path = f"/admin/v2/clusters/{name}"
    cli("clusters", "create", name, "--url", "http://geo-b.example:8080",
        "--broker-url", "pulsar://geo-b.example:6650",
        "--url-secure", "https://geo-b.example:8443",
        "--broker-url-secure", "pulsar+ssl://geo-b.example:6651")
    created = rest_json(http, path)
    assert created["serviceUrl"] == "http://geo-b.example:8080"
    assert created["brokerServiceUrl"] == "pulsar://geo-b.example:6650"
    assert created["serviceUrlTls"] == "https://geo-b.example:8443"
    assert created["brokerServiceUrlTls"] == "pulsar+ssl://geo-b.example:6651"
    assert created["brokerClientTlsEnabled"] is False
    assert cli.json("clusters", "get", name) == created
    assert name in cli.json("clusters", "list")

    # Refused: nothing changes.
    err = cli("clusters", "create", name, "--url", "http://other:8080", expect=1)
    assert "Cluster already exists" in err.stderr and "409" in err.stderr
    err = cli("clusters", "update", name, "--broker-url", "pulsar://other:6650", expect=2)
    assert "--url" in err.stderr
    err = cli("clusters", "update", name, "--url", "ftp://other", expect=1)
    assert "Illegal service url" in err.stderr and "400" in err.stderr
    assert rest_json(http, path) == created

    # update replaces the ClusterData: the TLS and authentication fields the replicator reads.
    cli("clusters", "update", name, "--url", "http://geo-b2.example:8080",
        "--broker-url-secure", "pulsar+ssl://geo-b2.example:6651", "--tls-enable",
        "--tls-allow-insecure", "--tls-trust-certs-filepath", "/etc/ca.pem",
        "--tls-certs-filepath", "/etc/client.pem", "--tls-key-filepath", "/etc/client.key",
        "--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "--auth-parameters", "token:abc")
    updated = rest_json(http, path)
    assert updated["serviceUrl"] == "http://geo-b2.example:8080"
    assert updated["brokerServiceUrlTls"] == "pulsar+ssl://geo-b2.example:6651"
    assert "brokerServiceUrl" not in updated and "serviceUrlTls" not in updated
    assert updated["brokerClientTlsEnabled"] is True
    assert updated["tlsAllowInsecureConnection"] is True
    assert updated["brokerClientTrustCertsFilePath"] == "/etc/ca.pem"
    assert updated["brokerClientCertificateFilePath"] == "/etc/client.pem"
    assert updated["brokerClientKeyFilePath"] == "/etc/client.key"
    assert updated["authenticationPlugin"] == \
        "org.apache.pulsar.client.impl.auth.AuthenticationToken"
    assert updated["authenticationParameters"] == "token:abc"
    assert cli.json("clusters", "get", name) == updated

    missing = cluster_name()
    err = cli("clusters", "update", missing, "--url", "http://x:8080", expect=1)
    assert "404" in err.stderr
    assert http("GET", f"/admin/v2/clusters/{missing}").status_code == 404
    err = cli("clusters", "create", missing, expect=2)  # no --url
    assert "--url" in err.stderr
    assert missing not in cli.json("clusters", "list")

    assert cli("clusters", "delete", name).stdout == ""
    assert http("GET", path).status_code == 404
    err = cli("clusters", "delete", name, expect=1)
    assert "Cluster does not exist" in err.stderr
    err = cli("clusters", "delete", "standalone", expect=1)
    assert "412" in err.stderr
    assert "standalone" in cli.json("clusters", "list")


@pytest.fixture
def remote_cluster(cli, http):
    """A cluster (ClusterData only: nothing listens at its URLs), deleted after the test."""
    name = cluster_name()
    cli("clusters", "create", name, "--url", "http://127.0.0.1:9", "--broker-url",
        "pulsar://127.0.0.1:9")
    yield name
    http("DELETE", f"/admin/v2/clusters/{name}")


def test_namespace_set_and_get_clusters(cli, http, tenant, remote_cluster):
    cli("tenants", "update", tenant, "-c", f"standalone,{remote_cluster}")
    ns = f"{tenant}/geo"
    cli("namespaces", "create", ns)
    path = f"/admin/v2/namespaces/{ns}/replication"
    assert rest_json(http, path) == ["standalone"]

    cli("namespaces", "set-clusters", ns, "--clusters", f"standalone,{remote_cluster}")
    assert rest_json(http, path) == ["standalone", remote_cluster]
    assert cli.json("namespaces", "get-clusters", ns) == ["standalone", remote_cluster]
    assert cli.json("namespaces", "policies", ns)["replication_clusters"] == \
        ["standalone", remote_cluster]

    unknown = cluster_name()
    err = cli("namespaces", "set-clusters", ns, "--clusters", f"standalone,{unknown}", expect=1)
    assert f"Invalid cluster id: {unknown}" in err.stderr and "403" in err.stderr
    err = cli("namespaces", "set-clusters", ns, "--clusters", ",", expect=2)
    assert "--clusters" in err.stderr
    cli("namespaces", "set-clusters", ns, expect=2)  # --clusters missing
    err = cli("namespaces", "get-clusters", f"{tenant}/nope", expect=1)
    assert "404" in err.stderr
    assert rest_json(http, path) == ["standalone", remote_cluster]

    cli("namespaces", "set-clusters", ns, "-c", "standalone")
    assert cli.json("namespaces", "get-clusters", ns) == ["standalone"]


BAD_RATES = [
    ("--msg-dispatch-rate", "-5"),
    ("--msg-dispatch-rate", "abc"),
    ("--byte-dispatch-rate", "-2"),
    ("--byte-dispatch-rate", "1.5"),
    ("--dispatch-rate-period", "0"),
    ("--dispatch-rate-period", "10s"),
]


def test_namespace_replicator_dispatch_rate(cli, http, namespace):
    path = f"/admin/v2/namespaces/{namespace}/replicatorDispatchRate"
    assert http("GET", path).status_code == 204
    assert cli("namespaces", "get-replicator-dispatch-rate", namespace).stdout == ""

    cli("namespaces", "set-replicator-dispatch-rate", namespace, "--msg-dispatch-rate", "100",
        "--byte-dispatch-rate", "50000", "--dispatch-rate-period", "2")
    want = {"dispatchThrottlingRateInMsg": 100, "dispatchThrottlingRateInByte": 50000,
            "relativeToPublishRate": False, "ratePeriodInSecond": 2}
    assert rest_json(http, path) == want
    assert cli.json("namespaces", "get-replicator-dispatch-rate", namespace) == want

    for option, value in BAD_RATES:
        err = cli("namespaces", "set-replicator-dispatch-rate", namespace, option, value,
                  expect=2)
        assert f"bad {option}: {value}" in err.stderr
    err = cli("namespaces", "set-replicator-dispatch-rate", "public/nope",
              "--msg-dispatch-rate", "5", expect=1)
    assert "404" in err.stderr
    assert rest_json(http, path) == want

    # pulsar-admin's defaults for the options not given: -1 (no limit), period 1 s.
    cli("namespaces", "set-replicator-dispatch-rate", namespace, "--msg-dispatch-rate", "7")
    assert rest_json(http, path) == {"dispatchThrottlingRateInMsg": 7,
                                     "dispatchThrottlingRateInByte": -1,
                                     "relativeToPublishRate": False, "ratePeriodInSecond": 1}
    cli("namespaces", "remove-replicator-dispatch-rate", namespace)
    assert http("GET", path).status_code == 204


def test_topic_replicator_dispatch_rate(cli, http, namespace):
    topic = f"persistent://{namespace}/rate-{uuid.uuid4().hex[:6]}"
    cli("topics", "create", topic)
    path = f"/admin/v2/persistent/{topic[len('persistent://'):]}/replicatorDispatchRate"
    assert http("GET", path).status_code == 204

    cli("namespaces", "set-replicator-dispatch-rate", namespace, "--msg-dispatch-rate", "40")
    applied = cli.json("topics", "get-replicator-dispatch-rate", topic, "--applied")
    assert applied["dispatchThrottlingRateInMsg"] == 40  # the namespace's, no topic policy

    cli("topics", "set-replicator-dispatch-rate", topic, "--msg-dispatch-rate", "150",
        "--byte-dispatch-rate", "0", "--dispatch-rate-period", "3",
        "--relative-to-publish-rate")
    want = {"dispatchThrottlingRateInMsg": 150, "dispatchThrottlingRateInByte": 0,
            "relativeToPublishRate": True, "ratePeriodInSecond": 3}
    assert rest_json(http, path) == want
    assert cli.json("topics", "get-replicator-dispatch-rate", topic) == want
    assert cli.json("topics", "get-replicator-dispatch-rate", topic, "--applied") == want

    for option, value in BAD_RATES:
        err = cli("topics", "set-replicator-dispatch-rate", topic, option, value, expect=2)
        assert f"bad {option}: {value}" in err.stderr
    missing = f"persistent://{namespace}/missing"
    err = cli("topics", "set-replicator-dispatch-rate", missing, "--msg-dispatch-rate", "5",
              expect=1)
    assert "404" in err.stderr
    assert rest_json(http, path) == want

    cli("topics", "remove-replicator-dispatch-rate", topic)
    assert http("GET", path).status_code == 204
    applied = cli.json("topics", "get-replicator-dispatch-rate", topic, "--applied")
    assert applied["dispatchThrottlingRateInMsg"] == 40
