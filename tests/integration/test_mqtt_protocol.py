"""MQTT protocol items beyond QoS 1 (issue 51, docs/mqtt.md): QoS 2 both ways (exactly once for
inbound PUBLISHes: a PUBLISH sent again with the same packet id is stored once, also after a
reconnect and a kill -9 of the broker), shared subscriptions ($share/{group}/{filter} as the
Pulsar Shared subscription named by the group), outbound topic aliases, and a delayed will that
survives a broker restart. Clients we did not write (paho-mqtt, mosquitto_pub/sub) plus raw
sockets where the wire itself is asserted."""

from __future__ import annotations

import queue
import socket
import subprocess
import threading
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
from test_mqtt import (
    V5,
    V311,
    Client,
    _str,
    _varint,
    needs_mosquitto,
    pulsar_topic,
    raw_will_connect,
    read_until_closed,
)

from harness.broker import MagnetarProcess
from harness.util import eventually


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


def port_of(proc: MagnetarProcess) -> int:
    return proc.ports["mqttPort"]


# ---- A raw MQTT client: the wire itself ---------------------------------------------------------

class Raw:
    """One MQTT connection written and read byte by byte."""

    def __init__(self, port: int, level: int, client_id: str, clean: bool = True,
                 session_expiry: int | None = None, alias_max: int | None = None,
                 keepalive: int = 30) -> None:
        self.level = level
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        body = _str(b"MQTT") + bytes([level, 0x02 if clean else 0]) + keepalive.to_bytes(2, "big")
        if level == 5:
            props = b""
            if session_expiry is not None:
                props += b"\x11" + session_expiry.to_bytes(4, "big")
            if alias_max is not None:
                props += b"\x22" + alias_max.to_bytes(2, "big")
            body += _varint(len(props)) + props
        body += _str(client_id.encode())
        self.s.sendall(b"\x10" + _varint(len(body)) + body)
        kind, ack = self.packet()
        assert kind >> 4 == 2 and ack[1] == 0, (kind, ack)
        self.session_present = bool(ack[0] & 1)
        self.connack = ack

    def packet(self, timeout_s: float = 10.0) -> tuple[int, bytes]:
        """The next packet: (first byte, body)."""
        self.s.settimeout(timeout_s)
        first = self._exact(1)[0]
        length, mult = 0, 1
        while True:
            b = self._exact(1)[0]
            length += (b & 0x7F) * mult
            mult *= 128
            if not b & 0x80:
                break
        return first, self._exact(length)

    def _exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                raise ConnectionError(f"closed after {out!r}")
            out += chunk
        return out

    def props(self, raw: bytes = b"") -> bytes:
        return _varint(len(raw)) + raw if self.level == 5 else b""

    def publish(self, topic: str, payload: bytes, qos: int, pid: int = 0,
                dup: bool = False) -> None:
        self.s.sendall(self.publish_packet(topic, payload, qos, pid, dup))

    def publish_packet(self, topic: str, payload: bytes, qos: int, pid: int = 0,
                       dup: bool = False) -> bytes:
        body = _str(topic.encode()) + (pid.to_bytes(2, "big") if qos else b"") + self.props()
        first = 0x30 | (qos << 1) | (0x08 if dup else 0)
        return bytes([first]) + _varint(len(body) + len(payload)) + body + payload

    def ack(self, kind: int, pid: int) -> None:
        """PUBACK (0x40), PUBREC (0x50), PUBREL (0x62), PUBCOMP (0x70)."""
        self.s.sendall(bytes([kind, 2]) + pid.to_bytes(2, "big"))

    def subscribe(self, topic_filter: str, qos: int, pid: int = 1, options: int = 0) -> bytes:
        """SUBSCRIBE one filter; returns the SUBACK's reason codes."""
        body = pid.to_bytes(2, "big") + self.props() + _str(topic_filter.encode())
        body += bytes([qos | options])
        self.s.sendall(b"\x82" + _varint(len(body)) + body)
        kind, ack = self.packet()
        assert kind == 0x90 and ack[:2] == pid.to_bytes(2, "big"), (kind, ack)
        return ack[2 + (1 + ack[2] if self.level == 5 else 0):]

    def expect_ack(self, kind: int, pid: int) -> int:
        """The next packet is `kind` for `pid`; returns its reason code (0 when left out)."""
        got, body = self.packet()
        assert got == kind and int.from_bytes(body[:2], "big") == pid, (hex(got), body)
        return body[2] if len(body) > 2 else 0

    def close(self) -> None:
        self.s.close()


