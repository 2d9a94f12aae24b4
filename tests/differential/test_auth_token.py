"""Token authentication and authorization as the official Python client and the REST API see
them, on a broker of the --broker kind started with Pulsar's token settings
(harness/auth.py: HS256 key made here, superUserRoles=admin, the broker's own client
authenticating as admin).

Against an already running broker (--broker-url/--admin-url) set AUTH_SECRET_KEY to the base64
of its tokenSecretKey (started with harness.auth.token_auth_settings, superUserRoles=admin).
"""

import base64
import os
import socket
import sys
import time
import uuid

import pulsar
import pytest
import requests

from harness.auth import b64url, hs256_token, new_secret_key, role_token, token_auth_settings
from harness.broker import BrokerEndpoint, broker_process
from harness.util import eventually, round_trip

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import (  # noqa: E402
    CONNECT,
    CONNECTED,
    ERROR,
    LOOKUP_RESPONSE,
    PARTITIONED_METADATA,
    PARTITIONED_METADATA_RESPONSE,
    WireClient,
    base_command,
    error_name,
    fb,
    frame,
    fv,
    lookup_frame,
    producer_frame,
    subscribe_frame,
)

NS = "public/default"


class Auth:
    def __init__(self, endpoint: BrokerEndpoint, key: bytes):
        self.url = endpoint.service_url
        self.web = endpoint.admin_url
        self.key = key
        self.admin = role_token(key, "admin")

    def client(self, token, operation_timeout_s=5):
        auth = pulsar.AuthenticationToken(token) if token is not None else None
        return pulsar.Client(self.url, authentication=auth,
                             operation_timeout_seconds=operation_timeout_s,
                             logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))

    def rest(self, method, path, token=None, **kwargs):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return requests.request(method, self.web + path, headers=headers, timeout=30, **kwargs)


