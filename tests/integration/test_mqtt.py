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
                 clean: bool = True, keepalive: int = 30, session_expiry: int = 3600,
                 will: tuple | None = None) -> None:
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
        self.connack_props = None

        def on_connect(_c, _u, flags, rc, props) -> None:
            self.connack_props = props
            self.connack.put((flags.session_present, rc.value))
        self.c.on_connect = on_connect
        if will:
            self.c.will_set(*will)
        self.c.on_subscribe = lambda _c, _u, _mid, rcs, _p: self.subacks.put(rcs)
        self.c.on_publish = lambda _c, _u, mid, _rc, _p: self.acked.add(mid)
        props = None
        if version == V5:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = 0 if clean else session_expiry
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
                props: Properties | None = None, retain: bool = False) -> mqtt.MQTTMessageInfo:
        info = self.c.publish(topic, payload, qos=qos, properties=props, retain=retain)
        return info

    def receive(self, n: int, timeout_s: float = 10.0) -> list[mqtt.MQTTMessage]:
        got = []
        deadline = time.time() + timeout_s
        while len(got) < n:
            got.append(self.messages.get(timeout=max(0.1, deadline - time.time())))
        return got

    def nothing(self, within_s: float = 1.5) -> None:
        """No message comes within `within_s`."""
        try:
            m = self.messages.get(timeout=within_s)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected message on {m.topic}: {m.payload!r}")

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


@pytest.mark.parametrize("version", [V311, V5], ids=["3.1.1", "5.0"])
def test_restored_wildcard_gets_a_topic_created_while_away(broker, version):
    """A persistent session's wildcard filter and a topic first published to while the client is
    away: after the reconnect (no SUBSCRIBE) the client gets what was PUBACKed meanwhile, the
    topic subscribed from its start as a topic created after the filter is."""
    base = f"away/{uuid.uuid4().hex[:8]}"
    client_id = f"away-{uuid.uuid4().hex[:6]}"
    c = Client(mqtt_port(broker), version, client_id=client_id, clean=False)
    c.subscribe(f"{base}/#", 1)
    c.close()
    pub = Client(mqtt_port(broker), version)
    try:
        infos = [pub.publish(f"{base}/new", f"while-away-{i}".encode()) for i in range(5)]
        for info in infos:
            info.wait_for_publish(10)
        assert len(pub.acked) == 5
    finally:
        pub.close()
    c = Client(mqtt_port(broker), version, client_id=client_id, clean=False)
    try:
        assert c.session_present
        got = [m.payload for m in c.receive(5)]
        assert got == [f"while-away-{i}".encode() for i in range(5)]
    finally:
        c.close()
    Client(mqtt_port(broker), version, client_id=client_id, clean=True).close()


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


# ---- Session state: wills, retained messages, topic aliases, sessions across restarts ----------

def _str(b: bytes) -> bytes:
    return len(b).to_bytes(2, "big") + b


def _varint(n: int) -> bytes:
    out = b""
    while True:
        d, n = n % 128, n // 128
        out += bytes([d | (0x80 if n else 0)])
        if not n:
            return out


def raw_will_connect(port: int, version: int, client_id: str, will_topic: str,
                     will_payload: bytes, keepalive: int = 30, will_retain: bool = False,
                     will_delay: int | None = None, session_expiry: int | None = None,
                     clean: bool = True) -> socket.socket:
    """A CONNECT with a will, written by hand; returns the socket after a successful CONNACK."""
    flags = (0x02 if clean else 0) | 0x04 | (0x20 if will_retain else 0)
    body = _str(b"MQTT") + bytes([version, flags]) + keepalive.to_bytes(2, "big")
    if version == 5:
        props = b"" if session_expiry is None else b"\x11" + session_expiry.to_bytes(4, "big")
        body += _varint(len(props)) + props
    body += _str(client_id.encode())
    if version == 5:
        wprops = b"" if will_delay is None else b"\x18" + will_delay.to_bytes(4, "big")
        body += _varint(len(wprops)) + wprops
    body += _str(will_topic.encode()) + _str(will_payload)
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"\x10" + _varint(len(body)) + body)
    head = s.recv(2)
    assert head[0] == 0x20, head
    ack = s.recv(head[1])
    assert ack[1] == 0, ack  # accepted
    return s