def parse_publish(first: int, body: bytes, level: int) -> dict:
    n = int.from_bytes(body[:2], "big")
    topic, pos = body[2:2 + n].decode(), 2 + n
    qos = (first >> 1) & 3
    pid = 0
    if qos:
        pid, pos = int.from_bytes(body[pos:pos + 2], "big"), pos + 2
    alias = None
    if level == 5:
        plen, end = body[pos], pos + 1  # property lengths under 128 here
        props = body[end:end + plen]
        i = 0
        while i < len(props):
            if props[i] == 0x23:
                alias = int.from_bytes(props[i + 1:i + 3], "big")
                i += 3
            else:
                raise AssertionError(f"unexpected property in {props!r}")
        pos = end + plen
    return {"topic": topic, "qos": qos, "pid": pid, "alias": alias, "payload": body[pos:]}


def read_all(client: pulsar.Client, topic: str) -> list[bytes]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    out = []
    while reader.has_message_available():
        out.append(reader.read_next(5000).data())
    reader.close()
    return out


def subscriptions(admin_url: str, topic: str) -> dict:
    url = (f"{admin_url}/admin/v2/persistent/public/default/"
           f"{urllib.parse.quote(urllib.parse.quote_plus(topic))}/stats")
    return requests.get(url, timeout=5).json()["subscriptions"]


# ---- QoS 2 --------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [V311, V5], ids=["3.1.1", "5.0"])
def test_paho_qos2_both_ways(broker, pclient, version):
    topic = f"q2/{uuid.uuid4().hex[:8]}"
    sub = Client(port_of(broker), version)
    pub = Client(port_of(broker), version)
    try:
        if version == V5:
            assert pub.connack_props is None or not hasattr(pub.connack_props, "MaximumQoS")
        granted = sub.subscribe(topic, 2)
        assert [getattr(g, "value", g) for g in granted] == [2]
        infos = [pub.publish(topic, f"m-{i}".encode(), qos=2) for i in range(20)]
        for info in infos:
            info.wait_for_publish(10)  # PUBCOMP
            assert info.is_published()
        got = sub.receive(20)
        assert [m.payload for m in got] == [f"m-{i}".encode() for i in range(20)]
        assert {m.qos for m in got} == {2}
        sub.nothing(1.0)
        assert read_all(pclient, pulsar_topic(topic)) == [f"m-{i}".encode() for i in range(20)]
    finally:
        pub.close()
        sub.close()


@pytest.mark.parametrize("level", [4, 5])
def test_qos2_publish_sent_again_is_stored_once(broker, pclient, level):
    topic = f"q2dup/{uuid.uuid4().hex[:8]}"
    r = Raw(port_of(broker), level, f"dup-{uuid.uuid4().hex[:6]}")
    try:
        r.publish(topic, b"first", 2, pid=7)
        assert r.expect_ack(0x50, 7) == 0  # PUBREC: stored
        r.publish(topic, b"first", 2, pid=7, dup=True)  # the PUBREC was "lost": sent again
        assert r.expect_ack(0x50, 7) == 0
        r.publish(topic, b"first", 2, pid=7, dup=True)
        assert r.expect_ack(0x50, 7) == 0
        r.ack(0x62, 7)  # PUBREL
        assert r.expect_ack(0x70, 7) == 0  # PUBCOMP
        # Released: the id now names a new message.
        r.publish(topic, b"second", 2, pid=7)
        assert r.expect_ack(0x50, 7) == 0
        r.ack(0x62, 7)
        assert r.expect_ack(0x70, 7) == 0
        # A PUBREL for an id with nothing waiting: PUBCOMP 0x92 (MQTT 5), plain PUBCOMP (3.1.1).
        r.ack(0x62, 99)
        assert r.expect_ack(0x70, 99) == (0x92 if level == 5 else 0)
        assert read_all(pclient, pulsar_topic(topic)) == [b"first", b"second"]
    finally:
        r.close()


