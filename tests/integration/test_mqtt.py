"""MQTT on the broker (issue 51, docs/mqtt.md) with clients we did not write: paho-mqtt (PyPI) and
mosquitto_pub/mosquitto_sub (Debian's mosquitto-clients), MQTT 3.1.1 and 5.0, QoS 0 and 1, with
the official Pulsar Python client on the other side; a persistent session resumed; hostile
bytes answered with the reason the client is told; kill -9 under QoS 1 loses no PUBACKed
message."""

from __future__ import annotations

import queue
import shutil
import socket
import subprocess
import time
import urllib.parse
import uuid
from collections.abc import Iterator

import paho.mqtt.client as mqtt
import pulsar
import pytest
import requests
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from harness.broker import MagnetarProcess, magnetar_bin
from harness.util import eventually

V311, V5 = mqtt.MQTTv311, mqtt.MQTTv5


def pulsar_topic(mqtt_topic: str) -> str:
    """MoP's default mapping: persistent://public/default/{URL-encoded MQTT topic}."""
    return "persistent://public/default/" + urllib.parse.quote_plus(mqtt_topic, safe="*")


class Client:
    """A paho client on its own network thread; received messages queue up in `messages`."""

    def __init__(self, port: int, version: int, client_id: str | None = None,
                 clean: bool = True, keepalive: int = 30) -> None:
        self.client_id = client_id or f"c-{uuid.uuid4().hex[:8]}"
        kwargs = {} if version == V5 else {"clean_session": clean}
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id,
                             protocol=version, **kwargs)
        self.version = version
        self.messages: queue.Queue[mqtt.MQTTMessage] = queue.Queue()
        self.connack: queue.Queue[tuple[bool, int]] = queue.Queue()
        self.subacks: queue.Queue[list] = queue.Queue()
        self.acked: set[int] = set()
        self.c.on_message = lambda _c, _u, m: self.messages.put(m)
        self.c.on_connect = lambda _c, _u, flags, rc, _p: self.connack.put(
            (flags.session_present, rc.value))
        self.c.on_subscribe = lambda _c, _u, _mid, rcs, _p: self.subacks.put(rcs)
        self.c.on_publish = lambda _c, _u, mid, _rc, _p: self.acked.add(mid)
        props = None
        if version == V5:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = 0 if clean else 3600
            self.c.connect("127.0.0.1", port, keepalive, clean_start=clean, properties=props)
        else:
            self.c.connect("127.0.0.1", port, keepalive)
        self.c.loop_start()
        self.session_present, rc = self.connack.get(timeout=10)
        assert rc == 0, f"CONNACK {rc}"

    def subscribe(self, topic_filter: str, qos: int = 1) -> list:
        self.c.subscribe(topic_filter, qos)
        return self.subacks.get(timeout=10)

    def publish(self, topic: str, payload: bytes, qos: int = 1,
                props: Properties | None = None) -> mqtt.MQTTMessageInfo:
        info = self.c.publish(topic, payload, qos=qos, properties=props)
        return info

    def receive(self, n: int, timeout_s: float = 10.0) -> list[mqtt.MQTTMessage]:
        got = []
        deadline = time.time() + timeout_s
        while len(got) < n:
            got.append(self.messages.get(timeout=max(0.1, deadline - time.time())))
        return got

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


@pytest.fixture(scope="module")
def broker() -> Iterator[MagnetarProcess]:
    proc = MagnetarProcess(["mqttListeners=mqtt://127.0.0.1:0"])
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture(scope="module")
def pclient(broker: MagnetarProcess) -> Iterator[pulsar.Client]:
    c = pulsar.Client(broker.endpoint.service_url, operation_timeout_seconds=10)
    yield c
    c.close()


def mqtt_port(broker: MagnetarProcess) -> int:
    return broker.ports["mqttPort"]


@pytest.mark.parametrize("version", [V311, V5], ids=["3.1.1", "5.0"])
def test_paho_publish_qos0_and_qos1_reaches_a_pulsar_consumer(broker, pclient, version):
    topic = f"sensors/{uuid.uuid4().hex[:8]}/temp"
    consumer = pclient.subscribe(pulsar_topic(topic), "pulsar-side")
    c = Client(mqtt_port(broker), version)
    try:
        props = None
        if version == V5:
            props = Properties(PacketTypes.PUBLISH)
            props.UserProperty = [("unit", "C")]
            props.ContentType = "text/plain"
        sent = []
        for i in range(10):
            payload = f"reading-{i}".encode()
            info = c.publish(topic, payload, qos=i % 2, props=props)
            if i % 2:
                info.wait_for_publish(10)  # the PUBACK: the entry is durable
                assert info.is_published()
            sent.append(payload)
        got = [consumer.receive(10000) for _ in sent]
        assert [m.data() for m in got] == sent
        if version == V5:
            p = got[0].properties()
            assert p["MQTT_PROPERTIES_38_unit"] == "C"
            assert p["MQTT_PROPERTIES_3_"] == "text/plain"
    finally:
        c.close()
        consumer.close()


