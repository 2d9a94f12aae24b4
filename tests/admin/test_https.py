"""The admin API on webServicePortTls (HTTPS) with requests: the same routes as over HTTP,
client certificates, lookups that advertise the TLS URLs, and bad input on the HTTPS port."""

import re
import socket
import time

import pytest
import requests

from harness.tls import tls_certs, tls_settings  # noqa: F401 (fixture)


@pytest.fixture
def tls_broker(magnetar, tls_certs):  # noqa: F811
    return magnetar(tls_settings(tls_certs, web_port=0))


def tls_errors(admin_url, kind):
    text = requests.get(f"{admin_url}/metrics", timeout=10).text
    return int(float(re.search(rf'^magnetar_tls_errors_total{{error="{kind}"}} (\S+)$', text,
                               re.M).group(1)))


def test_admin_routes_over_https(tls_broker, tls_certs):  # noqa: F811
    https = tls_broker.endpoint.admin_url_tls
    assert https and https.startswith("https://localhost:")
    r = requests.get(f"{https}/admin/v2/clusters", verify=tls_certs.ca, timeout=10)
    assert r.status_code == 200 and r.json() == ["standalone"]
    r = requests.get(f"{https}/admin/v2/brokers/health", verify=tls_certs.ca, timeout=10)
    assert r.status_code == 200 and r.text == "ok"
    r = requests.put(f"{https}/admin/v2/persistent/public/default/https-topic",
                     verify=tls_certs.ca, timeout=10)
    assert r.status_code == 204
    # The same state is seen over plain HTTP.
    r = requests.get(f"{tls_broker.admin_url}/admin/v2/persistent/public/default", timeout=10)
    assert "persistent://public/default/https-topic" in r.json()
    # With a client certificate too (asked for, not required).
    r = requests.get(f"{https}/admin/v2/tenants", verify=tls_certs.ca,
                     cert=(tls_certs.cert("client"), tls_certs.key("client")), timeout=10)
    assert r.status_code == 200 and "public" in r.json()


def test_untrusted_broker_certificate_is_refused_by_requests(tls_broker, tls_certs):  # noqa: F811
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{tls_broker.endpoint.admin_url_tls}/admin/v2/clusters",
                     verify=tls_certs.path("other-ca.pem"), timeout=10)


def test_lookup_advertises_tls_urls(tls_broker, tls_certs):  # noqa: F811
    https = tls_broker.endpoint.admin_url_tls
    r = requests.get(f"{https}/lookup/v2/topic/persistent/public/default/https-lookup",
                     verify=tls_certs.ca, timeout=10)
    assert r.status_code == 200
    body = r.json()
    tls_port = tls_broker.endpoint.service_url_tls.rsplit(":", 1)[1]
    assert body["brokerUrlTls"] == f"pulsar+ssl://localhost:{tls_port}"
    assert body["brokerUrl"].startswith("pulsar://")


def test_plain_http_and_silence_on_the_https_port(tls_broker, tls_certs):  # noqa: F811
    port = int(tls_broker.endpoint.admin_url_tls.rsplit(":", 1)[1])
    before = tls_errors(tls_broker.admin_url, "handshake_failed")
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/admin/v2/clusters", timeout=10)
    assert tls_errors(tls_broker.admin_url, "handshake_failed") == before + 1
    timeouts = tls_errors(tls_broker.admin_url, "handshake_timeout")
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(20)
        t0 = time.time()
        assert s.recv(100) == b""
        assert 5 < time.time() - t0 < 15
    assert tls_errors(tls_broker.admin_url, "handshake_timeout") == timeouts + 1
    # HTTPS still answers.
    r = requests.get(f"{tls_broker.endpoint.admin_url_tls}/admin/v2/clusters",
                     verify=tls_certs.ca, timeout=10)
    assert r.status_code == 200