def wait_ready(auth: Auth, timeout_s: float = 120.0) -> None:
    """Until the super-user sees public/default (Pulsar creates it after it is healthy)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            r = auth.rest("GET", "/admin/v2/namespaces/public", auth.admin)
            if r.status_code == 200 and NS in r.json():
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise AssertionError("public/default did not appear")


@pytest.fixture(scope="module")
def auth(request):
    url = request.config.getoption("--broker-url")
    if url:
        admin_url = request.config.getoption("--admin-url")
        key_b64 = os.environ.get("AUTH_SECRET_KEY")
        if not key_b64 or not admin_url:
            pytest.skip("--broker-url needs --admin-url and AUTH_SECRET_KEY (its tokenSecretKey)")
        a = Auth(BrokerEndpoint("external", url, admin_url), base64.b64decode(key_b64))
        wait_ready(a)
        yield a
        return
    key = new_secret_key()
    proc = broker_process(request.config.getoption("--broker"), token_auth_settings(key))
    try:
        a = Auth(proc.start(), key)
        wait_ready(a)
        yield a
    finally:
        proc.close()


def fresh_topic(name):
    return f"persistent://{NS}/auth-{name}-{uuid.uuid4().hex[:8]}"


def fresh_role():
    return f"role-{uuid.uuid4().hex[:8]}"


def assert_refused(c, t, error):
    """Both a producer and a consumer on t fail with `error`; then closes the client."""
    with pytest.raises(error):
        c.create_producer(t)
    with pytest.raises(error):
        c.subscribe(t, "s")
    c.close()


def test_super_user_produces_and_consumes(auth):
    c = auth.client(auth.admin)
    round_trip(c, fresh_topic("super"))
    c.close()


def bad_token(auth, kind):
    now = int(time.time())
    if kind == "none":
        return None
    if kind == "wrong_key":
        return role_token(new_secret_key(), "admin")
    if kind == "expired":
        return role_token(auth.key, "admin", exp=now - 60)
    if kind == "alg_none":
        return b64url(b'{"alg":"none"}') + "." + b64url(b'{"sub":"admin"}') + "."
    # forged: admin's claims under a signature made for another subject
    head, _, sig = role_token(auth.key, "alice").split(".")
    return f"{head}.{hs256_token(auth.key, {'sub': 'admin'}).split('.')[1]}.{sig}"


@pytest.mark.parametrize("kind", ["none", "wrong_key", "expired", "alg_none", "forged"])
def test_bad_credentials_refused_on_connect(auth, kind):
    # A short operation timeout: the outcome is a timeout either way (CI time).
    c = auth.client(bad_token(auth, kind), operation_timeout_s=2)
    t = fresh_topic(kind)
    # Both brokers refuse CONNECT; the C++ client keeps retrying it until the operation
    # timeout, so what the application sees is a timeout.
    assert_refused(c, t, pulsar.Timeout)


def test_role_without_permission_refused(auth):
    role = fresh_role()
    c = auth.client(role_token(auth.key, role))
    assert_refused(c, fresh_topic("noperm"), pulsar.AuthorizationError)


def test_namespace_grant_then_revoke(auth):
    role = fresh_role()
    path = f"/admin/v2/namespaces/{NS}/permissions"
    r = auth.rest("POST", f"{path}/{role}", auth.admin, json=["produce", "consume"])
    assert r.status_code == 204, r.text
    r = auth.rest("GET", path, auth.admin)
    assert r.status_code == 200
    assert sorted(r.json()[role]) == ["consume", "produce"]
    policies = auth.rest("GET", f"/admin/v2/namespaces/{NS}", auth.admin).json()
    assert sorted(policies["auth_policies"]["namespace_auth"][role]) == ["consume", "produce"]

    c = auth.client(role_token(auth.key, role))
    t = fresh_topic("granted")
    consumer = eventually(lambda: c.subscribe(t, "s"), 15.0)
    producer = c.create_producer(t)
    producer.send(b"granted")
    assert consumer.receive(10000).data() == b"granted"
    c.close()

    r = auth.rest("DELETE", f"{path}/{role}", auth.admin)
    assert r.status_code == 204, r.text
    assert role not in auth.rest("GET", path, auth.admin).json()

    def refused():
        c2 = auth.client(role_token(auth.key, role))
        try:
            with pytest.raises(pulsar.AuthorizationError):
                c2.create_producer(fresh_topic("revoked"))
        finally:
            c2.close()
    eventually(refused, 15.0)


def test_topic_grant_then_revoke(auth):
    role = fresh_role()
    t = fresh_topic("topic-grant")
    admin = auth.client(auth.admin)
    admin_producer = admin.create_producer(t)  # the topic exists before the grant
    local = t.split("/")[-1]
    path = f"/admin/v2/persistent/{NS}/{local}/permissions"
    r = auth.rest("POST", f"{path}/{role}", auth.admin, json=["consume"])
    assert r.status_code == 204, r.text
    r = auth.rest("GET", path, auth.admin)
    assert r.status_code == 200
    assert r.json()[role] == ["consume"]

    c = auth.client(role_token(auth.key, role))
    consumer = eventually(lambda: c.subscribe(t, "s"), 15.0)
    admin_producer.send(b"for the role")
    assert consumer.receive(10000).data() == b"for the role"
    # consume only: producing is still refused
    with pytest.raises(pulsar.AuthorizationError):
        c.create_producer(t)
    consumer.close()

    r = auth.rest("DELETE", f"{path}/{role}", auth.admin)
    assert r.status_code == 204, r.text
    assert role not in auth.rest("GET", path, auth.admin).json()

    def refused():
        with pytest.raises(pulsar.AuthorizationError):
            c.subscribe(t, "s2")
    eventually(refused, 15.0)
    c.close()
    admin.close()


def test_rest_authentication_and_authorization(auth):
    role_tok = role_token(auth.key, fresh_role())
    wrong = role_token(new_secret_key(), "admin")
    t = fresh_topic("rest")
    admin = auth.client(auth.admin)
    admin.create_producer(t).close()
    topic_perms = f"/admin/v2/persistent/{NS}/{t.split('/')[-1]}/permissions"
    ns_perms = f"/admin/v2/namespaces/{NS}/permissions"
    paths = [ns_perms, "/admin/v2/tenants", f"/admin/v2/namespaces/{NS}", topic_perms,
             "/admin/v2/clusters"]
    for path in paths:
        assert auth.rest("GET", path).status_code == 401, path
        assert auth.rest("GET", path, wrong).status_code == 401, path
        assert auth.rest("GET", path, auth.admin).status_code == 200, path
    # An authenticated role that is neither super-user nor tenant admin.
    r = auth.rest("GET", ns_perms, role_tok)
    assert r.status_code == 403
    assert r.json()["reason"] == ("Unauthorized to validateNamespaceOperation for operation "
                                  f"[GET_PERMISSION] on namespace [{NS}]")
    r = auth.rest("POST", f"{ns_perms}/someone", role_tok, json=["produce"])
    assert r.status_code == 403
    assert auth.rest("GET", f"/admin/v2/namespaces/{NS}", role_tok).status_code == 403
    assert auth.rest("POST", f"/admin/v2/namespaces/{NS}/messageTTL", role_tok,
                     json=60).status_code == 403
    # Tenant operations are 401, namespace operations on topics 403.
    assert auth.rest("GET", "/admin/v2/namespaces/public", role_tok).status_code == 401
    assert auth.rest("PUT", f"/admin/v2/persistent/{NS}/{uuid.uuid4().hex[:8]}",
                     role_tok).status_code == 403
    assert auth.rest("GET", "/admin/v2/tenants", role_tok).status_code == 401
    r = auth.rest("GET", topic_perms, role_tok)
    assert r.status_code == 401
    assert r.json()["reason"] == "Don't have permission to administrate resources on this tenant"
    # Listing clusters needs only an authenticated role.
    r = auth.rest("GET", "/admin/v2/clusters", role_tok)
    assert r.status_code == 200
    assert r.json() == ["standalone"]
    # /metrics is open (authenticateMetricsEndpoint defaults to false).
    assert auth.rest("GET", "/metrics/").status_code == 200
    admin.close()


# --- what a refused CONNECT gets, frame by frame ------------------------------------------------

def connect_with(auth, method, data):
    """A raw CONNECT with auth_method_name `method` and auth_data `data`; the WireClient."""
    w = WireClient(int(auth.url.rsplit(":", 1)[1]))
    w.send(frame(base_command(CONNECT, fb(1, "raw") + fv(4, 21) + fb(5, method) + fb(3, data))))
    return w


@pytest.mark.parametrize("kind", ["wrong_key", "expired", "alg_none", "forged", "newline"])
def test_bad_token_gets_authentication_error_then_close(auth, kind):
    # Both brokers (Pulsar's ServerCnx.authenticationFailed): ERROR with request_id -1 (all 64
    # bits set), AuthenticationError and the fixed message, then the connection closes. A token
    # with a trailing newline (the C++/Python client sends a token file as it is; Pulsar's Java
    # client and pulsar-admin trim it) is not a valid token on either broker.
    token = role_token(auth.key, "admin") + "\n" if kind == "newline" else bad_token(auth, kind)
    w = connect_with(auth, "token", token)
    got = w.recv_command()
    assert got is not None and got[0] == ERROR, got
    assert got[1] == {1: [2**64 - 1], 2: [3], 3: [b"Failed to authenticate"]}
    assert error_name(got[1], 2) == "AuthenticationError"
    assert w.wait_closed(10.0)
    w.close()


def test_http_bearer_with_trailing_whitespace_is_accepted(auth):
    # The header value's trailing spaces and tabs are not part of the token (HTTP's OWS).
    port = int(auth.web.rsplit(":", 1)[1])
    for suffix in (" ", "\t", " \t "):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall((f"GET /admin/v2/tenants HTTP/1.1\r\nHost: localhost\r\n"
                       f"Authorization: Bearer {auth.admin}{suffix}\r\n"
                       "Connection: close\r\n\r\n").encode())
            head = s.recv(4096).split(b"\r\n", 1)[0]
        assert head == b"HTTP/1.1 200 OK", (suffix, head)


# --- topics of a tenant or namespace that does not exist ----------------------------------------

def make_tenant(auth, admin_role):
    tenant = f"tenant-{uuid.uuid4().hex[:8]}"
    r = auth.rest("PUT", f"/admin/v2/tenants/{tenant}", auth.admin,
                  json={"adminRoles": [admin_role], "allowedClusters": ["standalone"]})
    assert r.status_code == 204, r.text
    return tenant


def outcome(auth, role, topic):
    """What the official client gets for a producer and a consumer of `topic` as `role`."""
    c = auth.client(role_token(auth.key, role), operation_timeout_s=10)
    got = []
    for make in (lambda: c.create_producer(topic), lambda: c.subscribe(topic, "s")):
        try:
            make()
            got.append("ok")
        except pulsar.PulsarException as e:
            got.append(type(e).__name__)
    c.close()
    return got


def test_missing_tenant_or_namespace_is_topic_not_found(auth):
    # Pulsar: a role that may act on the topic (super-user, tenant admin) gets TopicNotFound for a
    # missing namespace or tenant; a role refused on a missing tenant gets TopicNotFound as well
    # (its check of the tenant admins finds no tenant: 404), on an existing tenant
    # AuthorizationError.
    tenant_admin = fresh_role()
    tenant = make_tenant(auth, tenant_admin)
    missing_tenant = f"persistent://nosuch-{uuid.uuid4().hex[:8]}/ns/t"
    missing_ns = f"persistent://{tenant}/nosuch/t"
    nf = ["TopicNotFound", "TopicNotFound"]
    assert outcome(auth, "admin", missing_tenant) == nf
    assert outcome(auth, "admin", missing_ns) == nf
    assert outcome(auth, tenant_admin, missing_ns) == nf
    assert outcome(auth, tenant_admin, missing_tenant) == nf
    assert outcome(auth, fresh_role(), missing_tenant) == nf
    assert outcome(auth, fresh_role(), missing_ns) == ["AuthorizationError"] * 2


def test_missing_tenant_answers_per_command(auth):
    # Each command's answer to a role refused on a missing tenant, as Pulsar gives them.
    ns = f"nosuch-{uuid.uuid4().hex[:8]}/ns"
    topic = f"persistent://{ns}/t"
    w = connect_with(auth, "token", role_token(auth.key, fresh_role()))
    w.expect(CONNECTED)
    w.send(frame(base_command(PARTITIONED_METADATA, fb(1, topic) + fv(2, 1))))
    b = w.expect(PARTITIONED_METADATA_RESPONSE)
    assert (error_name(b, 4), b[5]) == (
        "TopicNotFound", [f"Tenant or namespace or topic does not exist: {ns}".encode()])
    w.send(lookup_frame(topic, 2))
    b = w.expect(LOOKUP_RESPONSE)
    assert (error_name(b, 6), b[7]) == (
        "AuthorizationError", [b"Exception occurred while trying to authorize lookup"])
    rest_404 = [b"org.apache.pulsar.common.util.RestException: HTTP 404 Not Found"]
    w.send(producer_frame(topic, 1, 3))
    b = w.expect(ERROR)
    assert (error_name(b, 2), b[3]) == ("AuthorizationError", rest_404)
    w.send(subscribe_frame(topic, "s", 1, 4))
    b = w.expect(ERROR)
    assert (error_name(b, 2), b[3]) == ("AuthorizationError", rest_404)
    w.close()


def raw_answers(auth, role, topic):
    """(ServerError name, message) of PARTITIONED_METADATA, LOOKUP, PRODUCER and SUBSCRIBE for
    `topic` as `role` on raw frames ("ok" for a success)."""
    w = connect_with(auth, "token", role_token(auth.key, role))
    w.expect(CONNECTED)
    got = []
    w.send(frame(base_command(PARTITIONED_METADATA, fb(1, topic) + fv(2, 1))))
    b = w.expect(PARTITIONED_METADATA_RESPONSE)
    got.append((error_name(b, 4), b[5][0].decode()) if 4 in b else "ok")
    w.send(lookup_frame(topic, 2))
    b = w.expect(LOOKUP_RESPONSE)
    got.append((error_name(b, 6), b[7][0].decode()) if 6 in b else "ok")
    for request in (producer_frame(topic, 1, 3), subscribe_frame(topic, "s", 1, 4)):
        w.send(request)
        cmd, b = w.recv_command()
        got.append((error_name(b, 2), b[3][0].decode()) if cmd == ERROR else "ok")
    w.close()
    return got


@pytest.mark.parametrize("domain", ["persistent", "non-persistent"])
def test_missing_namespace_answers_per_command_for_allowed_roles(auth, domain):
    # A super-user, or a tenant admin on its tenant, is past authorization: PARTITIONED_METADATA
    # and LOOKUP are TopicNotFound "Namespace not found"; PRODUCER and SUBSCRIBE sent without a
    # lookup are ServiceNotReady (no broker serves a bundle of a namespace that does not exist).
    # A role granted produce/consume on another namespace of the tenant is refused.
    tenant_admin, granted = fresh_role(), fresh_role()
    tenant = make_tenant(auth, tenant_admin)
    assert auth.rest("PUT", f"/admin/v2/namespaces/{tenant}/ns1", auth.admin).status_code == 204
    r = auth.rest("POST", f"/admin/v2/namespaces/{tenant}/ns1/permissions/{granted}", auth.admin,
                  json=["produce", "consume"])
    assert r.status_code == 204, r.text
    cases = [("admin", f"{domain}://nosuch-{uuid.uuid4().hex[:8]}/ns/t"),
             ("admin", f"{domain}://{tenant}/nosuch/t"),
             (tenant_admin, f"{domain}://{tenant}/nosuch/t")]
    for role, topic in cases:
        ns = topic.split("://")[1].rsplit("/", 1)[0]
        not_served = (f"Namespace bundle ({ns}/0x00000000_0xffffffff) for topic ({topic}) not "
                      "served by this instance")
        got = raw_answers(auth, role, topic)
        assert got[:2] == [("TopicNotFound", "Namespace not found")] * 2, (role, topic, got)
        for name, message in got[2:]:
            assert name == "ServiceNotReady" and message.startswith(not_served), (role, got)
    topic = f"{domain}://{tenant}/nosuch/t"

    def granted_on_ns1():  # a grant reaches Pulsar's policy cache asynchronously
        got = raw_answers(auth, granted, f"{domain}://{tenant}/ns1/t")
        assert got == ["ok"] * 4, got
    eventually(granted_on_ns1, 15.0)
    assert raw_answers(auth, granted, topic) == [
        ("AuthorizationError", "Client is not authorized to Get Partition Metadata"),
        ("AuthorizationError", "Client is not authorized to Lookup"),
        ("AuthorizationError", "Client is not authorized to Produce"),
        ("AuthorizationError", "Client is not authorized to subscribe")]


def test_missing_tenant_or_namespace_over_http_lookup(auth):
    # The HTTP lookup service's two requests. The lookup checks the namespace before the role:
    # 404 "Namespace not found" for any role. The partitioned metadata (TopicOperation LOOKUP):
    # a role refused on a missing tenant gets 404 "Tenant does not exist", on a missing
    # namespace of an existing tenant 401.
    tenant_admin, granted, other = fresh_role(), fresh_role(), fresh_role()
    tenant = make_tenant(auth, tenant_admin)
    assert auth.rest("PUT", f"/admin/v2/namespaces/{tenant}/ns1", auth.admin).status_code == 204
    r = auth.rest("POST", f"/admin/v2/namespaces/{tenant}/ns1/permissions/{granted}", auth.admin,
                  json=["produce", "consume"])
    assert r.status_code == 204, r.text
    missing_tenant = f"nosuch-{uuid.uuid4().hex[:8]}/ns/t"
    missing_ns = f"{tenant}/nosuch/t"

    def answer(role, path):
        r = auth.rest("GET", path, role_token(auth.key, role))
        return r.status_code, r.json().get("reason")

    not_found = (404, "Namespace not found")
    for role in ("admin", tenant_admin, granted, other):
        for t in (missing_tenant, missing_ns):
            assert answer(role, f"/lookup/v2/topic/persistent/{t}") == not_found, (role, t)
    for role, t in [("admin", missing_tenant), ("admin", missing_ns), (tenant_admin, missing_ns)]:
        assert answer(role, f"/admin/v2/persistent/{t}/partitions") == not_found, (role, t)
    for role in (tenant_admin, granted, other):
        assert answer(role, f"/admin/v2/persistent/{missing_tenant}/partitions") == (
            404, "Tenant does not exist"), role
    for role in (granted, other):
        assert answer(role, f"/admin/v2/persistent/{missing_ns}/partitions") == (
            401, "Unauthorized to validateTopicOperation for operation [LOOKUP] on topic "
            f"[persistent://{missing_ns}]"), role