@pytest.mark.parametrize("version", [V311, V5], ids=["3.1.1", "5.0"])
def test_pulsar_producer_reaches_paho_wildcard_subscribers(broker, pclient, version):
    base = f"dev/{uuid.uuid4().hex[:8]}"
    before = pclient.create_producer(pulsar_topic(f"{base}/a/state"))  # exists before SUBSCRIBE
    c = Client(mqtt_port(broker), version)
    try:
        assert c.subscribe(f"{base}/+/state", 1)[0].value == 1
        after = pclient.create_producer(pulsar_topic(f"{base}/b/state"))  # created after it
        exact = Client(mqtt_port(broker), version)
        assert exact.subscribe(f"{base}/a/state", 0)[0].value == 0
        before.send(b"from-a", properties={"k": "v"})
        got_exact = exact.receive(1)[0]
        assert (got_exact.topic, got_exact.payload, got_exact.qos) == (f"{base}/a/state",
                                                                      b"from-a", 0)
        m = c.receive(1)[0]
        assert (m.topic, m.payload, m.qos) == (f"{base}/a/state", b"from-a", 1)
        if version == V5:
            assert ("k", "v") in m.properties.UserProperty
        # The topic created after the filter: subscribed when it appears, from its start.
        after.send(b"from-b")
        m = c.receive(1, timeout_s=15)[0]
        assert (m.topic, m.payload) == (f"{base}/b/state", b"from-b")
        exact.close()
        # PUBACK acknowledged them: the subscription named by the client id has no backlog.
        stats_url = (f"{broker.admin_url}/admin/v2/persistent/public/default/"
                     f"{urllib.parse.quote(urllib.parse.quote_plus(base + '/a/state'))}/stats")

        def no_backlog() -> None:
            subs = requests.get(stats_url, timeout=5).json()["subscriptions"]
            assert subs[c.client_id]["msgBacklog"] == 0, subs
        eventually(no_backlog, timeout_s=10)
    finally:
        c.close()


def test_qos1_backlog_is_bounded_by_the_in_flight_window_and_redelivered(broker, pclient):
    # A 5.0 subscriber with Receive Maximum 2 that never acknowledges gets 2 messages, no more;
    # after it goes away, the next connection with the same client id gets them all.
    topic = f"window/{uuid.uuid4().hex[:8]}"
    producer = pclient.create_producer(pulsar_topic(topic))
    client_id = f"win-{uuid.uuid4().hex[:6]}"
    raw = socket.create_connection(("127.0.0.1", mqtt_port(broker)), timeout=10)
    # CONNECT 5.0, clean start, keep alive 30, session expiry 3600, Receive Maximum 2.
    props = bytes([0x11, 0, 0, 0x0E, 0x10, 0x21, 0, 2])
    cid = client_id.encode()
    body = (b"\x00\x04MQTT\x05\x02\x00\x1e" + bytes([len(props)]) + props +
            len(cid).to_bytes(2, "big") + cid)
    raw.sendall(bytes([0x10, len(body)]) + body)
    assert raw.recv(2)[0] == 0x20
    raw.recv(1000)
    flt = topic.encode()
    sub = b"\x00\x01\x00" + len(flt).to_bytes(2, "big") + flt + b"\x01"
    raw.sendall(bytes([0x82, len(sub)]) + sub)
    time.sleep(0.3)
    raw.recv(1000)  # SUBACK
    for i in range(5):
        producer.send(f"m{i}".encode())
    time.sleep(1.0)
    raw.settimeout(1.0)
    data = b""
    try:
        while True:
            chunk = raw.recv(4096)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    publishes = data.count(flt)  # each PUBLISH names the topic once
    assert publishes == 2, data
    raw.close()
    c = Client(mqtt_port(broker), V5, client_id=client_id, clean=False)
    try:
        c.subscribe(topic, 1)
        got = sorted(m.payload for m in c.receive(5))
        assert got == [f"m{i}".encode() for i in range(5)]
    finally:
        c.close()


