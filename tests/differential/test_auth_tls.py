"""AuthenticationProviderTls as the official Python client and the REST API see it, on a broker
of the --broker kind started the same way: TLS ports with certificates made at run time
(harness/tls.py), the token and TLS providers, superUserRoles=admin (the broker's own client
authenticates with admin's token; the tests as CN=admin). The role of a certificate is its CN:
authorization on produce, consume and pattern subscriptions (GET_TOPICS), REST with a client
certificate, Pulsar's AuthActions in grants, and the refused certificates."""

import re
import tempfile
import urllib.parse
import uuid

import pulsar
import pytest
import requests

from harness.auth import new_secret_key, token_auth_settings
from harness.broker import free_port
from harness.fixtures import own_broker
from harness.tls import connect_answer, generate_certs, tls_settings
from harness.util import eventually, metric_sum, round_trip

TLS_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"
TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
NS = "public/default"


class Env:
    def __init__(self, endpoint, certs):
        self.endpoint = endpoint
        self.certs = certs

    def client(self, who=None, auth=None):
        if who:
            auth = pulsar.AuthenticationTLS(self.certs.cert(who), self.certs.key(who))
        return pulsar.Client(self.endpoint.service_url_tls, authentication=auth,
                             tls_trust_certs_file_path=self.certs.ca,
                             operation_timeout_seconds=5,
                             logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))

    def rest(self, method, path, who=None, **kwargs):
        cert = (self.certs.cert(who), self.certs.key(who)) if who else None
        return requests.request(method, self.endpoint.admin_url_tls + path, cert=cert,
                                verify=self.certs.ca, timeout=30, **kwargs)

    def metric(self, name, **labels):
        text = requests.get(self.endpoint.admin_url + "/metrics", timeout=30).text
        return metric_sum(text, name, **labels)


@pytest.fixture(scope="module")
def env(request):
    d = tempfile.mkdtemp(prefix="diff-auth-tls-")
    certs = generate_certs(d, client_roles=("admin", "app-1", "app-2"))
    settings = [s for s in token_auth_settings(new_secret_key())
                if not s.startswith("authenticationProviders=")]
    settings += tls_settings(certs, broker_port=free_port(), web_port=free_port())
    settings.append(f"authenticationProviders={TOKEN_PROVIDER},{TLS_PROVIDER}")
    yield from own_broker(
        request.config, settings, lambda endpoint: Env(endpoint, certs),
        lambda e: e.rest("GET", "/admin/v2/namespaces/public", "client-admin"),
        "needs a broker this suite starts (TLS certificates made for it)", d)


def fresh_topic(name):
    return f"persistent://{NS}/auth-tls-{name}-{uuid.uuid4().hex[:8]}"


def test_super_user_cn_produces_and_consumes(env):
    c = env.client("client-admin")
    try:
        round_trip(c, fresh_topic("super"))
    finally:
        c.close()


def test_cn_needs_a_grant_to_produce_and_consume(env):
    t = fresh_topic("grant")
    role = "app-1"
    c = env.client(f"client-{role}")
    try:
        with pytest.raises(pulsar.AuthorizationError):
            c.create_producer(t)
        r = env.rest("POST", f"/admin/v2/namespaces/{NS}/permissions/{role}", "client-admin",
                     json=["produce", "consume"])
        assert r.status_code == 204, r.text
        # Any subscription name: no subscription_auth_roles are set.
        consumer = eventually(lambda: c.subscribe(t, f"any-{uuid.uuid4().hex[:4]}"))
        producer = eventually(lambda: c.create_producer(t))
        producer.send(b"granted")
        assert consumer.receive(10000).data() == b"granted"
        other = env.client("client-app-2")
        try:
            with pytest.raises(pulsar.AuthorizationError):
                other.create_producer(t)
        finally:
            other.close()
    finally:
        env.rest("DELETE", f"/admin/v2/namespaces/{NS}/permissions/{role}", "client-admin")
        c.close()


