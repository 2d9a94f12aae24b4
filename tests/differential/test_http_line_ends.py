"""Line ends of an HTTP request's header section, on raw sockets: Jetty (Pulsar's HTTP server)
takes a bare LF as the end of the request line and of each header line, and a bare-LF empty
line as the end of the header (RFC 9112 2.2 lets a recipient do so); a bare CR, or an obsolete
line folding, is a 400. The body after the header is not touched."""

import socket

import pytest


def exchange(admin_url: str, raw: bytes) -> bytes:
    """Sends `raw` on a new connection and reads until the broker closes it."""
    host, port = admin_url.rsplit("/", 1)[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(raw)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def statuses(data: bytes) -> list[int]:
    """The status codes of the responses in `data`, in order."""
    out, pos = [], 0
    while (i := data.find(b"HTTP/1.1 ", pos)) >= 0:
        out.append(int(data[i + 9:i + 12]))
        pos = i + 12
    return out


GET = b"GET /admin/v2/clusters HTTP/1.1"
CLOSE = b"Connection: close"
ACCEPTED = {
    "every line LF": GET + b"\nHost: x\n" + CLOSE + b"\n\n",
    "request line LF": GET + b"\nHost: x\r\n" + CLOSE + b"\r\n\r\n",
    "a header line LF": GET + b"\r\nHost: x\n" + CLOSE + b"\r\n\r\n",
    "empty line LF": GET + b"\r\nHost: x\r\n" + CLOSE + b"\r\n\n",
    "LF then CRLF": GET + b"\r\nHost: x\r\n" + CLOSE + b"\n\r\n",
}
REFUSED = {
    "bare CR": GET + b"\rHost: x\r\n" + CLOSE + b"\r\n\r\n",
    "CR in a value": GET + b"\r\nHost: x\r\nX-A: a\rb\r\n" + CLOSE + b"\r\n\r\n",
    "folded with LF": GET + b"\r\nHost: x\r\nX-A: a\n b\r\n" + CLOSE + b"\r\n\r\n",
    "folded with CRLF and a space": GET + b"\r\nHost: x\r\nX-A: a\r\n b\r\n" + CLOSE
    + b"\r\n\r\n",
    "folded with CRLF and a tab": GET + b"\r\nHost: x\r\nX-A: a\r\n\tb\r\n" + CLOSE
    + b"\r\n\r\n",
}


@pytest.mark.admin
@pytest.mark.parametrize("name", list(ACCEPTED))
def test_bare_lf_ends_a_header_line(admin_url, name):
    data = exchange(admin_url, ACCEPTED[name])
    assert statuses(data) == [200], data[:200]
    assert data.rstrip().endswith(b'["standalone"]'), data[-200:]


@pytest.mark.admin
@pytest.mark.parametrize("name", list(REFUSED))
def test_bare_cr_or_folding_is_refused(admin_url, name):
    assert statuses(exchange(admin_url, REFUSED[name])) == [400]


@pytest.mark.admin
def test_bare_lf_requests_pipelined_with_a_body(admin_url):
    # A POST whose header ends in LF, its JSON body (with a newline in it) read as given, then
    # a second request on the same connection.
    ns = "public/default"
    body = b'{"retentionTimeInMinutes":\n5, "retentionSizeInMB": 6}'
    raw = (b"POST /admin/v2/namespaces/" + ns.encode() + b"/retention HTTP/1.1\nHost: x\n"
           b"Content-Type: application/json\nContent-Length: " + str(len(body)).encode()
           + b"\n\n" + body
           + b"GET /admin/v2/namespaces/" + ns.encode() + b"/retention HTTP/1.1\nHost: x\n"
           + CLOSE + b"\n\n")
    data = exchange(admin_url, raw)
    assert statuses(data) == [204, 200], data[:400]
    assert b'"retentionTimeInMinutes":5' in data.replace(b" ", b""), data[-200:]
    exchange(admin_url, b"DELETE /admin/v2/namespaces/" + ns.encode()
             + b"/retention HTTP/1.1\nHost: x\n" + CLOSE + b"\n\n")