@pytest.mark.parametrize("version", [V311, V5], ids=["3.1.1", "5.0"])
def test_will_is_published_when_the_connection_ends_without_disconnect(broker, version):
    port, level = mqtt_port(broker), 5 if version == V5 else 4
    topic = f"will/{uuid.uuid4().hex[:8]}"
    sub = Client(port, version)
    try:
        sub.subscribe(topic, 1)
        # The socket just closes (a crashed device): the will goes out.
        raw_will_connect(port, level, f"w-{uuid.uuid4().hex[:6]}", topic, b"gone").close()
        m = sub.receive(1)[0]
        assert (m.topic, m.payload, m.retain) == (topic, b"gone", False)
        # A normal DISCONNECT discards it.
        s = raw_will_connect(port, level, f"w-{uuid.uuid4().hex[:6]}", topic, b"said-bye")
        s.sendall(b"\xe0\x00")
        assert read_until_closed(s) == b""
        sub.nothing(2.0)
        # Keep alive 1 s and silence: closed after 1.5 s, will published.
        s = raw_will_connect(port, level, f"w-{uuid.uuid4().hex[:6]}", topic, b"timed-out",
                             keepalive=1)
        start = time.time()
        m = sub.receive(1, timeout_s=6)[0]
        assert m.payload == b"timed-out" and time.time() - start >= 1.0
        s.close()
        if version == V5:
            # MQTT 5 DISCONNECT 0x04: "Disconnect with Will Message".
            s = raw_will_connect(port, level, f"w-{uuid.uuid4().hex[:6]}", topic, b"asked-for")
            s.sendall(b"\xe0\x01\x04")
            read_until_closed(s)
            assert sub.receive(1)[0].payload == b"asked-for"
    finally:
        sub.close()


@needs_mosquitto
@pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])
def test_mosquitto_client_killed_publishes_its_will(broker, version):
    port = mqtt_port(broker)
    topic = f"will/{uuid.uuid4().hex[:8]}"
    sub = Client(port, V5 if version == "mqttv5" else V311)
    dev = None
    try:
        sub.subscribe(topic, 1)
        dev = subprocess.Popen(
            ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-V", version, "-t", "idle/x",
             "--will-topic", topic, "--will-payload", "device-lost", "--will-qos", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1.0)
        sub.nothing(0.1)
        dev.kill()  # SIGKILL: no DISCONNECT
        dev.wait(5)
        assert sub.receive(1)[0].payload == b"device-lost"
    finally:
        if dev and dev.poll() is None:
            dev.kill()
        sub.close()


def test_will_delay_interval_and_will_retain(broker):
    port = mqtt_port(broker)
    topic = f"will/{uuid.uuid4().hex[:8]}"
    sub = Client(port, V5)
    try:
        sub.subscribe(topic, 1)
        cid = f"wd-{uuid.uuid4().hex[:6]}"
        raw_will_connect(port, 5, cid, topic, b"late", will_retain=True, will_delay=2,
                         session_expiry=60, clean=False).close()
        start = time.time()
        sub.nothing(1.0)  # not before the delay
        m = sub.receive(1, timeout_s=6)[0]
        assert m.payload == b"late" and time.time() - start >= 1.5
        # Its retain flag: a later subscriber gets it as the topic's retained message.
        late = Client(port, V5)
        late.subscribe(topic, 1)
        r = late.receive(1)[0]
        assert (r.payload, r.retain) == (b"late", True)
        late.close()
        # Back before the delay: not published.
        raw_will_connect(port, 5, cid, topic, b"cancelled", will_delay=3, session_expiry=60,
                         clean=False).close()
        back = raw_will_connect(port, 5, cid, topic, b"final", session_expiry=0, clean=True)
        sub.nothing(4.0)
        back.sendall(b"\xe0\x00")
        read_until_closed(back)
    finally:
        sub.close()


