"""MQTT transport and limits (issue 51, docs/mqtt.md): mqtt+ssl:// listeners with the broker's TLS
settings and the TLS client certificate's CN as the role (AuthenticationProviderTls), with
mosquitto_pub/mosquitto_sub and paho-mqtt, 3.1.1 and 5.0, a wrong CA or no client certificate
refused; mqttMaxConnections with its CONNACK reasons; the MQTT metrics on /metrics; kill -9 under
QoS 1 load from several publishers loses no PUBACKed message.

The kill -9 test is short for CI; the longer form (more publishers, rounds and messages):
  MAGNETAR_MQTT_KILL9_ROUNDS=10 MAGNETAR_MQTT_KILL9_PUBLISHERS=8 \\
    MAGNETAR_MQTT_KILL9_MESSAGES=5000 .venv/bin/python -m pytest -q \\
    tests/integration/test_mqtt_transport.py -k kill9
"""

from __future__ import annotations

import os
import queue
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator

import paho.mqtt.client as mqtt
import pulsar
import pytest
import requests

from harness.broker import MagnetarProcess
from harness.tls import TlsCerts, generate_certs, tls_settings
from harness.util import eventually, metric_sum

V311, V5 = mqtt.MQTTv311, mqtt.MQTTv5
VERSIONS = [pytest.param(V311, id="3.1.1"), pytest.param(V5, id="5.0")]
TLS_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"


def pulsar_topic(mqtt_topic: str) -> str:
    import urllib.parse
    return "persistent://public/default/" + urllib.parse.quote_plus(mqtt_topic, safe="*")


@pytest.fixture(scope="module")
def certs() -> Iterator[TlsCerts]:
    d = tempfile.mkdtemp(prefix="magnetar-mqtt-tls-")
    yield generate_certs(d, client_roles=("admin", "alice"))
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def tls_broker(certs: TlsCerts) -> Iterator[MagnetarProcess]:
    """mqtt+ssl with a trusted client certificate required, the CN as the role, authorization
    on (admin a super user, alice nothing)."""
    proc = MagnetarProcess(tls_settings(
        certs, broker_port=0, mqttListeners="mqtt+ssl://127.0.0.1:0",
        tlsRequireTrustedClientCertOnConnect=True, authenticationEnabled=True,
        authorizationEnabled=True, authenticationProviders=TLS_PROVIDER, superUserRoles="admin"))
    proc.start()
    yield proc
    proc.close()


def admin_client(proc: MagnetarProcess, certs: TlsCerts) -> pulsar.Client:
    return pulsar.Client(proc.endpoint.service_url_tls,
                         authentication=pulsar.AuthenticationTLS(certs.cert("client-admin"),
                                                                 certs.key("client-admin")),
                         tls_trust_certs_file_path=certs.ca, operation_timeout_seconds=10,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def paho(port: int, version: int, ca: str, cert: tuple[str, str] | None,
         client_id: str | None = None) -> tuple[mqtt.Client, queue.Queue]:
    """A paho client over TLS (host name checked: the broker's certificate names 127.0.0.1);
    returns it started and the queue of its CONNACK reason codes ("closed" when the connection
    ended without one, the exception of a handshake that failed in connect())."""
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id or uuid.uuid4().hex[:10],
                    protocol=version)
    c.tls_set(ca_certs=ca, certfile=cert[0] if cert else None, keyfile=cert[1] if cert else None)
    codes: queue.Queue = queue.Queue()
    c.on_connect = lambda _c, _u, _f, rc, _p: codes.put(rc.value)
    # Closed without a CONNACK (TLS 1.3: the broker checks the client certificate after the
    # client's handshake is done, so the refusal comes as an alert after connect()).
    c.on_disconnect = lambda *_a: codes.put("closed")
    try:
        c.connect("127.0.0.1", port, 30)
    except (ssl.SSLError, OSError) as e:
        codes.put(e)
        return c, codes
    c.loop_start()
    return c, codes