@pytest.mark.parametrize("bad,reason", [
    (b"\x36\x06\x00\x01t\x00\x01\x00", 0x81),  # PUBLISH QoS 3
    (b"\x62\x02\x00\x00", 0x82),              # PUBREL packet id 0
    (b"\x60\x02\x00\x05", 0x81),              # PUBREL with fixed-header flags 0 (must be 2)
    (b"\x62\x01\x00", 0x81),                  # PUBREL truncated
    (b"\x50\x02\x00\x00", 0x82),              # PUBREC packet id 0
])
def test_hostile_qos2_packets(broker, bad, reason):
    r = Raw(port_of(broker), 5, f"h-{uuid.uuid4().hex[:6]}")
    r.s.sendall(bad)
    data = read_until_closed(r.s)
    assert data[:1] == b"\xe0" and data[2] == reason, data


def test_qos2_state_survives_reconnect_and_kill9(tmp_path):
    proc = MagnetarProcess(["mqttListeners=mqtt://127.0.0.1:0"], workdir=str(tmp_path),
                           data_in_workdir=False)
    proc.start()
    topic = f"q2s/{uuid.uuid4().hex[:8]}"
    cid = f"q2s-{uuid.uuid4().hex[:6]}"
    try:
        r = Raw(port_of(proc), 4, cid, clean=False)
        r.publish(topic, b"once", 2, pid=11)
        assert r.expect_ack(0x50, 11) == 0
        r.close()  # gone before its PUBREL
        r = Raw(port_of(proc), 4, cid, clean=False)
        assert r.session_present
        r.publish(topic, b"once", 2, pid=11, dup=True)
        assert r.expect_ack(0x50, 11) == 0
        r.close()
        time.sleep(0.5)
        proc.kill()
        proc.start()
        r = Raw(port_of(proc), 4, cid, clean=False)
        assert r.session_present
        r.publish(topic, b"once", 2, pid=11, dup=True)  # after the crash: still known
        assert r.expect_ack(0x50, 11) == 0
        r.ack(0x62, 11)
        assert r.expect_ack(0x70, 11) == 0
        r.close()
        client = pulsar.Client(proc.endpoint.service_url, operation_timeout_seconds=10)
        assert read_all(client, pulsar_topic(topic)) == [b"once"]
        client.close()
    finally:
        proc.close()


def test_outbound_qos2_exchange_on_the_wire(broker, pclient):
    topic = f"q2o/{uuid.uuid4().hex[:8]}"
    cid = f"q2o-{uuid.uuid4().hex[:6]}"
    r = Raw(port_of(broker), 5, cid)
    try:
        assert r.subscribe(topic, 2) == b"\x02"
        producer = pclient.create_producer(pulsar_topic(topic))
        producer.send(b"exactly-once")
        first, body = r.packet()
        m = parse_publish(first, body, 5)
        assert (m["qos"], m["payload"], m["topic"]) == (2, b"exactly-once", topic)
        r.ack(0x50, m["pid"])  # PUBREC
        assert r.expect_ack(0x62, m["pid"]) == 0  # PUBREL
        r.ack(0x70, m["pid"])  # PUBCOMP

        def acked() -> None:
            assert subscriptions(broker.admin_url, topic)[cid]["msgBacklog"] == 0
        eventually(acked, timeout_s=10, interval_s=0.2)
        # A PUBREC for an id never sent: PUBREL 0x92.
        r.ack(0x50, 4242)
        assert r.expect_ack(0x62, 4242) == 0x92
        producer.close()
    finally:
        r.close()


@needs_mosquitto
@pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])
def test_mosquitto_qos2(broker, pclient, version):
    topic = f"mq2/{uuid.uuid4().hex[:8]}"
    port = str(port_of(broker))
    sub = subprocess.Popen(
        ["mosquitto_sub", "-h", "127.0.0.1", "-p", port, "-V", version, "-q", "2", "-t", topic,
         "-C", "3", "-W", "20", "-v"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        for i in range(3):
            subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", port, "-V", version, "-q",
                            "2", "-t", topic, "-m", f"two-{i}"], check=True, timeout=10)
        out, err = sub.communicate(timeout=25)
        assert sub.returncode == 0, err
        assert out.splitlines() == [f"{topic} two-{i}" for i in range(3)]
        assert read_all(pclient, pulsar_topic(topic)) == [f"two-{i}".encode() for i in range(3)]
    finally:
        if sub.poll() is None:
            sub.kill()


