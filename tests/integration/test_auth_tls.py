"""AuthenticationProviderTls with the official Python client and REST over HTTPS: the role is
the client certificate's CN (certificates made at run time by gen_tls_certs.sh), checked by
authorization on produce and consume; Pulsar's errors and metrics for a missing certificate, a
certificate without a CN and one from another CA, and only the offending connection pays."""

from __future__ import annotations

import shutil
import ssl
import tempfile
import urllib.parse
import uuid

import pulsar
import pytest
import requests

from harness.broker import MagnetarProcess
from harness.tls import TlsCerts, connect_answer, generate_certs, tls_settings
from harness.util import metric_sum

TLS_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"
ROLES = ("admin", "app-1", "app-2")


@pytest.fixture(scope="module")
def certs():
    d = tempfile.mkdtemp(prefix="magnetar-auth-tls-")
    yield generate_certs(d, client_roles=ROLES)
    shutil.rmtree(d, ignore_errors=True)


def start_broker(certs: TlsCerts, **extra: object) -> MagnetarProcess:
    proc = MagnetarProcess(tls_settings(
        certs, broker_port=0, web_port=0, authenticationEnabled=True, authorizationEnabled=True,
        authenticationProviders=TLS_PROVIDER, superUserRoles="admin", **extra))
    proc.start()
    return proc


@pytest.fixture(scope="module")
def broker(certs):
    proc = start_broker(certs)
    yield proc
    proc.close()