@pytest.mark.parametrize("version", [V311, V5], ids=["3.1.1", "5.0"])
def test_persistent_session_resumes_after_reconnect(broker, pclient, version):
    topic = f"resume/{uuid.uuid4().hex[:8]}"
    client_id = f"resume-{uuid.uuid4().hex[:6]}"
    c = Client(mqtt_port(broker), version, client_id=client_id, clean=False)
    c.subscribe(topic, 1)
    c.close()
    producer = pclient.create_producer(pulsar_topic(topic))
    for i in range(5):
        producer.send(f"offline-{i}".encode())
    # Back with clean session 0 and no SUBSCRIBE: the session's subscription is restored and
    # its Pulsar subscription (named by the client id) kept what came meanwhile.
    c = Client(mqtt_port(broker), version, client_id=client_id, clean=False)
    try:
        assert c.session_present
        got = [m.payload for m in c.receive(5)]
        assert got == [f"offline-{i}".encode() for i in range(5)]
    finally:
        c.close()
    # A clean session forgets it.
    c = Client(mqtt_port(broker), version, client_id=client_id, clean=True)
    assert not c.session_present
    c.close()


needs_mosquitto = pytest.mark.skipif(
    not shutil.which("mosquitto_pub") or not shutil.which("mosquitto_sub"),
    reason="mosquitto-clients not installed (scripts/install-test-deps.sh)")


@needs_mosquitto
@pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])
def test_mosquitto_clients_publish_and_subscribe(broker, pclient, version):
    base = f"mq/{uuid.uuid4().hex[:8]}"
    port = str(mqtt_port(broker))
    sub = subprocess.Popen(
        ["mosquitto_sub", "-h", "127.0.0.1", "-p", port, "-V", version, "-q", "1", "-t",
         f"{base}/#", "-C", "3", "-v", "-W", "20", "-i", f"msub-{version}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    consumer = pclient.subscribe(pulsar_topic(f"{base}/x"), "pulsar-side")
    try:
        # The wildcard filter sees the topic once it exists: create it first, wait for the SUBACK.
        pclient.create_producer(pulsar_topic(f"{base}/x")).close()
        time.sleep(1.0)
        for i in range(3):
            subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", port, "-V", version, "-q",
                            "1", "-t", f"{base}/x", "-m", f"hello-{i}"], check=True, timeout=10)
        out, err = sub.communicate(timeout=25)
        assert sub.returncode == 0, err
        assert out.splitlines() == [f"{base}/x hello-{i}" for i in range(3)]
        assert [consumer.receive(10000).data() for _ in range(3)] == [
            f"hello-{i}".encode() for i in range(3)]
    finally:
        if sub.poll() is None:
            sub.kill()
        consumer.close()


def raw_connect(port: int, version: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    body = b"\x00\x04MQTT" + bytes([version]) + b"\x02\x00\x1e"
    if version == 5:
        body += b"\x00"
    body += b"\x00\x03raw"
    s.sendall(bytes([0x10, len(body)]) + body)
    assert s.recv(2)[0] == 0x20  # CONNACK
    s.recv(100)
    return s


def read_until_closed(s: socket.socket, timeout_s: float = 5.0) -> bytes:
    s.settimeout(timeout_s)
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            return data
        data += chunk


@pytest.mark.parametrize("bad,reason", [
    (b"\x30\xff\xff\xff\xff\x01", 0x81),          # a fifth remaining-length byte
    (b"\x30\xff\xff\xff\x7f", 0x95),              # 256 MiB announced: over maxFrameSize
    (b"\x80\x00", 0x81),                          # SUBSCRIBE with flags 0 (must be 2)
    (b"\x82\x00", 0x81),                          # SUBSCRIBE without its packet id
    (b"\x30\x05\x00\x02\xc0\xaf\x00", 0x81),      # topic name of bad UTF-8
    (b"\x34\x04\x00\x01t\x00", 0x81),             # QoS 2 PUBLISH, truncated before its id
])
def test_hostile_packets_disconnect_with_their_reason(broker, bad, reason):
    s = raw_connect(mqtt_port(broker), 5)
    s.sendall(bad)
    data = read_until_closed(s)
    assert data[:1] == b"\xe0", data  # DISCONNECT
    assert data[2] == reason, data
    # 3.1.1 has no reason codes: the connection just closes.
    s = raw_connect(mqtt_port(broker), 4)
    s.sendall(bad)
    assert read_until_closed(s) == b""
    # The broker goes on serving.
    c = Client(mqtt_port(broker), V311)
    c.close()


def test_hostile_connects(broker):
    port = mqtt_port(broker)
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"\xc0\x00")  # PINGREQ before CONNECT
    assert read_until_closed(s) == b""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"\x10\x0c\x00\x04MQTT\x03\x02\x00\x1e\x00\x00")  # protocol level 3
    assert read_until_closed(s) == b"\x20\x02\x00\x01"  # CONNACK: unacceptable version


def test_keep_alive_is_enforced(broker):
    s = socket.create_connection(("127.0.0.1", mqtt_port(broker)), timeout=5)
    body = b"\x00\x04MQTT\x05\x02\x00\x01\x00\x00\x02ka"  # keep alive 1 s
    s.sendall(bytes([0x10, len(body)]) + body)
    start = time.time()
    data = read_until_closed(s, timeout_s=10)
    took = time.time() - start
    assert data[0] == 0x20
    assert b"\xe0" in data and data[data.index(b"\xe0") + 2] == 0x8D, data  # Keep Alive timeout
    assert 1.4 <= took < 4.0, took


