"""Token authentication and authorization with the official Python client and REST with
Bearer tokens: keys and tokens made at run time by `magnetar tokens` (and, for the bad ones,
by hand), refused ones with Pulsar's errors and metrics, only the offending connection pays."""

import base64
import hashlib
import hmac
import json
import os
import subprocess
import tempfile
import time

import pulsar
import pytest
import requests

from harness.broker import MagnetarProcess, magnetar_bin
from harness.util import metric_sum, round_trip

TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"


def tokens(*args: str) -> str:
    out = subprocess.run([magnetar_bin(), "tokens", *args], check=True, capture_output=True)
    return out.stdout.decode().strip()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256(claims: dict, key: bytes, header: dict | None = None) -> str:
    head = b64url(json.dumps(header or {"alg": "HS256"}).encode())
    body = b64url(json.dumps(claims).encode())
    sig = hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64url(sig)}"


@pytest.fixture(scope="module")
def env():
    keydir = tempfile.mkdtemp(prefix="magnetar-auth-")
    key_file = os.path.join(keydir, "secret.key")
    tokens("create-secret-key", "--output", key_file)
    with open(key_file, "rb") as f:
        key = f.read()
    assert len(key) == 32
    broker = MagnetarProcess([
        "authenticationEnabled=true", "authorizationEnabled=true",
        f"authenticationProviders={TOKEN_PROVIDER}",
        "tokenSecretKey=data:;base64," + base64.b64encode(key).decode(),
        "superUserRoles=admin", "authenticationRefreshCheckSeconds=1",
    ])
    endpoint = broker.start()
    env = {
        "url": endpoint.service_url, "web": endpoint.admin_url, "key": key,
        "key_url": "file://" + key_file,
        "admin": tokens("create", "--secret-key", "file://" + key_file, "--subject", "admin"),
        "alice": tokens("create", "--secret-key", "file://" + key_file, "--subject", "alice"),
    }
    yield env
    broker.close()


def client(env, token=None):
    auth = pulsar.AuthenticationToken(token) if token is not None else None
    return pulsar.Client(env["url"], authentication=auth, operation_timeout_seconds=5)


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def metric(env, name, **labels):
    return metric_sum(requests.get(env["web"] + "/metrics", timeout=10).text, name, **labels)


def topic(name):
    return f"persistent://public/default/auth-{name}-{int(time.time() * 1000)}"


def test_superuser_token_produces_and_consumes(env):
    c = client(env, env["admin"])
    round_trip(c, topic("admin"), timeout_ms=5000)
    c.close()


@pytest.mark.parametrize("kind", ["none", "wrong_key", "expired", "alg_none", "forged"])
def test_bad_credentials_are_refused_and_counted(env, kind):
    now = int(time.time())
    bad = {
        "none": None,
        "wrong_key": hs256({"sub": "admin"}, os.urandom(32)),
        "expired": hs256({"sub": "admin", "exp": now - 60}, env["key"]),
        "alg_none": b64url(b'{"alg":"none"}') + "." + b64url(b'{"sub":"admin"}') + ".",
        "forged": None,
    }[kind]
    if kind == "forged":
        head, _, sig = env["alice"].split(".")
        bad = f"{head}.{b64url(json.dumps({'sub': 'admin'}).encode())}.{sig}"
    before = metric(env, "pulsar_authentication_failures_total", reason="INVALID_TOKEN")
    refused = metric(env, "magnetar_protocol_errors_total", error="authentication")
    good = client(env, env["admin"])
    t = topic(kind)
    good_producer = good.create_producer(t)
    c = client(env, bad)
    # The C++ client retries a refused CONNECT until the operation timeout.
    with pytest.raises(pulsar.PulsarException):
        c.create_producer(t)
    c.close()
    assert metric(env, "magnetar_protocol_errors_total", error="authentication") > refused
    if kind != "none":
        assert metric(env, "pulsar_authentication_failures_total",
                      reason="INVALID_TOKEN") > before
    # Only that connection paid: the good client still works.
    good_producer.send(b"still fine")
    good.close()