def test_will_on_a_topic_without_permission_is_refused_at_connect(tmp_path):
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
        topic = f"auth/{uuid.uuid4().hex[:8]}"
        # A retained PUBLISH alice may not make: PUBACK 0x87, and nothing is retained.
        denied = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=V5)
        acks: queue.Queue[int] = queue.Queue()
        denied.on_publish = lambda _c, _u, _mid, rc, _p: acks.put(rc.value)
        denied.username_pw_set("device", alice)
        denied.connect("127.0.0.1", port, 30)
        denied.loop_start()
        denied.publish(topic, b"not-retained", qos=1, retain=True)
        assert acks.get(timeout=10) == 0x87
        denied.disconnect()
        denied.loop_stop()
        # Nor may she leave a will there: CONNACK 0x87 (5.0) / 5 (3.1.1).
        for version, refused in ((V5, 0x87), (V311, 0x87)):
            c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=version)
            codes: queue.Queue[int] = queue.Queue()
            c.on_connect = lambda _c, _u, _f, rc, _p, q=codes: q.put(rc.value)
            c.username_pw_set("device", alice)
            c.will_set(topic, b"will", 1)
            c.connect("127.0.0.1", port, 30)
            c.loop_start()
            assert codes.get(timeout=10) == refused
            c.loop_stop()
        ok = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=V5)
        got: queue.Queue[mqtt.MQTTMessage] = queue.Queue()
        ok.on_message = lambda _c, _u, m: got.put(m)
        ok.username_pw_set("device", admin)
        ok.connect("127.0.0.1", port, 30)
        ok.loop_start()
        ok.subscribe(topic, 1)
        with pytest.raises(queue.Empty):
            got.get(timeout=2.0)
        ok.disconnect()
        ok.loop_stop()
    finally:
        proc.close()


@pytest.mark.parametrize("version", [V311, V5], ids=["3.1.1", "5.0"])
def test_retained_messages_reach_new_subscriptions(broker, pclient, version):
    port = mqtt_port(broker)
    base = f"ret/{uuid.uuid4().hex[:8]}"
    consumer = pclient.subscribe(pulsar_topic(f"{base}/a"), "pulsar-side")
    pub = Client(port, version)
    try:
        pub.publish(f"{base}/a", b"a1", retain=True).wait_for_publish(10)
        pub.publish(f"{base}/x/y", b"xy", retain=True).wait_for_publish(10)
        # Retained or not, it is a message of the topic for Pulsar consumers too.
        assert consumer.receive(10000).data() == b"a1"
        exact = Client(port, version)
        exact.subscribe(f"{base}/a", 1)
        m = exact.receive(1)[0]
        assert (m.topic, m.payload, m.retain, m.qos) == (f"{base}/a", b"a1", True, 1)
        # Live messages to an existing subscription carry retain 0.
        pub.publish(f"{base}/a", b"live").wait_for_publish(10)
        m = exact.receive(1)[0]
        assert (m.payload, m.retain) == (b"live", False)
        exact.close()
        wild = Client(port, version)
        wild.subscribe(f"{base}/#", 0)
        got = {(m.topic, m.payload, m.retain, m.qos) for m in wild.receive(2)}
        assert got == {(f"{base}/a", b"a1", True, 0), (f"{base}/x/y", b"xy", True, 0)}
        wild.close()
        # A newer one replaces it; an empty one deletes it.
        pub.publish(f"{base}/a", b"a2", retain=True).wait_for_publish(10)
        pub.publish(f"{base}/x/y", b"", retain=True).wait_for_publish(10)
        again = Client(port, version)
        again.subscribe(f"{base}/#", 1)
        m = again.receive(1)[0]
        assert (m.topic, m.payload) == (f"{base}/a", b"a2")
        again.nothing()
        again.close()
    finally:
        pub.close()
        consumer.close()