# ---- Pipelined bursts: back-pressure, not a reset -----------------------------------------------

PINGREQ = b"\xc0\x00"


def _read_until(r: Raw, want: int, kind: int) -> tuple[list[int], bool]:
    """Packet ids of `want` packets of `kind` (PUBACK 0x40, PUBREC 0x50, PUBCOMP 0x70), and
    whether the PINGRESP that follows the burst came too; reads on until both are in."""
    pids: list[int] = []
    pong = False
    while len(pids) < want or not pong:
        first, body = r.packet(20.0)
        if first == 0xD0:
            pong = True
            continue
        assert first == kind, (hex(first), body)
        assert len(body) == 2 or body[2] == 0, body  # reason code: success
        pids.append(int.from_bytes(body[:2], "big"))
    return pids, pong


def _send_in_background(r: Raw, data: bytes) -> threading.Thread:
    """One sendall of `data` on its own thread: the broker answers while it still arrives."""
    t = threading.Thread(target=r.s.sendall, args=(data,), daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("level,qos,n", [(4, 0, 20000), (4, 1, 20000), (4, 2, 1000),
                                         (5, 1, 20000), (5, 2, 1000)])
def test_pipelined_publish_burst_in_one_write(broker, pclient, level, qos, n):
    """CONNECT, then n PUBLISHes and a PINGREQ in one write, behind the topic's first PUBLISH
    (its producer is created meanwhile): the broker pauses reading (back-pressure) instead of
    closing, answers every QoS 1/2 packet id in order, and Pulsar gets every message in order.
    It used to reset the connection silently (a paused connection had no owner left)."""
    topic = f"burst/{uuid.uuid4().hex[:8]}"
    sub = pclient.subscribe(pulsar_topic(topic), "burst",
                            initial_position=pulsar.InitialPosition.Earliest)
    r = Raw(port_of(broker), level, f"burst-{qos}-{uuid.uuid4().hex[:6]}")
    try:
        burst = b"".join(r.publish_packet(topic, str(i).encode(), qos, pid=i + 1) for i in range(n))
        sender = _send_in_background(r, burst + PINGREQ)
        ids = list(range(1, n + 1))
        if qos == 0:
            assert _read_until(r, 0, 0x40) == ([], True)
        elif qos == 1:
            assert _read_until(r, n, 0x40) == (ids, True)
        else:
            assert _read_until(r, n, 0x50) == (ids, True)  # PUBREC: stored
            sender.join(20)
            # Every PUBREL in one write too; PUBCOMP for each, in order.
            sender = _send_in_background(
                r, b"".join(b"\x62\x02" + i.to_bytes(2, "big") for i in ids) + PINGREQ)
            assert _read_until(r, n, 0x70) == (ids, True)
        sender.join(20)
        assert not sender.is_alive()
        got = []
        for _ in range(n):
            m = sub.receive(10000)
            got.append(m.data())
        sub.acknowledge_cumulative(m)
        assert got == [str(i).encode() for i in range(n)]
        with pytest.raises(pulsar.Timeout):
            sub.receive(200)  # stored once each
    finally:
        r.close()
        sub.close()


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_burst_from_a_client_not_reading_its_pubacks_holds_bounded_memory():
    """A client pipelines 2M small QoS 1 PUBLISHes (~46 MB) and reads none of its PUBACKs while
    it writes. The broker reads no more than the window lets it handle, so the PUBLISH bytes wait
    in the kernel, not in the broker: each resume used to read 64 KiB more behind the packets
    still buffered (~40 MB of the burst piled up in the connection). Then the client reads:
    every PUBACK in order, every message stored in order."""
    proc = MagnetarProcess(["mqttListeners=mqtt://127.0.0.1:0"])
    proc.start()
    n, chunk = 2_000_000, 10_000
    topic = f"mem/{uuid.uuid4().hex[:8]}"
    r = Raw(port_of(proc), 4, f"mem-{uuid.uuid4().hex[:6]}")
    try:
        r.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        r.s.settimeout(30)
        rss0 = _rss_kb(proc.pid)

        def pump() -> None:
            for c in range(0, n, chunk):
                r.s.sendall(b"".join(
                    r.publish_packet(topic, i.to_bytes(4, "big") + b"pppppp", 1, pid=i % 65535 + 1)
                    for i in range(c, c + chunk)))

        sender = threading.Thread(target=pump, daemon=True)
        sender.start()
        peak = rss0
        deadline = time.time() + 60
        while sender.is_alive() and time.time() < deadline:
            peak = max(peak, _rss_kb(proc.pid))
            time.sleep(0.05)
        assert not sender.is_alive()
        growth_mb = (peak - rss0) / 1024
        # Measured: ~6 MB (the PUBACKs queued among it); the old code ~40 MB.
        assert growth_mb < 16, f"broker RSS grew {growth_mb:.0f} MB during the burst"
        acks = bytearray()
        while len(acks) < 4 * n:
            chunk_in = r.s.recv(1 << 20)
            assert chunk_in, "closed"
            acks += chunk_in
        assert len(acks) == 4 * n
        assert acks == b"".join(b"\x40\x02" + (i % 65535 + 1).to_bytes(2, "big") for i in range(n))
        client = pulsar.Client(proc.endpoint.service_url, operation_timeout_seconds=10)
        reader = client.create_reader(pulsar_topic(topic), pulsar.MessageId.earliest,
                                      receiver_queue_size=10000)
        for i in range(n):
            data = reader.read_next(10000).data()
            assert data[:4] == i.to_bytes(4, "big"), (i, data)
        assert not reader.has_message_available()
        client.close()
    finally:
        r.close()
        proc.close()


def test_keep_alive_does_not_run_out_while_the_broker_pauses_reading():
    """keep alive 2 s; the journal's group commit waits 4 s (journalMaxGroupWaitMSec), so the
    window of 10 PUBLISHes (receiveMaximum) stays full for > 1.5 x keep alive and the broker does
    not read. The client's PINGREQs every 0.5 s wait in its socket meanwhile: MQTT 3.1.2.10
    closes only after no packet was *received* for 1.5 x keep alive, so it stays connected
    (it used to get DISCONNECT 0x8D / a close). A client silent without a pause is still closed."""
    proc = MagnetarProcess(["mqttListeners=mqtt://127.0.0.1:0", "receiveMaximum=10",
                            "journalMaxGroupWaitMSec=4000"])
    proc.start()
    try:
        topic = f"ka/{uuid.uuid4().hex[:8]}"
        r = Raw(port_of(proc), 5, f"ka-{uuid.uuid4().hex[:6]}", keepalive=2)
        silent = Raw(port_of(proc), 4, f"silent-{uuid.uuid4().hex[:6]}", keepalive=2)
        n = 20  # two windows: two group commits of 4 s
        r.s.sendall(b"".join(r.publish_packet(topic, str(i).encode(), 1, pid=i + 1)
                             for i in range(n)))
        got: list[tuple[int, bytes]] = []
        closed = threading.Event()

        def read() -> None:
            try:
                while True:
                    got.append(r.packet(30.0))
            except (OSError, ConnectionError):
                closed.set()

        threading.Thread(target=read, daemon=True).start()
        t0 = time.time()
        while time.time() - t0 < 12 and not closed.is_set():
            if time.time() - t0 > 8 and sum(f == 0x40 for f, _ in got) == n:
                break
            r.s.sendall(PINGREQ)
            time.sleep(0.5)
        kinds = [first for first, _ in got]
        assert not closed.is_set(), [(hex(f), b) for f, b in got if f != 0xD0]
        assert 0xE0 not in kinds
        assert [int.from_bytes(b[:2], "big") for f, b in got if f == 0x40] == \
            list(range(1, n + 1))
        assert kinds.count(0xD0) >= 10
        # The silent client: closed about 3 s after its CONNACK (long ago by now).
        assert read_until_closed(silent.s, 5.0) is not None
        r.close()
    finally:
        proc.close()


@needs_mosquitto
def test_mosquitto_pub_qos0_to_fresh_topics_is_stored(broker, pclient):
    """mosquitto_pub -q 0 writes CONNECT, PUBLISH, DISCONNECT at once: the PUBLISH waits for its
    topic's producer when the DISCONNECT is handled, and used to be dropped with the connection
    (4 of 10 stored). Every packet before the DISCONNECT is processed (MQTT 4.6)."""
    run = uuid.uuid4().hex[:6]
    for i in range(10):
        subprocess.run(["mosquitto_pub", "-p", str(port_of(broker)), "-t", f"fresh/{run}/{i}",
                        "-m", f"hi-{i}", "-q", "0"], check=True, timeout=20)
    for i in range(10):
        assert eventually(lambda i=i: _stored_once(pclient, f"fresh/{run}/{i}")) == \
            [f"hi-{i}".encode()]


def _stored_once(client: pulsar.Client, topic: str) -> list[bytes]:
    got = read_all(client, pulsar_topic(topic))
    assert got, topic
    return got


@pytest.mark.parametrize("end", ["disconnect", "close"])
def test_publishes_before_disconnect_or_close_are_all_stored(broker, pclient, end):
    """One write of CONNECT + 3000 QoS 0 PUBLISHes to 300 fresh topics + DISCONNECT (or the
    socket's close): all 3000 stored, in order per topic, and nothing sent after the DISCONNECT
    (used to store ~2200: PUBLISHes waiting for their producer were dropped at the close)."""
    run = uuid.uuid4().hex[:6]
    topics = [f"dp/{run}/{t}" for t in range(300)]
    r = Raw(port_of(broker), 4, f"dp-{run}")
    data = b"".join(r.publish_packet(topics[i % 300], str(i).encode(), 0) for i in range(3000))
    if end == "disconnect":
        data += b"\xe0\x00" + r.publish_packet(topics[0], b"after", 0)
    r.s.sendall(data)
    r.s.shutdown(socket.SHUT_WR)
    assert read_until_closed(r.s, 20.0) is not None
    r.close()
    for t in range(300):
        want = [str(i).encode() for i in range(t, 3000, 300)]
        assert eventually(lambda t=t: _all_stored(pclient, topics[t], 10)) == want


@pytest.mark.parametrize("level", [4, 5])
@pytest.mark.parametrize("fresh", [True, False])
def test_qos2_resent_after_an_abrupt_close_is_stored_once(broker, pclient, level, fresh):
    """A persistent session sends a QoS 2 PUBLISH and closes its socket without reading the
    PUBREC; it reconnects and sends it again (DUP): stored once. (Stored after the close and
    its id kept nowhere, it was stored twice.)"""
    run = uuid.uuid4().hex[:6]
    topic, cid = f"q2close/{run}", f"q2close-{run}"
    expiry = 3600 if level == 5 else None
    if not fresh:  # the topic and a producer of it exist already
        w = Raw(port_of(broker), 4, f"{cid}-warm")
        w.publish(topic, b"warm", 1, pid=1)
        assert w.expect_ack(0x40, 1) == 0
        w.close()
    r = Raw(port_of(broker), level, cid, clean=False, session_expiry=expiry)
    r.s.sendall(b"".join(r.publish_packet(f"{topic}/pre{k}", b"p", 0) for k in range(50)) +
                r.publish_packet(topic, b"once", 2, pid=1))
    r.s.shutdown(socket.SHUT_WR)
    assert read_until_closed(r.s, 20.0) is not None
    r.close()
    time.sleep(1.0)
    again = Raw(port_of(broker), level, cid, clean=False, session_expiry=expiry)
    try:
        assert again.session_present
        again.publish(topic, b"once", 2, pid=1, dup=True)
        assert again.expect_ack(0x50, 1) == 0
        again.ack(0x62, 1)
        assert again.expect_ack(0x70, 1) == 0
        want = [b"once"] if fresh else [b"warm", b"once"]
        assert read_all(pclient, pulsar_topic(topic)) == want
    finally:
        again.close()


def _all_stored(client: pulsar.Client, topic: str, n: int) -> list[bytes]:
    got = read_all(client, pulsar_topic(topic))
    assert len(got) >= n, (topic, len(got))
    return got


# ---- Shared subscriptions -----------------------------------------------------------------------

@pytest.mark.parametrize("version", [V311, V5], ids=["3.1.1", "5.0"])
def test_shared_subscription_splits_and_loses_nothing_when_a_member_leaves(broker, pclient,
                                                                          version):
    topic = f"sh/{uuid.uuid4().hex[:8]}"
    group = f"g{uuid.uuid4().hex[:6]}"
    level = 5 if version == V5 else 4
    a = Client(port_of(broker), version)
    b = Client(port_of(broker), version)
    try:
        if version == V5:
            assert a.connack_props.SharedSubscriptionAvailable == 1
        assert [getattr(g, "value", g) for g in a.subscribe(f"$share/{group}/{topic}", 1)] == [1]
        assert [getattr(g, "value", g) for g in b.subscribe(f"$share/{group}/{topic}", 1)] == [1]
        assert group in subscriptions(broker.admin_url, topic)
        assert subscriptions(broker.admin_url, topic)[group]["type"] == "Shared"
        producer = pclient.create_producer(pulsar_topic(topic), batching_enabled=False)
        for i in range(40):
            producer.send(f"s-{i}".encode())
        got_a = [m.payload for m in a.receive(1, timeout_s=10)]
        time.sleep(1.0)
        while not a.messages.empty():
            got_a.append(a.messages.get().payload)
        got_b = []
        while not b.messages.empty():
            got_b.append(b.messages.get().payload)
        while len(got_a) + len(got_b) < 40:
            got_b += [m.payload for m in b.receive(1)]
        assert got_a and got_b, "both members get a share"
        assert sorted(got_a + got_b) == sorted(f"s-{i}".encode() for i in range(40))
        a.close()
        b.close()
        # A member that leaves with messages unacknowledged: the others get them.
        raw = Raw(port_of(broker), level, f"rawm-{uuid.uuid4().hex[:6]}")
        assert raw.subscribe(f"$share/{group}/{topic}", 1) == b"\x01"
        c = Client(port_of(broker), version)
        c.subscribe(f"$share/{group}/{topic}", 1)
        for i in range(20):
            producer.send(f"t-{i}".encode())
        held = []
        deadline = time.time() + 3
        while time.time() < deadline:
            try:
                first, body = raw.packet(timeout_s=0.5)
            except (socket.timeout, TimeoutError):
                continue
            held.append(parse_publish(first, body, level)["payload"])  # never PUBACKed
        raw.close()
        rest = set()
        while len(rest) < 20:
            rest.add(c.receive(1, timeout_s=15)[0].payload)
        assert held, "the raw member got some of them"
        assert rest == {f"t-{i}".encode() for i in range(20)}
        c.close()
        producer.close()
    finally:
        for cl in (a, b):
            try:
                cl.close()
            except Exception:
                pass


def test_malformed_shared_subscriptions(broker):
    r = Raw(port_of(broker), 5, f"shm-{uuid.uuid4().hex[:6]}")
    try:
        for i, f in enumerate(["$share/onlygroup", "$share//t", "$share/a+b/t", "$share/g/a/#/b",
                               "$share/g/"], start=1):
            assert r.subscribe(f, 1, pid=i) == b"\x8f", f  # Topic Filter invalid
        # No Local on a shared subscription: a Protocol Error, no SUBACK.
        body = (21).to_bytes(2, "big") + r.props() + _str(b"$share/g/ok") + bytes([0x01 | 0x04])
        r.s.sendall(b"\x82" + _varint(len(body)) + body)
        data = read_until_closed(r.s)
    finally:
        r.close()
    assert data[:1] == b"\xe0" and data[2] == 0x82, data  # Protocol Error
    # 3.1.1: the SUBACK failure code.
    r = Raw(port_of(broker), 4, f"shm-{uuid.uuid4().hex[:6]}")
    try:
        assert r.subscribe("$share//t", 1) == b"\x80"
        assert r.subscribe("$share/g/t", 2, pid=2) == b"\x02"
    finally:
        r.close()


# ---- Outbound topic aliases ---------------------------------------------------------------------

def test_outbound_topic_aliases_on_the_wire(broker, pclient):
    base = f"oal/{uuid.uuid4().hex[:8]}"
    r = Raw(port_of(broker), 5, f"oal-{uuid.uuid4().hex[:6]}", alias_max=2)
    try:
        topics = [f"{base}/t{i}" for i in range(3)]
        for i, t in enumerate(topics, start=1):
            assert r.subscribe(t, 0, pid=i) == b"\x00"
        for t in topics:
            p = pclient.create_producer(pulsar_topic(t))
            p.send(b"1")
            p.send(b"2")
            p.close()
        got = [parse_publish(*r.packet(), 5) for _ in range(6)]
        by_payload = [(g["topic"], g["alias"]) for g in got]
        # Two aliases (the client's maximum): bound with the name, then the alias alone; the
        # third topic goes by its name.
        assert by_payload == [(topics[0], 1), ("", 1), (topics[1], 2), ("", 2),
                              (topics[2], None), (topics[2], None)], by_payload
    finally:
        r.close()


def test_paho_sees_the_outbound_aliases(broker, pclient):
    topic = f"oalp/{uuid.uuid4().hex[:8]}"
    msgs: queue.Queue = queue.Queue()
    log: list[str] = []
    cl = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"oalp-{uuid.uuid4().hex[:6]}",
                     protocol=V5)
    cl.on_message = lambda _c, _u, m: msgs.put(m)
    cl.on_log = lambda _c, _u, _lvl, s: log.append(s)
    props = Properties(PacketTypes.CONNECT)
    props.TopicAliasMaximum = 5
    cl.connect("127.0.0.1", port_of(broker), 30, properties=props)
    cl.loop_start()
    try:
        def connected() -> None:
            assert cl.is_connected()
        eventually(connected, timeout_s=10, interval_s=0.1)
        cl.subscribe(topic, 1)
        time.sleep(1.0)
        p = pclient.create_producer(pulsar_topic(topic))
        for i in range(3):
            p.send(f"a-{i}".encode())
        p.close()
        got = [msgs.get(timeout=10) for _ in range(3)]
        # paho 2.1 passes the alias on (MQTT 5 leaves resolving to the receiver): the first
        # PUBLISH binds alias 1 with the name, the next ones carry the alias and no name.
        assert [(m.topic, m.properties.TopicAlias) for m in got] == [(topic, 1), ("", 1), ("", 1)]
        bound: dict[int, str] = {}
        for m in got:
            if m.topic:
                bound[m.properties.TopicAlias] = m.topic
        assert [(bound[m.properties.TopicAlias], m.payload) for m in got] == [
            (topic, f"a-{i}".encode()) for i in range(3)]
        # paho's packet log: the names it received on the wire.
        received = [s for s in log if s.startswith("Received PUBLISH")]
        assert len(received) == 3, received
        assert f"'{topic}'" in received[0], received
        assert all("''" in r for r in received[1:]), received
    finally:
        cl.disconnect()
        cl.loop_stop()