def test_role_without_permission_then_granted(env):
    t = topic("perm")
    web = env["web"]
    alice = client(env, env["alice"])
    denied_before = metric(env, "magnetar_authorization_denied_total", operation="lookup")
    with pytest.raises(pulsar.PulsarException) as err:
        alice.create_producer(t)
    assert "uthoriz" in type(err.value).__name__ + str(err.value)
    assert metric(env, "magnetar_authorization_denied_total", operation="lookup") > denied_before
    with pytest.raises(pulsar.PulsarException):
        alice.subscribe(t, "s")
    # Grant produce on the namespace, consume on the topic.
    ns_url = web + "/admin/v2/namespaces/public/default/permissions"
    r = requests.post(ns_url + "/alice", json=["produce"], headers=bearer(env["admin"]), timeout=10)
    assert r.status_code == 204, r.text
    local = t.split("/")[-1]
    # A topic grant needs the topic (Pulsar: 404 before it exists).
    r = requests.put(f"{web}/admin/v2/persistent/public/default/{local}",
                     headers=bearer(env["admin"]), timeout=10)
    assert r.status_code == 204, r.text
    topic_url = f"{web}/admin/v2/persistent/public/default/{local}/permissions"
    r = requests.post(topic_url + "/alice", json=["consume"], headers=bearer(env["admin"]),
                      timeout=10)
    assert r.status_code == 204, r.text
    r = requests.get(topic_url, headers=bearer(env["admin"]), timeout=10)
    assert r.json()["alice"] == ["produce", "consume"]
    policies = requests.get(web + "/admin/v2/namespaces/public/default",
                            headers=bearer(env["admin"]), timeout=10).json()
    assert policies["auth_policies"]["namespace_auth"]["alice"] == ["produce"]
    assert policies["auth_policies"]["destination_auth"][t]["alice"] == ["consume"]
    consumer = alice.subscribe(t, "s")
    producer = alice.create_producer(t)
    producer.send(b"granted")
    assert consumer.receive(5000).data() == b"granted"
    # Revoke: new producers are refused again.
    r = requests.delete(ns_url + "/alice", headers=bearer(env["admin"]), timeout=10)
    assert r.status_code == 204
    with pytest.raises(pulsar.PulsarException):
        alice.create_producer(topic("perm-revoked"))
    alice.close()


def test_rest_authentication_and_authorization(env):
    web = env["web"]
    url = web + "/admin/v2/namespaces/public/default/permissions"
    r = requests.get(url, timeout=10)
    assert r.status_code == 401
    r = requests.get(url, headers=bearer(hs256({"sub": "admin"}, os.urandom(32))), timeout=10)
    assert r.status_code == 401
    r = requests.get(url, headers=bearer(env["alice"]), timeout=10)
    assert r.status_code == 403
    assert "GET_PERMISSION" in r.json()["reason"]
    r = requests.get(web + "/admin/v2/tenants", headers=bearer(env["alice"]), timeout=10)
    assert r.status_code == 401
    assert r.json()["reason"] == "This operation requires super-user access"
    r = requests.get(url, headers=bearer(env["admin"]), timeout=10)
    assert r.status_code == 200
    # /metrics is open unless authenticateMetricsEndpoint.
    assert requests.get(web + "/metrics", timeout=10).status_code == 200


def test_expiring_token_is_refreshed_through_auth_challenge(env):
    def fresh():
        return hs256({"sub": "admin", "exp": int(time.time()) + 2}, env["key"])

    c = pulsar.Client(env["url"], authentication=pulsar.AuthenticationToken(fresh),
                      operation_timeout_seconds=5)
    t = topic("refresh")
    producer = c.create_producer(t)
    time.sleep(5)  # past two expiries: the broker asked, the client answered with a new token
    producer.send(b"after refresh", )
    c.close()


def test_expired_token_without_refresh_closes_connection(env):
    short = hs256({"sub": "admin", "exp": int(time.time()) + 2}, env["key"])
    c = pulsar.Client(env["url"], authentication=pulsar.AuthenticationToken(short),
                      operation_timeout_seconds=3)
    t = topic("expire")
    producer = c.create_producer(t, send_timeout_millis=3000)
    time.sleep(5)
    # The broker's challenge gets the same (expired) token back: refused, connection closed, and
    # reconnecting with it fails too.
    with pytest.raises(pulsar.PulsarException):
        producer.send(b"too late")
    c.close()


def test_topic_lists_need_get_topics(env):
    """A namespace's REST topic lists are Pulsar's NamespaceOperation.GET_TOPICS: a role with
    produce or consume granted on the namespace may list it, as over the binary protocol."""
    web = env["web"]
    bob = tokens("create", "--secret-key", env["key_url"], "--subject", "bob")
    lists = [web + "/admin/v2/namespaces/public/default/topics",
             web + "/admin/v2/persistent/public/default",
             web + "/admin/v2/non-persistent/public/default"]
    for url in lists:
        assert requests.get(url, headers=bearer(bob), timeout=10).status_code == 403
    grant = web + "/admin/v2/namespaces/public/default/permissions/bob"
    r = requests.post(grant, json=["consume"], headers=bearer(env["admin"]), timeout=10)
    assert r.status_code == 204, r.text
    try:
        for url in lists:
            r = requests.get(url, headers=bearer(bob), timeout=10)
            assert r.status_code == 200, (url, r.text)
        # Only the lists: other namespace routes stay the tenant admin's.
        r = requests.get(web + "/admin/v2/namespaces/public/default/permissions",
                         headers=bearer(bob), timeout=10)
        assert r.status_code == 403
    finally:
        requests.delete(grant, headers=bearer(env["admin"]), timeout=10)
    assert requests.get(lists[0], headers=bearer(bob), timeout=10).status_code == 403