@pytest.mark.parametrize("version", VERSIONS)
def test_paho_over_tls_with_a_client_certificate(tls_broker, certs, version):
    """The CN is the role: admin publishes (read back by a Pulsar consumer on pulsar+ssl), alice
    is refused the produce permission (5.0: PUBACK 0x87; 3.1.1: the connection closed)."""
    port = tls_broker.ports["mqttPortTls"]
    topic = f"tls/{uuid.uuid4().hex[:8]}"
    client = admin_client(tls_broker, certs)
    consumer = client.subscribe(pulsar_topic(topic), "s")
    admin = (certs.cert("client-admin"), certs.key("client-admin"))
    c, codes = paho(port, version, certs.ca, admin)
    assert codes.get(timeout=10) == 0
    for i in range(5):
        c.publish(topic, f"m-{i}".encode(), qos=1).wait_for_publish(10)
    got = [consumer.receive(5000).data() for _ in range(5)]
    assert got == [f"m-{i}".encode() for i in range(5)]
    c.disconnect()
    c.loop_stop()
    alice = (certs.cert("client-alice"), certs.key("client-alice"))
    a, codes = paho(port, version, certs.ca, alice)
    assert codes.get(timeout=10) == 0  # authenticated as alice
    acks: queue.Queue = queue.Queue()
    closed = threading.Event()
    a.on_publish = lambda _c, _u, _mid, rc, _p: acks.put(rc.value)
    a.on_disconnect = lambda *_args: closed.set()
    a.publish(topic, b"by-alice", qos=1)
    if version == V5:
        assert acks.get(timeout=10) == 0x87
    else:
        assert closed.wait(10)
    a.loop_stop()
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)
    client.close()


@pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])
def test_mosquitto_clients_over_tls(tls_broker, certs, version):
    if not shutil.which("mosquitto_pub"):
        pytest.skip("mosquitto-clients not installed")
    port = tls_broker.ports["mqttPortTls"]
    topic = f"mtls/{uuid.uuid4().hex[:8]}"
    tls = ["--cafile", certs.ca, "--cert", certs.cert("client-admin"),
           "--key", certs.key("client-admin")]
    # -d: debug lines ("Client ... received SUBACK") on stdout, so publishing waits for the SUBACK;
    # stdbuf -oL: mosquitto_sub's stdout to a pipe is block-buffered, and the SUBACK line would
    # only come when it exits.
    sub = subprocess.Popen(["stdbuf", "-oL", "mosquitto_sub", "-d", "-h", "127.0.0.1", "-p",
                            str(port), "-V", version, "-q", "1", "-t", topic, "-C", "3", "-W",
                            "20", *tls],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert sub.stdout
    for line in sub.stdout:
        if "SUBACK" in line:
            break
    for i in range(3):
        subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-V", version,
                        "-q", "1", "-t", topic, "-m", f"v-{i}", *tls], check=True, timeout=20)
    out, err = sub.communicate(timeout=30)
    got = [ln for ln in out.splitlines() if ln and not ln.startswith("Client ")
           and not ln.startswith("Subscribed")]
    assert got == ["v-0", "v-1", "v-2"], (out, err)


def test_tls_refusals(tls_broker, certs):
    """No client certificate, one from another CA, and a client trusting another CA all fail
    the handshake; mosquitto_pub says so with a nonzero exit."""
    port = tls_broker.ports["mqttPortTls"]
    for cert in (None, (certs.cert("other-client"), certs.key("other-client"))):
        c, codes = paho(port, V5, certs.ca, cert)
        got = codes.get(timeout=10)
        # The handshake fails at once, or (TLS 1.3: the client certificate is checked after the
        # client's Finished) the broker's alert ends the connection before any CONNACK.
        assert got != 0, f"{cert}: CONNACK {got}"
        c.loop_stop()
    c, codes = paho(port, V5, certs.path("other-ca.pem"),
                    (certs.cert("client-admin"), certs.key("client-admin")))
    assert isinstance(codes.get(timeout=10), ssl.SSLError)
    if shutil.which("mosquitto_pub"):
        for tls in (["--cafile", certs.path("other-ca.pem"), "--cert", certs.cert("client-admin"),
                     "--key", certs.key("client-admin")],
                    ["--cafile", certs.ca]):
            r = subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-q", "1",
                                "-t", "x", "-m", "refused", *tls],
                               capture_output=True, text=True, timeout=20)
            assert r.returncode != 0, r