def test_mqtt5_retain_handling_and_retain_as_published(broker):
    from paho.mqtt.subscribeoptions import SubscribeOptions
    port = mqtt_port(broker)
    topic = f"ret/{uuid.uuid4().hex[:8]}"
    pub = Client(port, V5)
    sub = Client(port, V5)
    try:
        pub.publish(topic, b"kept", retain=True).wait_for_publish(10)
        sub.c.subscribe(topic, options=SubscribeOptions(qos=1, retainHandling=2))
        sub.subacks.get(timeout=10)
        sub.nothing()
        sub.c.unsubscribe(topic)
        time.sleep(0.5)
        sub.c.subscribe(topic, options=SubscribeOptions(qos=1, retainHandling=1))
        sub.subacks.get(timeout=10)
        assert sub.receive(1)[0].payload == b"kept"
        sub.c.subscribe(topic, options=SubscribeOptions(qos=1, retainHandling=1))  # existed
        sub.subacks.get(timeout=10)
        sub.nothing()
        sub.c.subscribe(topic, options=SubscribeOptions(qos=1, retainHandling=0))
        sub.subacks.get(timeout=10)
        assert sub.receive(1)[0].payload == b"kept"
        # Retain As Published: the flag of a live retained PUBLISH kept, else 0.
        rap = Client(port, V5)
        rap.c.subscribe(topic, options=SubscribeOptions(qos=1, retainAsPublished=True,
                                                        retainHandling=2))
        rap.subacks.get(timeout=10)
        pub.publish(topic, b"new", retain=True).wait_for_publish(10)
        m = rap.receive(1)[0]
        assert (m.payload, m.retain) == (b"new", True)
        m = sub.receive(1)[0]
        assert (m.payload, m.retain) == (b"new", False)
        rap.close()
    finally:
        pub.close()
        sub.close()


@needs_mosquitto
@pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])
def test_mosquitto_retained_message(broker, version):
    port = str(mqtt_port(broker))
    topic = f"ret/{uuid.uuid4().hex[:8]}"
    subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", port, "-V", version, "-q", "1",
                    "-r", "-t", topic, "-m", "by-mosquitto"], check=True, timeout=10)
    out = subprocess.run(["mosquitto_sub", "-h", "127.0.0.1", "-p", port, "-V", version, "-q",
                          "1", "-t", topic, "-C", "1", "-W", "10", "-v", "--retained-only"],
                         check=True, timeout=15, capture_output=True, text=True).stdout
    assert out.splitlines() == [f"{topic} by-mosquitto"]


def test_mqtt5_connack_and_topic_aliases(broker):
    port = mqtt_port(broker)
    topic = f"alias/{uuid.uuid4().hex[:8]}"
    sub = Client(port, V5)
    pub = Client(port, V5)
    try:
        assert pub.connack_props.TopicAliasMaximum == 10
        assert pub.connack_props.RetainAvailable == 1
        sub.subscribe(topic, 1)
        bind = Properties(PacketTypes.PUBLISH)
        bind.TopicAlias = 1
        pub.publish(topic, b"bound", props=bind).wait_for_publish(10)
        pub.publish("", b"by-alias", props=bind).wait_for_publish(10)
        got = [(m.topic, m.payload) for m in sub.receive(2)]
        assert got == [(topic, b"bound"), (topic, b"by-alias")]
    finally:
        pub.close()
        sub.close()
    # Alias over the maximum: DISCONNECT 0x94; an alias never bound: 0x82 (protocol error).
    for props, reason in ((b"\x23\x00\x0b", 0x94), (b"\x23\x00\x05", 0x82)):
        s = raw_connect(port, 5)
        name = b"" if reason == 0x82 else topic.encode()
        body = _str(name) + _varint(len(props)) + props + b"x"
        s.sendall(b"\x30" + _varint(len(body)) + body)
        data = read_until_closed(s)
        assert data[:1] == b"\xe0" and data[2] == reason, data


def _subscriptions(admin_url: str, topic: str) -> dict:
    url = (f"{admin_url}/admin/v2/persistent/public/default/"
           f"{urllib.parse.quote(urllib.parse.quote_plus(topic))}/stats")
    return requests.get(url, timeout=5).json()["subscriptions"]