def test_pattern_subscription_needs_a_namespace_grant(env):
    role = "app-2"
    prefix = f"auth-tls-pattern-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://{NS}/{prefix}-a"
    admin = env.client("client-admin")
    admin.create_producer(topic).close()
    # A grant on the topic is not one on the namespace: listing its topics is refused.
    r = env.rest("POST", f"/admin/v2/persistent/{NS}/{prefix}-a/permissions/{role}",
                 "client-admin", json=["consume"])
    assert r.status_code == 204, r.text
    c = env.client(f"client-{role}")
    pattern = re.compile(f"persistent://{NS}/{prefix}-.*")
    try:
        eventually(lambda: c.subscribe(topic, "direct").close())
        # The C++ client reports the refused GET_TOPICS_OF_NAMESPACE as a lookup error.
        with pytest.raises((pulsar.AuthorizationError, pulsar.LookupError)):
            c.subscribe(pattern, "p")
        r = env.rest("POST", f"/admin/v2/namespaces/{NS}/permissions/{role}", "client-admin",
                     json=["consume"])
        assert r.status_code == 204, r.text
        consumer = eventually(lambda: c.subscribe(pattern, "p",
                                                  initial_position=pulsar.InitialPosition.Earliest))
        admin.create_producer(topic).send(b"via pattern")
        assert consumer.receive(10000).data() == b"via pattern"
    finally:
        env.rest("DELETE", f"/admin/v2/namespaces/{NS}/permissions/{role}", "client-admin")
        c.close()
        admin.close()


def test_rest_takes_the_client_certificate(env):
    assert env.rest("GET", "/admin/v2/tenants", "client-admin").status_code == 200
    assert env.rest("GET", "/admin/v2/tenants", "client-app-1").status_code == 401
    assert env.rest("GET", "/admin/v2/tenants").status_code == 401
    with pytest.raises(requests.exceptions.SSLError):
        env.rest("GET", "/admin/v2/tenants", "other-client")


def test_all_auth_actions_granted_and_shown(env):
    role = f"role-{uuid.uuid4().hex[:8]}"
    actions = ["produce", "consume", "functions", "sources", "sinks", "packages"]
    path = f"/admin/v2/namespaces/{NS}/permissions"
    r = env.rest("POST", f"{path}/{role}", "client-admin", json=actions)
    assert r.status_code == 204, r.text
    try:
        shown = eventually(lambda: env.rest("GET", path, "client-admin").json()[role])
        assert sorted(shown) == sorted(actions)
        # A topic grant takes them too.
        name = f"auth-tls-actions-{uuid.uuid4().hex[:6]}"
        assert env.rest("PUT", f"/admin/v2/persistent/{NS}/{name}",
                        "client-admin").status_code == 204
        topic_path = f"/admin/v2/persistent/{NS}/{name}/permissions"
        r = env.rest("POST", f"{topic_path}/{role}", "client-admin", json=["functions", "sinks"])
        assert r.status_code == 204, r.text
        shown = eventually(lambda: env.rest("GET", topic_path, "client-admin").json()[role])
        # Shown with the namespace's grants merged in.
        assert sorted(shown) == sorted(actions)
    finally:
        env.rest("DELETE", f"{path}/{role}", "client-admin")


def test_certificate_from_another_ca_is_refused(env):
    c = env.client("other-client")
    good = env.client("client-admin")
    try:
        with pytest.raises(Exception):
            c.create_producer(fresh_topic("stranger"))
        good.create_producer(fresh_topic("stranger")).send(b"others are served")
    finally:
        c.close()
        good.close()


def test_tls_method_without_a_certificate_is_an_authentication_failure(env):
    labels = {"provider_name": "AuthenticationProviderTls", "auth_method": "tls",
              "reason": "INVALID_CERTS"}
    before = env.metric("pulsar_authentication_failures_total", **labels)
    port = urllib.parse.urlparse(env.endpoint.service_url_tls).port
    ctype, body = connect_answer("localhost", port, "tls", ca=env.certs.ca)
    assert ctype == 14, body  # ERROR
    assert body[2] == [3], body  # AuthenticationError
    assert env.metric("pulsar_authentication_failures_total", **labels) == before + 1
    ctype, body = connect_answer("localhost", port, "tls", ca=env.certs.ca,
                                 cert=(env.certs.cert("client-app-1"),
                                       env.certs.key("client-app-1")))
    assert ctype == 3, body  # CONNECTED