def test_certificate_authentication_without_a_required_certificate(certs):
    """tlsRequireTrustedClientCertOnConnect off: the handshake takes a client without a
    certificate, and CONNECT without a password or certificate is refused (0x86 / 3.1.1 0x04,
    counted); plaintext mqtt:// beside it has no certificate either."""
    proc = MagnetarProcess(tls_settings(
        certs, broker_port=None,
        mqttListeners="mqtt://127.0.0.1:0,mqtt+ssl://127.0.0.1:0", authenticationEnabled=True,
        authenticationProviders=TLS_PROVIDER))
    proc.start()
    try:
        tls_port, plain_port = proc.ports["mqttPortTls"], proc.ports["mqttPort"]
        for version in (V311, V5):
            c, codes = paho(tls_port, version, certs.ca, None)
            assert codes.get(timeout=10) == 0x86
            c.loop_stop()
        c, codes = paho(tls_port, V5, certs.ca,
                        (certs.cert("client-alice"), certs.key("client-alice")))
        assert codes.get(timeout=10) == 0
        c.disconnect()
        c.loop_stop()
        raw = socket.create_connection(("127.0.0.1", plain_port), timeout=5)
        body = b"\x00\x04MQTT\x04\x02\x00\x1e\x00\x01d"
        raw.sendall(bytes([0x10, len(body)]) + body)
        assert recv_all(raw) == b"\x20\x02\x00\x04"
        text = requests.get(proc.endpoint.admin_url + "/metrics", timeout=10).text
        # >= : paho may have tried again before its loop stopped.
        assert metric_sum(text, "magnetar_mqtt_connections_refused_total",
                          reason="authentication") >= 3
        assert metric_sum(text, "pulsar_authentication_success_total",
                          auth_method="tls") >= 1
    finally:
        proc.close()


def recv_all(s: socket.socket, timeout_s: float = 5.0) -> bytes:
    s.settimeout(timeout_s)
    out = b""
    while True:
        try:
            chunk = s.recv(4096)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        out += chunk
    s.close()
    return out


def test_max_connections_and_metrics():
    """mqttMaxConnections=2: the third CONNECT is refused with MQTT 5 CONNACK 0x97 (reason string
    naming the setting) / 3.1.1 0x03; a slot freed is taken again. /metrics counts clients,
    publishes and deliveries with their bytes, subscriptions and refusals."""
    proc = MagnetarProcess(["mqttListeners=mqtt://127.0.0.1:0", "mqttMaxConnections=2"])
    proc.start()
    clients = []
    try:
        port = proc.ports["mqttPort"]

        def metrics(name: str, **labels: str) -> float:
            text = requests.get(proc.endpoint.admin_url + "/metrics", timeout=10).text
            return metric_sum(text, name, **labels)
        base_send = metrics("mop_send_count")
        topic = f"lim/{uuid.uuid4().hex[:8]}"
        sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="lim-sub", protocol=V5)
        got: queue.Queue = queue.Queue()
        subacks: queue.Queue = queue.Queue()
        sub.on_message = lambda _c, _u, m: got.put(m.payload)
        sub.on_subscribe = lambda *_a: subacks.put(1)
        sub.connect("127.0.0.1", port, 30)
        sub.loop_start()
        clients.append(sub)
        sub.subscribe(topic, 1)
        subacks.get(timeout=10)
        pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="lim-pub", protocol=V311)
        pub.connect("127.0.0.1", port, 30)
        pub.loop_start()
        clients.append(pub)
        for i in range(4):
            pub.publish(topic, b"x" * (10 + i), qos=1).wait_for_publish(10)
        assert sorted(len(got.get(timeout=10)) for _ in range(4)) == [10, 11, 12, 13]
        # A third client: 5.0 gets 0x97 with the reason string, 3.1.1 0x03.
        third = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="lim-3", protocol=V5)
        answer: queue.Queue = queue.Queue()
        third.on_connect = lambda _c, _u, _f, rc, props: answer.put(
            (rc.value, getattr(props, "ReasonString", "")))
        third.connect("127.0.0.1", port, 30)
        third.loop_start()
        rc, why = answer.get(timeout=10)
        third.loop_stop()
        assert rc == 0x97 and "mqttMaxConnections" in why, (rc, why)
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        body = b"\x00\x04MQTT\x04\x02\x00\x1e\x00\x02r3"
        raw.sendall(bytes([0x10, len(body)]) + body)
        assert recv_all(raw) == b"\x20\x02\x00\x03"
        assert metrics("mop_active_client_count") == 2
        assert metrics("mop_maximum_client_count") == 2
        assert metrics("magnetar_mqtt_connections_refused_total", reason="max_connections") >= 2
        assert metrics("mop_send_count") - base_send == 4
        assert metrics("mop_send_bytes") >= 46
        assert metrics("mop_received_count") >= 4 and metrics("mop_received_bytes") >= 46
        assert metrics("magnetar_mqtt_subscriptions_total") >= 1
        # A slot freed is taken again.
        pub.disconnect()
        pub.loop_stop()
        clients.remove(pub)

        def one_open() -> None:
            assert metrics("mop_active_client_count") == 1
        eventually(one_open, timeout_s=10, interval_s=0.1)
        again = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="lim-4", protocol=V311)
        ok: queue.Queue = queue.Queue()
        again.on_connect = lambda _c, _u, _f, rc, _p: ok.put(rc.value)
        again.connect("127.0.0.1", port, 30)
        again.loop_start()
        clients.append(again)
        assert ok.get(timeout=10) == 0
    finally:
        for c in clients:
            c.disconnect()
            c.loop_stop()
        proc.close()


