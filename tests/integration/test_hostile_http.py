"""Hostile HTTP on the admin port: huge or lying Content-Length, bodies over the limit, invalid
JSON on policy updates, chunked garbage, header floods, garbage request lines and slow headers.
Each gets a 4xx answer (Jetty's codes: 400, 413, 431) and a closed connection, or is simply
outlasted; magnetar_http_bad_requests_total{error=...} counts it; the admin API keeps answering
others, the policies set before are unchanged, and a bystander producer/consumer is unaffected."""

import socket
import threading
import time

import pytest
import requests

from hostile_wire import CounterDelta, HostileBroker, bystander, http_bad_requests

POLICY = "/admin/v2/namespaces/public/default/retention"
GOOD_RETENTION = {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}


@pytest.fixture(scope="module")
def broker():
    b = HostileBroker()
    b.start()
    r = requests.post(b.admin_url + POLICY, json=GOOD_RETENTION, timeout=10)
    assert r.status_code == 204, r.text
    yield b
    assert requests.get(b.admin_url + POLICY, timeout=10).json() == GOOD_RETENTION
    b.close()


def web_port(broker):
    return int(broker.admin_url.rsplit(":", 1)[1])


def raw_http(broker, data, timeout=10):
    """Sends raw bytes; returns (status code or None, closed by the server)."""
    s = socket.create_connection(("127.0.0.1", web_port(broker)), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed while we were still sending
        resp = b""
        closed = False
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    closed = True
                    break
                resp += chunk
        except ConnectionResetError:
            closed = True
        except socket.timeout:
            pass
        status = int(resp.split(b" ", 2)[1]) if resp.startswith(b"HTTP/1.1 ") else None
        return status, closed
    finally:
        s.close()


def request(method, path, headers=(), body=b""):
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n"
    head += "".join(f"{h}\r\n" for h in headers)
    return head.encode() + b"\r\n" + body


CASES = [
    # name, bytes, expected status, counter label
    ("huge Content-Length",
     request("POST", POLICY, ["Content-Type: application/json", "Content-Length: 1000000000000"],
             b"{}"), 413, "body_too_large"),
    ("body over the limit",
     request("POST", POLICY, ["Content-Type: application/json", "Content-Length: 2097152"],
             b" " * 2097152), 413, "body_too_large"),
    ("Content-Length overflows 64 bits",
     request("POST", POLICY, ["Content-Length: 184467440737095516160"], b"{}"), 400, "malformed"),
    ("negative Content-Length",
     request("POST", POLICY, ["Content-Length: -1"], b"{}"), 400, "malformed"),
    ("two Content-Lengths",
     request("POST", POLICY, ["Content-Length: 2", "Content-Length: 3"], b"{}"), 400,
     "malformed"),
    ("chunked garbage",
     request("POST", POLICY, ["Transfer-Encoding: chunked"], b"ZZZ\r\nhello\r\n0\r\n\r\n"), 400,
     "malformed"),
    ("chunk size beyond 64 bits",
     request("POST", POLICY, ["Transfer-Encoding: chunked"], b"FFFFFFFFFFFFFFFFFFFF\r\nx\r\n"),
     400, "malformed"),
    ("chunks over the body limit",
     request("POST", POLICY, ["Transfer-Encoding: chunked"], b"200000\r\n" + b"x" * 2097152),
     413, "body_too_large"),
    ("header flood", request("GET", "/admin/v2/clusters", [f"X-Flood-{i}: {'a' * 60}"
                                                           for i in range(2000)]),
     431, "header_too_large"),
    ("one huge header", request("GET", "/admin/v2/clusters", ["X-Big: " + "b" * 100000]),
     431, "header_too_large"),
    ("garbage request line", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,
     400, "malformed"),
    ("bad HTTP version", b"GET / HTTP/9.Z\r\n\r\n", 400, "malformed"),
    ("header without a colon", b"GET / HTTP/1.1\r\nHost localhost\r\n\r\n", 400, "malformed"),
]


@pytest.mark.parametrize("name,data,status,label", CASES, ids=[c[0] for c in CASES])
def test_bad_requests_are_answered_and_closed(broker, name, data, status, label):
    d = CounterDelta(lambda: http_bad_requests(broker.admin_url, label))
    got, closed = raw_http(broker, data)
    if len(data) > 8192 and got is None and closed:
        pass  # closed with our bytes unread: the RST may overtake the 413 (counter checked)
    else:
        assert got == status, f"{name}: HTTP {got}"
    assert closed, f"{name}: the server should close the connection"
    assert d.moved(), f"{name}: magnetar_http_bad_requests_total{{error={label}}}"
    r = requests.get(broker.admin_url + "/admin/v2/clusters", timeout=5)
    assert r.status_code == 200


INVALID_JSON = [
    b"{not json", b"", b"null", b"[]", b'"text"', b"\xff\xfe\x00{",
    # ("60" as a string is a number to Pulsar's Jackson, tests/differential/test_admin_bodies.py)
    b'{"retentionTimeInMinutes": "sixty", "retentionSizeInMB": 100}',
    b'{"retentionTimeInMinutes": 1e999, "retentionSizeInMB": 100}',
    b"[" * 100000 + b"]" * 100000,
    b'{"a":' * 50000 + b"1" + b"}" * 50000,
]


def test_invalid_json_on_policy_updates(broker):
    with bystander(broker.endpoint, "json"):
        d = CounterDelta(lambda: http_bad_requests(broker.admin_url, "bad_request"))
        for body in INVALID_JSON:
            r = requests.post(broker.admin_url + POLICY, data=body, timeout=10,
                              headers={"Content-Type": "application/json"})
            assert r.status_code == 400, (body[:40], r.status_code, r.text[:200])
            if r.headers.get("Content-Type", "").startswith("text/plain"):
                assert "out of range of int" in r.text  # Jackson's text, as Pulsar
            else:
                assert "reason" in r.json()
        r = requests.put(broker.admin_url + "/admin/v2/tenants/hostile-tenant", data=b"{oops",
                         headers={"Content-Type": "application/json"}, timeout=10)
        assert r.status_code == 400
        assert d.moved(at_least=len(INVALID_JSON) + 1)
        assert requests.get(broker.admin_url + POLICY, timeout=10).json() == GOOD_RETENTION
        assert requests.get(broker.admin_url + "/admin/v2/tenants/hostile-tenant",
                            timeout=10).status_code == 404


def test_slow_headers_do_not_block_others(broker):
    """Forty clients trickle a request header and never finish it; meanwhile others are
    answered at once. (The server drops them after its 60 s request timeout, not waited for.)"""
    stop = threading.Event()
    slow = []
    for _ in range(40):
        s = socket.create_connection(("127.0.0.1", web_port(broker)), timeout=5)
        s.sendall(b"GET /admin/v2/clusters HTTP/1.1\r\nHost: localhost\r\n")
        slow.append(s)

    def trickle():
        i = 0
        while not stop.is_set():
            for s in slow:
                try:
                    s.sendall(b"X-Slow-%d: y\r\n" % i)
                except OSError:
                    pass
            i += 1
            time.sleep(0.1)

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    try:
        with bystander(broker.endpoint, "slowhttp"):
            for _ in range(10):
                start = time.time()
                r = requests.get(broker.admin_url + "/admin/v2/clusters", timeout=5)
                assert r.status_code == 200
                assert time.time() - start < 2
                time.sleep(0.1)
            m = requests.get(broker.admin_url + "/metrics", timeout=5)
            assert m.status_code == 200
    finally:
        stop.set()
        t.join()
        for s in slow:
            s.close()
