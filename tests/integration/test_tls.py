"""TLS on brokerServicePortTls with the official Python client: pulsar+ssl:// with a trusted CA
and hostname validation, mTLS with AuthenticationTLS, certificate refresh, and the bad input
(plaintext or garbage on the TLS port, a client certificate from another CA, a handshake that
never finishes, an expired or unreadable certificate at start), each counted in
magnetar_tls_errors_total and paid by that connection only."""

from __future__ import annotations

import random
import re
import shutil
import socket
import subprocess
import time

import pulsar
import pytest
import requests

from harness.broker import BrokerError, MagnetarProcess
from harness.tls import TlsCerts, tls_certs, tls_settings  # noqa: F401 (fixture)


def tls_errors(admin_url: str, kind: str) -> int:
    text = requests.get(f"{admin_url}/metrics", timeout=10).text
    m = re.search(rf'^magnetar_tls_errors_total{{error="{kind}"}} (\S+)$', text, re.M)
    assert m, text[-2000:]
    return int(float(m.group(1)))


def tls_client(url: str, certs: TlsCerts, who: str | None = None,
               trust: str | None = None, timeout_s: int = 10) -> pulsar.Client:
    auth = pulsar.AuthenticationTLS(certs.cert(who), certs.key(who)) if who else None
    return pulsar.Client(url, authentication=auth, tls_trust_certs_file_path=trust or certs.ca,
                         tls_validate_hostname=True, operation_timeout_seconds=timeout_s,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def round_trip(client: pulsar.Client, topic: str, n: int = 20) -> list[bytes]:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(n):
        producer.send(f"m-{i}".encode() * 200)  # several TLS records per batch
    got = []
    for _ in range(n):
        msg = consumer.receive(timeout_millis=10000)
        got.append(msg.data())
        consumer.acknowledge(msg)
    return got


def test_produce_consume_over_tls(magnetar, tls_certs):  # noqa: F811
    proc = magnetar(tls_settings(tls_certs))
    url = proc.endpoint.service_url_tls
    assert url and url.startswith("pulsar+ssl://localhost:")
    client = tls_client(url, tls_certs)
    try:
        got = round_trip(client, "persistent://public/default/tls-basic")
        assert got == [f"m-{i}".encode() * 200 for i in range(20)]
    finally:
        client.close()
    # The plaintext port serves beside it.
    plain = pulsar.Client(proc.endpoint.service_url)
    try:
        plain.create_producer("persistent://public/default/tls-basic").send(b"plain")
    finally:
        plain.close()


def test_mtls_required_refuses_other_ca_and_missing_cert(magnetar, tls_certs):  # noqa: F811
    proc = magnetar(tls_settings(tls_certs, tlsRequireTrustedClientCertOnConnect=True))
    url = proc.endpoint.service_url_tls
    good = tls_client(url, tls_certs, "client")
    try:
        producer = good.create_producer("persistent://public/default/tls-mtls")
        producer.send(b"before")
        before = tls_errors(proc.admin_url, "untrusted_cert")
        for who in ("other-client", None):
            bad = tls_client(url, tls_certs, who, timeout_s=3)
            try:
                with pytest.raises(Exception):
                    bad.create_producer("persistent://public/default/tls-mtls")
            finally:
                bad.close()
        assert tls_errors(proc.admin_url, "untrusted_cert") >= before + 2
        producer.send(b"after")  # the good connection did not pay
    finally:
        good.close()


def test_client_without_trust_of_our_ca_fails(magnetar, tls_certs):  # noqa: F811
    proc = magnetar(tls_settings(tls_certs))
    client = tls_client(proc.endpoint.service_url_tls, tls_certs,
                        trust=tls_certs.path("other-ca.pem"), timeout_s=3)
    try:
        with pytest.raises(Exception):
            client.create_producer("persistent://public/default/tls-untrusted-broker")
    finally:
        client.close()


def read_until_closed(sock: socket.socket, timeout_s: float) -> float:
    """Seconds until the peer closed the connection (EOF or reset)."""
    sock.settimeout(timeout_s)
    t0 = time.time()
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return time.time() - t0


def tls_port(proc: MagnetarProcess) -> int:
    return int(proc.endpoint.service_url_tls.rsplit(":", 1)[1])


@pytest.mark.parametrize("payload", [
    # A Pulsar CONNECT frame (size, command size, then a protobuf) as a pulsar:// client sends.
    bytes.fromhex("0000001a000000160802" "1a12") + b"\x0a\x0e2.10.0-python\x10\x13",
    # Garbage, fixed so that a run cannot draw an SSLv2-style header (high bit, then type 1 in
    # the third byte), which OpenSSL answers by waiting for up to 32 KB of record.
    b"\x00" + random.Random(20261205).randbytes(2047),
])
def test_plaintext_or_garbage_on_tls_port(magnetar, tls_certs, payload):  # noqa: F811
    proc = magnetar(tls_settings(tls_certs))
    before = tls_errors(proc.admin_url, "handshake_failed")
    with socket.create_connection(("127.0.0.1", tls_port(proc))) as s:
        s.sendall(payload)
        assert read_until_closed(s, 5) < 5
    assert tls_errors(proc.admin_url, "handshake_failed") == before + 1
    # A pulsar:// client on the TLS port gives up; the broker keeps serving TLS clients.
    wrong = pulsar.Client(f"pulsar://127.0.0.1:{tls_port(proc)}", operation_timeout_seconds=3)
    try:
        with pytest.raises(Exception):
            wrong.create_producer("persistent://public/default/tls-wrong")
    finally:
        wrong.close()
    client = tls_client(proc.endpoint.service_url_tls, tls_certs)
    try:
        assert round_trip(client, "persistent://public/default/tls-after-garbage", 3)
    finally:
        client.close()


def test_handshake_that_never_finishes_is_closed_after_10s(magnetar, tls_certs):  # noqa: F811
    proc = magnetar(tls_settings(tls_certs))
    before = tls_errors(proc.admin_url, "handshake_timeout")
    with socket.create_connection(("127.0.0.1", tls_port(proc))) as idle, \
         socket.create_connection(("127.0.0.1", tls_port(proc))) as partial:
        partial.sendall(b"\x16\x03\x01\x02\x00\x01")  # the start of a ClientHello, no more
        # Meanwhile a real client is served at once.
        client = tls_client(proc.endpoint.service_url_tls, tls_certs)
        try:
            t0 = time.time()
            assert round_trip(client, "persistent://public/default/tls-slowloris", 3)
            assert time.time() - t0 < 5
        finally:
            client.close()
        waited = read_until_closed(idle, 20)
        assert 5 < waited < 15
        assert read_until_closed(partial, 5) < 5
    assert tls_errors(proc.admin_url, "handshake_timeout") == before + 2


@pytest.mark.parametrize("which,expect", [
    ("expired", "the certificate expired on Jan  2"),
    ("unreadable", "tlsKeyFilePath '"),
])
def test_bad_certificate_file_at_start(tls_certs, which, expect):  # noqa: F811
    if which == "expired":
        settings = tls_settings(tls_certs) + [
            f"tlsCertificateFilePath={tls_certs.cert('expired')}",
            f"tlsKeyFilePath={tls_certs.key('expired')}"]
    else:
        settings = tls_settings(tls_certs) + ["tlsKeyFilePath=/nonexistent/broker.key"]
    with MagnetarProcess(settings) as proc:
        with pytest.raises(BrokerError):
            proc.start(timeout_s=15)
        with open(proc.log_path) as f:
            log = f.read()
        assert "cannot start TLS" in log and expect in log, log[-2000:]
        assert proc.proc.returncode == 2


def test_new_certificates_are_used_without_restart(magnetar, tls_certs, tmp_path):  # noqa: F811
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    shutil.copy(tls_certs.cert("broker"), cert)
    shutil.copy(tls_certs.key("broker"), key)
    proc = magnetar(tls_settings(tls_certs) + [
        f"tlsCertificateFilePath={cert}", f"tlsKeyFilePath={key}",
        "tlsCertRefreshCheckDurationSec=1"])
    url = proc.endpoint.service_url_tls
    old = tls_client(url, tls_certs)  # connected with the first certificate, stays connected
    producer = old.create_producer("persistent://public/default/tls-refresh")
    # The broker's new certificate is signed by the other CA: only clients trusting it connect.
    shutil.copy(tls_certs.cert("broker2"), cert)
    shutil.copy(tls_certs.key("broker2"), key)
    time.sleep(1.5)
    new = tls_client(url, tls_certs, trust=tls_certs.path("other-ca.pem"))
    stale = tls_client(url, tls_certs, timeout_s=3)
    try:
        new.create_producer("persistent://public/default/tls-refresh").send(b"new cert")
        with pytest.raises(Exception):
            stale.create_producer("persistent://public/default/tls-refresh")
        producer.send(b"old connection still up")
    finally:
        for c in (old, new, stale):
            c.close()
    with open(proc.log_path) as f:
        assert "TLS certificates reloaded" in f.read()


def test_tls_protocols_limit_the_version(magnetar, tls_certs):  # noqa: F811
    proc = magnetar(tls_settings(tls_certs, tlsProtocols="TLSv1.2"))
    out = subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{tls_port(proc)}", "-CAfile",
         tls_certs.ca, "-verify_return_error"], input=b"", capture_output=True, timeout=20)
    text = out.stdout.decode(errors="replace")
    assert re.search(r"Protocol *: TLSv1.2", text), text[-1500:]
    assert "CN = localhost" in text and "Verify return code: 0 (ok)" in text, text[-1500:]
