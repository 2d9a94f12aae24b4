"""Basic authentication (Pulsar's AuthenticationProviderBasic: htpasswd-style `basicAuthConf`)
beside token authentication, on the binary protocol and HTTP, on a broker of the --broker kind
started with harness.auth.basic_and_token_settings: users and hashes of harness.auth.BASIC_USERS
(basicAuthConf=file:///...), superUserRoles=admin,basic-admin, and tokenSecretKey=file:///...
whose file ends in a newline.
"""

import base64
import os
import socket
import sys
import tempfile
import uuid

import pulsar
import pytest
import requests

from harness.auth import (
    BASIC_USERS,
    basic_and_token_settings,
    new_secret_key,
    role_token,
    write_htpasswd,
)
from harness.fixtures import own_broker
from harness.util import eventually

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import (  # noqa: E402
    CONNECT,
    CONNECTED,
    ERROR,
    WireClient,
    base_command,
    fb,
    frame,
    fv,
)

NS = "public/default"


class Basic:
    def __init__(self, endpoint, key_bytes):
        self.url = endpoint.service_url
        self.web = endpoint.admin_url
        self.key_bytes = key_bytes  # the key file's bytes, trailing newline included
        self.admin = role_token(key_bytes, "admin")

    def client(self, user, timeout_s=10):
        pw = BASIC_USERS[user][0]
        return pulsar.Client(self.url, authentication=pulsar.AuthenticationBasic(user, pw),
                             operation_timeout_seconds=timeout_s,
                             logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))

    def connect(self, method, data):
        """The first answer to a raw CONNECT, and whether the broker then closes."""
        w = WireClient(int(self.url.rsplit(":", 1)[1]))
        w.send(frame(base_command(CONNECT, fb(1, "raw") + fv(4, 21) + fb(5, method)
                                  + fb(3, data))))
        got = w.recv_command()
        closed = got is not None and got[0] == ERROR and w.wait_closed(10.0)
        w.close()
        return got, closed


@pytest.fixture(scope="module")
def basic(request):
    work = tempfile.mkdtemp(prefix="auth-basic-")
    key = new_secret_key() + b"\n"
    key_path = os.path.join(work, "secret.key")
    with open(key_path, "wb") as f:
        f.write(key)
    conf = write_htpasswd(os.path.join(work, "htpasswd"))
    yield from own_broker(
        request.config, basic_and_token_settings(f"file://{key_path}", key, f"file://{conf}"),
        lambda endpoint: Basic(endpoint, key),
        lambda b: requests.get(b.web + "/admin/v2/namespaces/public", timeout=30,
                               headers={"Authorization": f"Bearer {b.admin}"}),
        "starts its own broker (basicAuthConf and a key file)", work)


def fresh_topic(name):
    return f"persistent://{NS}/basic-{name}-{uuid.uuid4().hex[:8]}"


def http_get(b, path, auth=None, header=None):
    headers = {"Authorization": header} if header else {}
    return requests.get(b.web + path, auth=auth, headers=headers, timeout=30)