def client(proc: MagnetarProcess, certs: TlsCerts, who: str) -> pulsar.Client:
    auth = pulsar.AuthenticationTLS(certs.cert(who), certs.key(who))
    return pulsar.Client(proc.endpoint.service_url_tls, authentication=auth,
                         tls_trust_certs_file_path=certs.ca, operation_timeout_seconds=5,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def rest(proc: MagnetarProcess, certs: TlsCerts, method: str, path: str, who: str | None,
         **kwargs: object) -> requests.Response:
    cert = (certs.cert(who), certs.key(who)) if who else None
    return requests.request(method, proc.endpoint.admin_url_tls + path, cert=cert,
                            verify=certs.ca, timeout=15, **kwargs)


def metric(proc: MagnetarProcess, name: str, **labels: str) -> float:
    text = requests.get(proc.endpoint.admin_url + "/metrics", timeout=10).text
    return metric_sum(text, name, **labels)


def fresh_topic(name: str) -> str:
    return f"persistent://public/default/auth-tls-{name}-{uuid.uuid4().hex[:8]}"


def round_trip(c: pulsar.Client, topic: str, n: int = 5) -> list[bytes]:
    consumer = c.subscribe(topic, "s")
    producer = c.create_producer(topic)
    for i in range(n):
        producer.send(f"m-{i}".encode())
    out = []
    for _ in range(n):
        m = consumer.receive(timeout_millis=10000)
        consumer.acknowledge(m)
        out.append(m.data())
    return out


def test_super_user_cn_produces_and_consumes(broker, certs):
    before = metric(broker, "pulsar_authentication_success_total",
                    provider_name="AuthenticationProviderTls", auth_method="tls")
    c = client(broker, certs, "client-admin")
    try:
        assert round_trip(c, fresh_topic("admin")) == [f"m-{i}".encode() for i in range(5)]
    finally:
        c.close()
    assert metric(broker, "pulsar_authentication_success_total",
                  provider_name="AuthenticationProviderTls", auth_method="tls") > before


def test_cn_without_permission_is_refused_until_granted(broker, certs):
    topic = fresh_topic("grant")
    c = client(broker, certs, "client-app-1")
    other = client(broker, certs, "client-app-2")
    try:
        with pytest.raises(pulsar.AuthorizationError):
            c.create_producer(topic)
        with pytest.raises(pulsar.AuthorizationError):
            c.subscribe(topic, "s")
        # The tenant admin grants with its client certificate (pulsar-admin over HTTPS).
        r = rest(broker, certs, "POST", "/admin/v2/namespaces/public/default/permissions/app-1",
                 "client-admin", json=["produce", "consume"])
        assert r.status_code == 204, r.text
        perms = rest(broker, certs, "GET", "/admin/v2/namespaces/public/default/permissions",
                     "client-admin").json()
        assert sorted(perms["app-1"]) == ["consume", "produce"]
        assert round_trip(c, topic) == [f"m-{i}".encode() for i in range(5)]
        # Another CN of the same CA still has nothing.
        with pytest.raises(pulsar.AuthorizationError):
            other.create_producer(topic)
    finally:
        rest(broker, certs, "DELETE", "/admin/v2/namespaces/public/default/permissions/app-1",
             "client-admin")
        c.close()
        other.close()


def test_rest_takes_the_client_certificate(broker, certs):
    assert rest(broker, certs, "GET", "/admin/v2/tenants", "client-admin").status_code == 200
    denied = rest(broker, certs, "GET", "/admin/v2/tenants", "client-app-1")
    assert denied.status_code == 401
    assert "super-user" in denied.json()["reason"]
    anonymous = rest(broker, certs, "GET", "/admin/v2/tenants", None)
    assert anonymous.status_code == 401
    assert anonymous.json()["reason"] == "Authentication required"
    assert rest(broker, certs, "GET", "/admin/v2/tenants", "nocn").status_code == 401


def auth_failures(broker, reason):
    return metric(broker, "pulsar_authentication_failures_total",
                  provider_name="AuthenticationProviderTls", auth_method="tls", reason=reason)


def port_of(url: str) -> int:
    return int(urllib.parse.urlparse(url).port)


ERROR, CONNECTED, AUTHENTICATION_ERROR = 14, 3, 3


def test_tls_auth_without_a_certificate_is_an_authentication_error(broker, certs):
    before = auth_failures(broker, "INVALID_CERTS")
    # auth_method_name "tls" over TLS, no certificate sent.
    ctype, body = connect_answer("localhost", port_of(broker.endpoint.service_url_tls), "tls",
                                 ca=certs.ca)
    assert ctype == ERROR, body
    assert body[2] == [AUTHENTICATION_ERROR]
    assert body[3] == [b"Failed to authenticate"]
    assert auth_failures(broker, "INVALID_CERTS") == before + 1
    # With the certificate the same CONNECT is accepted.
    ctype, _ = connect_answer("localhost", port_of(broker.endpoint.service_url_tls), "tls",
                              ca=certs.ca,
                              cert=(certs.cert("client-app-1"), certs.key("client-app-1")))
    assert ctype == CONNECTED


def test_tls_auth_on_the_plaintext_port_or_without_cn_is_refused(broker, certs):
    before = auth_failures(broker, "INVALID_CN")
    ctype, body = connect_answer("127.0.0.1", port_of(broker.endpoint.service_url), "tls")
    assert ctype == ERROR and body[2] == [AUTHENTICATION_ERROR], body
    ctype, body = connect_answer("localhost", port_of(broker.endpoint.service_url_tls), "tls",
                                 ca=certs.ca, cert=(certs.cert("nocn"), certs.key("nocn")))
    assert ctype == ERROR and body[2] == [AUTHENTICATION_ERROR], body
    assert auth_failures(broker, "INVALID_CN") == before + 2
    # The official client with that certificate is refused too (it retries CONNECT until its
    # operation timeout).
    nocn = client(broker, certs, "nocn")
    try:
        with pytest.raises((pulsar.Timeout, pulsar.AuthenticationError)):
            nocn.create_producer(fresh_topic("nocn"))
    finally:
        nocn.close()


def test_certificate_from_another_ca_is_refused_and_others_are_served(broker, certs):
    before = metric(broker, "magnetar_tls_errors_total", error="untrusted_cert")
    good = client(broker, certs, "client-admin")
    stranger = client(broker, certs, "other-client")
    try:
        topic = fresh_topic("stranger")
        producer = good.create_producer(topic)
        with pytest.raises(Exception):
            stranger.create_producer(topic)
        producer.send(b"still served")
        with pytest.raises(requests.exceptions.SSLError):
            rest(broker, certs, "GET", "/admin/v2/tenants", "other-client")
    finally:
        good.close()
        stranger.close()
    assert metric(broker, "magnetar_tls_errors_total", error="untrusted_cert") >= before + 2


def test_required_trusted_client_cert_refuses_at_the_handshake(certs):
    proc = start_broker(certs, tlsRequireTrustedClientCertOnConnect=True)
    try:
        tls_before = metric(proc, "magnetar_tls_errors_total", error="untrusted_cert")
        with pytest.raises((ssl.SSLError, ConnectionError)):
            connect_answer("localhost", port_of(proc.endpoint.service_url_tls), "tls",
                           ca=certs.ca)
        # Refused by TLS, before any authentication provider runs.
        assert metric(proc, "magnetar_tls_errors_total", error="untrusted_cert") > tls_before
        assert auth_failures(proc, "INVALID_CERTS") == 0
        ok = client(proc, certs, "client-admin")
        try:
            ok.create_producer(fresh_topic("required")).send(b"x")
        finally:
            ok.close()
    finally:
        proc.close()