def test_kill9_under_qos1_loses_no_acknowledged_message(tmp_path):
    proc = MagnetarProcess(["journalSyncData=true", "mqttListeners=mqtt://127.0.0.1:0"],
                           workdir=str(tmp_path), data_in_workdir=False)
    proc.start()
    topic = f"crash/{uuid.uuid4().hex[:8]}"
    try:
        c = Client(proc.ports["mqttPort"], V311)
        infos = {}
        for i in range(2000):
            payload = f"p-{i}".encode()
            infos[payload] = c.publish(topic, payload, qos=1)
            if i == 600:
                def some_acked() -> None:
                    assert len(c.acked) > 200
                eventually(some_acked, timeout_s=10, interval_s=0.05)
                proc.kill()  # SIGKILL with PUBLISHes in flight
                break
        c.c.loop_stop()
        acked = {p for p, info in infos.items() if info.mid in c.acked}
        assert len(acked) > 200
        proc.start()
        client = pulsar.Client(proc.endpoint.service_url, operation_timeout_seconds=10)
        reader = client.create_reader(pulsar_topic(topic), pulsar.MessageId.earliest)
        stored = set()
        while reader.has_message_available():
            stored.add(reader.read_next(5000).data())
        client.close()
        assert acked <= stored, sorted(acked - stored)[:10]
    finally:
        proc.close()


def test_token_authentication_and_topic_authorization(tmp_path):
    """With the broker's token authentication on, the CONNECT password carries the token; a bad
    or missing one gets CONNACK 0x86 (5.0) / 0x04 (3.1.1); a role without produce permission
    gets PUBACK 0x87 (5.0)."""
    key_file = str(tmp_path / "secret.key")

    def tokens(*args: str) -> str:
        return subprocess.run([magnetar_bin(), "tokens", *args], check=True,
                              capture_output=True, text=True).stdout.strip()
    tokens("create-secret-key", "--output", key_file)
    admin = tokens("create", "--secret-key", "file://" + key_file, "--subject", "admin")
    alice = tokens("create", "--secret-key", "file://" + key_file, "--subject", "alice")
    proc = MagnetarProcess([
        "mqttListeners=mqtt://127.0.0.1:0", "authenticationEnabled=true",
        "authorizationEnabled=true",
        "authenticationProviders=org.apache.pulsar.broker.authentication."
        "AuthenticationProviderToken",
        "tokenSecretKey=file://" + key_file, "superUserRoles=admin",
        "brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters=token:" + admin])
    proc.start()
    try:
        port = proc.ports["mqttPort"]
        # 3.1.1's return code 4 on the wire (paho reports it as 0x86, checked below).
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        body = b"\x00\x04MQTT\x04\xc2\x00\x1e\x00\x01d\x00\x01u\x00\x03bad"
        raw.sendall(bytes([0x10, len(body)]) + body)
        assert read_until_closed(raw) == b"\x20\x02\x00\x04"
        for version, refused in ((V311, 0x86), (V5, 0x86)):
            c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=version)
            codes: queue.Queue[int] = queue.Queue()
            c.on_connect = lambda _c, _u, _f, rc, _p, q=codes: q.put(rc.value)
            c.username_pw_set("device", "not-a-token")
            c.connect("127.0.0.1", port, 30)
            c.loop_start()
            assert codes.get(timeout=10) == refused
            c.loop_stop()
        topic = f"auth/{uuid.uuid4().hex[:8]}"
        ok = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=V5)
        ok.username_pw_set("device", admin)
        ok.connect("127.0.0.1", port, 30)
        ok.loop_start()
        ok.publish(topic, b"by-admin", qos=1).wait_for_publish(10)
        ok.disconnect()
        ok.loop_stop()
        denied = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=V5)
        acks: queue.Queue[int] = queue.Queue()
        denied.on_publish = lambda _c, _u, _mid, rc, _p: acks.put(rc.value)
        denied.username_pw_set("device", alice)
        denied.connect("127.0.0.1", port, 30)
        denied.loop_start()
        denied.publish(topic, b"by-alice", qos=1)
        assert acks.get(timeout=10) == 0x87
        denied.disconnect()
        denied.loop_stop()
        client = pulsar.Client(proc.endpoint.service_url,
                               authentication=pulsar.AuthenticationToken(admin))
        reader = client.create_reader(pulsar_topic(topic), pulsar.MessageId.earliest)
        assert reader.read_next(5000).data() == b"by-admin"
        assert not reader.has_message_available()
        client.close()
    finally:
        proc.close()