# ---- A delayed will across a broker restart -----------------------------------------------------

def test_delayed_will_survives_kill9(tmp_path):
    proc = MagnetarProcess(["mqttListeners=mqtt://127.0.0.1:0"], workdir=str(tmp_path),
                           data_in_workdir=False)
    proc.start()
    topic = f"dw/{uuid.uuid4().hex[:8]}"
    try:
        port = port_of(proc)
        # Device 1 goes away; its will is due 6 s later. Device 2 too, but comes back in time.
        raw_will_connect(port, 5, "dw-1", topic, b"dev1-lost", will_delay=6, session_expiry=120,
                         clean=False).close()
        raw_will_connect(port, 5, "dw-2", topic, b"dev2-lost", will_delay=6, session_expiry=120,
                         clean=False).close()
        closed_at = time.time()
        time.sleep(1.0)  # the closes are seen and the sessions written
        proc.kill()
        proc.start()
        port = port_of(proc)
        sub = Client(port, V5)
        back = None
        try:
            sub.subscribe(topic, 1)
            back = raw_will_connect(port, 5, "dw-2", topic, b"dev2-final", session_expiry=120,
                                    clean=False)
            m = sub.receive(1, timeout_s=15)[0]
            assert m.payload == b"dev1-lost"
            assert time.time() - closed_at >= 5.0, "not before its delay"
            sub.nothing(3.0)  # dev2 came back: no will; dev1's is published once
        finally:
            if back:
                back.sendall(b"\xe0\x00")
                read_until_closed(back)
            sub.close()
        # Published: a second restart does not publish it again.
        proc.kill()
        proc.start()
        sub = Client(port_of(proc), V5)
        try:
            sub.subscribe(topic, 1)
            sub.nothing(3.0)
        finally:
            sub.close()
    finally:
        proc.close()