def test_mqtt5_session_expiry_removes_the_session_and_its_subscription(broker, pclient):
    port = mqtt_port(broker)
    topic = f"exp/{uuid.uuid4().hex[:8]}"
    cid = f"exp-{uuid.uuid4().hex[:6]}"
    c = Client(port, V5, client_id=cid, clean=False, session_expiry=2)
    c.subscribe(topic, 1)
    c.close()
    assert cid in _subscriptions(broker.admin_url, topic)

    def gone() -> None:
        assert cid not in _subscriptions(broker.admin_url, topic)
    eventually(gone, timeout_s=10, interval_s=0.5)
    c = Client(port, V5, client_id=cid, clean=False, session_expiry=2)
    assert not c.session_present
    c.close()


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_sessions_and_retained_messages_survive_a_broker_restart(tmp_path, how):
    proc = MagnetarProcess(["mqttListeners=mqtt://127.0.0.1:0"], workdir=str(tmp_path),
                           data_in_workdir=False)
    proc.start()
    base = f"rs/{uuid.uuid4().hex[:8]}"
    ids = {V311: f"rs311-{uuid.uuid4().hex[:6]}", V5: f"rs5-{uuid.uuid4().hex[:6]}"}
    try:
        client = pulsar.Client(proc.endpoint.service_url, operation_timeout_seconds=10)
        client.create_producer(pulsar_topic(f"{base}/wild/a")).close()
        port = proc.ports["mqttPort"]
        for version, cid in ids.items():
            c = Client(port, version, client_id=cid, clean=False)
            c.subscribe(f"{base}/exact", 1)
            c.subscribe(f"{base}/wild/+", 1)
            c.close()
        pub = Client(port, V311)
        pub.publish(f"{base}/ret", b"kept", retain=True).wait_for_publish(10)
        pub.close()
        for t in ("exact", "wild/a"):
            p = client.create_producer(pulsar_topic(f"{base}/{t}"))
            p.send(f"away-{t}".encode())
            p.close()
        client.close()
        if how == "SIGKILL":
            proc.kill()
        else:
            assert proc.stop() == 0
        proc.start()
        port = proc.ports["mqttPort"]
        client = pulsar.Client(proc.endpoint.service_url, operation_timeout_seconds=10)
        p = client.create_producer(pulsar_topic(f"{base}/exact"))
        p.send(b"after-restart")
        p.close()
        client.close()
        for version, cid in ids.items():
            c = Client(port, version, client_id=cid, clean=False)
            try:
                assert c.session_present
                got = {(m.topic, m.payload) for m in c.receive(3, timeout_s=15)}
                assert got == {(f"{base}/exact", b"away-exact"),
                               (f"{base}/wild/a", b"away-wild/a"),
                               (f"{base}/exact", b"after-restart")}
            finally:
                c.close()
        fresh = Client(port, V5)
        fresh.subscribe(f"{base}/ret", 1)
        m = fresh.receive(1)[0]
        assert (m.payload, m.retain) == (b"kept", True)
        fresh.close()
    finally:
        proc.close()


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_offline_sessions_get_a_topic_created_while_away_across_a_restart(tmp_path, how):
    """Two persistent sessions with the same wildcard filter, both away; a topic the filter
    selects is created (first published to) meanwhile; the broker restarts. Each session, back
    one after the other, gets that message exactly once: the first one's acknowledgement must not
    let the topic drop the message before the second one is back."""
    proc = MagnetarProcess(["mqttListeners=mqtt://127.0.0.1:0"], workdir=str(tmp_path),
                           data_in_workdir=False)
    proc.start()
    base = f"away2/{uuid.uuid4().hex[:8]}"
    ids = {V311: f"aw311-{uuid.uuid4().hex[:6]}", V5: f"aw5-{uuid.uuid4().hex[:6]}"}
    try:
        port = proc.ports["mqttPort"]
        for version, cid in ids.items():
            c = Client(port, version, client_id=cid, clean=False)
            c.subscribe(f"{base}/#", 1)
            c.close()
        pub = Client(port, V311)
        pub.publish(f"{base}/new", b"while-away").wait_for_publish(10)
        pub.close()
        if how == "SIGKILL":
            proc.kill()
        else:
            assert proc.stop() == 0
        proc.start()
        port = proc.ports["mqttPort"]
        for version, cid in ids.items():
            c = Client(port, version, client_id=cid, clean=False)
            try:
                assert c.session_present
                m = c.receive(1, timeout_s=15)[0]
                assert (m.topic, m.payload) == (f"{base}/new", b"while-away")
                # Long enough for the acknowledgement to be stored (cursor writes are held
                # back up to a second) before the next session is back.
                c.nothing(3.0)
            finally:
                c.close()
    finally:
        proc.close()