def test_kill9_under_qos1_load_from_several_publishers(tmp_path):
    """Several paho publishers (3.1.1 and 5.0) at QoS 1 on a few topics; SIGKILL mid-load; after
    the restart a Pulsar reader finds every PUBACKed message (journalSyncData=true)."""
    rounds = int(os.environ.get("MAGNETAR_MQTT_KILL9_ROUNDS", "1"))
    publishers = int(os.environ.get("MAGNETAR_MQTT_KILL9_PUBLISHERS", "4"))
    messages = int(os.environ.get("MAGNETAR_MQTT_KILL9_MESSAGES", "1500"))
    # Retention: the topics have no subscription, so without it a ledger a restart closed is
    # trimmed as consumed (Pulsar does the same) and a later round could not read the earlier
    # rounds' messages.
    proc = MagnetarProcess(["journalSyncData=true", "mqttListeners=mqtt://127.0.0.1:0",
                            "defaultRetentionTimeInMinutes=60", "defaultRetentionSizeInMB=1024"],
                           workdir=str(tmp_path), data_in_workdir=False)
    proc.start()
    topics = [f"kill9/{uuid.uuid4().hex[:6]}/{t}" for t in range(2)]
    acked_all: dict[str, set[bytes]] = {t: set() for t in topics}
    try:
        for rnd in range(rounds):
            port = proc.ports["mqttPort"]
            pubs = []
            for p in range(publishers):
                version = V5 if p % 2 else V311
                c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"k9-{rnd}-{p}",
                                protocol=version)
                c.max_inflight_messages_set(50)
                acked: set[int] = set()
                c.on_publish = lambda _c, _u, mid, _rc, _p, a=acked: a.add(mid)
                c.connect("127.0.0.1", port, 30)
                c.loop_start()
                pubs.append((c, acked, {}))
            for i in range(messages):
                for p, (c, _acked, sent) in enumerate(pubs):
                    topic = topics[(i + p) % len(topics)]
                    payload = f"r{rnd}-p{p}-{i}".encode()
                    sent[c.publish(topic, payload, qos=1).mid] = (topic, payload)
                if i == messages // 3:
                    def some_acked(pubs: list = pubs) -> None:
                        assert sum(len(a) for _c, a, _s in pubs) > publishers * 100
                    eventually(some_acked, timeout_s=20, interval_s=0.05)
                    proc.kill()  # SIGKILL with PUBLISHes in flight on every connection
                    break
            total = 0
            for c, acked, sent in pubs:
                c.loop_stop()
                for mid in list(acked):
                    topic, payload = sent[mid]
                    acked_all[topic].add(payload)
                    total += 1
            assert total > publishers * 100
            proc.start()
            client = pulsar.Client(proc.endpoint.service_url, operation_timeout_seconds=10)
            for topic in topics:
                reader = client.create_reader(pulsar_topic(topic), pulsar.MessageId.earliest)
                stored = set()
                while reader.has_message_available():
                    stored.add(reader.read_next(5000).data())
                missing = acked_all[topic] - stored
                assert not missing, (rnd, topic, len(missing), sorted(missing)[:5])
            client.close()
    finally:
        proc.close()