@pytest.mark.parametrize("user", ["des-user", "apr-user"])
def test_basic_user_is_authenticated_then_granted(basic, user):
    # DES crypt and apr1 entries authenticate; the role is the user name, refused until granted.
    c = basic.client(user)
    t = fresh_topic(user)
    with pytest.raises(pulsar.AuthorizationError):
        c.create_producer(t)
    r = requests.post(f"{basic.web}/admin/v2/namespaces/{NS}/permissions/{user}",
                      json=["produce", "consume"], timeout=30,
                      headers={"Authorization": f"Bearer {basic.admin}"})
    assert r.status_code == 204, r.text

    # A grant reaches Pulsar's policy cache asynchronously.
    producer = eventually(lambda: c.create_producer(t), 15.0)
    consumer = c.subscribe(t, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer.send(b"basic")
    assert consumer.receive(10000).data() == b"basic"
    c.close()


def test_basic_super_user_over_http_and_binary(basic):
    pw = BASIC_USERS["basic-admin"][0]
    r = http_get(basic, "/admin/v2/tenants", auth=("basic-admin", pw))
    assert r.status_code == 200 and "public" in r.json()
    # The scheme is matched without regard to case.
    creds = base64.b64encode(f"basic-admin:{pw}".encode()).decode()
    assert http_get(basic, "/admin/v2/tenants", header=f"basic {creds}").status_code == 200
    c = basic.client("basic-admin")
    t = fresh_topic("super")
    consumer = c.subscribe(t, "s")
    c.create_producer(t).send(b"x")
    assert consumer.receive(10000).data() == b"x"
    c.close()


@pytest.mark.parametrize("user,password", [
    ("des-user", "wrong"), ("apr-user", "aprpass!"), ("nobody", "secret"),
    # Pulsar checks only apr1 and DES crypt: bcrypt and "$1$" entries never match.
    ("bcrypt-user", "secret"), ("md5-user", "secret"),
])
def test_bad_basic_credentials_refused(basic, user, password):
    got, closed = basic.connect("basic", f"{user}:{password}")
    assert got is not None and got[0] == ERROR, got
    assert got[1] == {1: [2**64 - 1], 2: [3], 3: [b"Failed to authenticate"]}
    assert closed
    assert http_get(basic, "/admin/v2/tenants", auth=(user, password)).status_code == 401


@pytest.mark.parametrize("password,ok", [
    ("ab\0cd", True), ("ab\0cd\0\0\0more", True), ("ab", False), ("ab\0ce", False),
])
def test_des_password_with_a_nul_byte(basic, password, ok):
    # commons-codec's UnixCrypt keys DES with the password's first 8 bytes, a NUL among them
    # included (crypt(3) would stop at it), on the binary protocol and over HTTP.
    got, closed = basic.connect("basic", f"des-nul:{password}")
    assert got is not None and got[0] == (CONNECTED if ok else ERROR), got
    assert closed != ok
    # Authenticated but not allowed: 403; not authenticated: 401.
    r = http_get(basic, f"/admin/v2/namespaces/{NS}/permissions", auth=("des-nul", password))
    assert r.status_code == (403 if ok else 401), r.text


def test_bad_basic_credentials_are_a_timeout_for_the_python_client(basic):
    # The C++ client retries a refused CONNECT until its operation timeout, on both brokers.
    c = pulsar.Client(basic.url, authentication=pulsar.AuthenticationBasic("des-user", "wrong"),
                      operation_timeout_seconds=2,
                      logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    with pytest.raises(pulsar.Timeout):
        c.create_producer(fresh_topic("refused"))
    c.close()


def test_token_key_file_keeps_its_trailing_newline(basic):
    # tokenSecretKey=file:///... is read as bytes (Pulsar's AuthTokenUtils.readKeyFromUrl): the
    # key is the file with its newline; a token signed without it is refused.
    stripped = role_token(basic.key_bytes.rstrip(b"\n"), "admin")
    got, _ = basic.connect("token", basic.admin)
    assert got is not None and got[0] == CONNECTED, got
    got, closed = basic.connect("token", stripped)
    assert got is not None and got[0] == ERROR and closed, got
    assert http_get(basic, "/admin/v2/tenants", header=f"Bearer {basic.admin}").status_code == 200
    assert http_get(basic, "/admin/v2/tenants", header=f"Bearer {stripped}").status_code == 401


def test_raw_http_basic_header_forms(basic):
    # Pulsar's parsing of the header: exactly one space after the scheme, base64 of user:password
    # with exactly one ':'.
    port = int(basic.web.rsplit(":", 1)[1])
    pw = BASIC_USERS["des-user"][0]
    good = base64.b64encode(f"des-user:{pw}".encode()).decode()
    cases = {
        f"Basic {good}": 403,  # authenticated, not allowed to read the permissions
        f"Basic  {good}": 401,
        "Basic " + base64.b64encode(f"des-user:{pw}:x".encode()).decode(): 401,
        "Basic not-base64!": 401,
    }
    for header, want in cases.items():
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall((f"GET /admin/v2/namespaces/{NS}/permissions HTTP/1.1\r\n"
                       f"Host: localhost\r\nAuthorization: {header}\r\n"
                       "Connection: close\r\n\r\n").encode())
            status = int(s.recv(4096).split(b" ", 2)[1])
        assert status == want, (header, status)
