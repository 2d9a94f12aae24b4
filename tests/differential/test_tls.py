"""TLS as a client observes it, the same on Pulsar and Magnetar configured the same way:
pulsar+ssl:// with hostname validation, mTLS required (a certificate from another CA and a
missing one are refused, the trusted one works), HTTPS admin with a client certificate, and the
HTTP lookup's brokerUrlTls. Certificates come from tests/harness/tls.py (made at run time)."""

import pulsar
import pytest
import requests

from harness.broker import free_port
from harness.tls import tls_certs, tls_settings  # noqa: F401 (fixture)


@pytest.fixture(scope="module")
def mtls_broker(request, tls_certs):  # noqa: F811
    """One broker (of --broker's kind) with TLS ports and tlsRequireTrustedClientCertOnConnect."""
    from harness.broker import broker_process
    from harness.fixtures import wait_namespace
    if request.config.getoption("--broker-url", None):
        pytest.skip("needs a broker this suite starts (not --broker-url)")
    settings = tls_settings(tls_certs, broker_port=free_port(), web_port=free_port(),
                            tlsRequireTrustedClientCertOnConnect=True)
    proc = broker_process(request.config.getoption("--broker", "magnetar"), settings)
    endpoint = proc.start()
    wait_namespace(endpoint.admin_url)
    yield endpoint
    proc.close()


def client_for(url, certs, who=None, trust=None):
    auth = pulsar.AuthenticationTLS(certs.cert(who), certs.key(who)) if who else None
    return pulsar.Client(url, authentication=auth, tls_trust_certs_file_path=trust or certs.ca,
                         tls_validate_hostname=True, operation_timeout_seconds=8,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def test_mtls_produce_consume(mtls_broker, tls_certs, topic):  # noqa: F811
    client = client_for(mtls_broker.service_url_tls, tls_certs, "client")
    try:
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(topic)
        for i in range(5):
            producer.send(f"tls-{i}".encode())
        got = [consumer.receive(timeout_millis=10000).data() for _ in range(5)]
        assert got == [f"tls-{i}".encode() for i in range(5)]
    finally:
        client.close()


@pytest.mark.parametrize("who", ["other-client", None])
def test_untrusted_or_missing_client_certificate_is_refused(mtls_broker, tls_certs, topic,  # noqa: F811
                                                             who):
    client = client_for(mtls_broker.service_url_tls, tls_certs, who)
    try:
        with pytest.raises(Exception):
            client.create_producer(topic)
    finally:
        client.close()


def test_https_admin_with_client_certificate(mtls_broker, tls_certs):  # noqa: F811
    cert = (tls_certs.cert("client"), tls_certs.key("client"))
    r = requests.get(f"{mtls_broker.admin_url_tls}/admin/v2/clusters", verify=tls_certs.ca,
                     cert=cert, timeout=30)
    assert r.status_code == 200 and "standalone" in r.json()
    with pytest.raises(requests.exceptions.RequestException):
        requests.get(f"{mtls_broker.admin_url_tls}/admin/v2/clusters", verify=tls_certs.ca,
                     timeout=30)


def test_http_lookup_advertises_the_tls_port(mtls_broker, topic):
    name = topic.removeprefix("persistent://")
    requests.put(f"{mtls_broker.admin_url}/admin/v2/persistent/{name}", timeout=30)
    r = requests.get(f"{mtls_broker.admin_url}/lookup/v2/topic/persistent/{name}", timeout=30)
    assert r.status_code == 200
    tls_port = mtls_broker.service_url_tls.rsplit(":", 1)[1]
    assert r.json()["brokerUrlTls"].startswith("pulsar+ssl://")
    assert r.json()["brokerUrlTls"].endswith(f":{tls_port}")
