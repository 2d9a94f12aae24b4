"""A malformed frame from one client costs that client its connection and nothing else: a
producer and a consumer on other connections keep working throughout, in order."""

import os
import socket
import struct
import sys
import threading
import time

import pulsar
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "differential"))
from brokers import MagnetarProcess  # noqa: E402


@pytest.fixture(scope="module")
def broker():
    proc = MagnetarProcess()
    endpoint = proc.start()
    yield endpoint, proc
    proc.stop()


def port_of(endpoint):
    return int(endpoint.service_url.rsplit(":", 1)[1])


BAD_FRAMES = {
    "not a command": struct.pack(">II", 8, 4) + b"abcd",
    "cmdSize beyond frame": struct.pack(">II", 8, 100) + b"abcd",
    "huge totalSize": struct.pack(">I", 0x7FFFFFF0) + b"\x00" * 16,
    "negative totalSize": struct.pack(">i", -5) + b"\x00" * 8,
    "tiny totalSize": struct.pack(">I", 2) + b"\x00\x00",
    # A well-formed CONNECT (type 2, field 2; client_version "x", protocol_version 21), then SEND
    # for a producer that does not exist.
    "send before producer": (
        struct.pack(">II", 4 + 11, 11) + bytes([0x08, 0x02, 0x12, 0x07, 0x0a, 0x01, 0x78, 0x20,
                                                 0x15, 0x00, 0x00])[:11]
        + struct.pack(">II", 4 + 6, 6) + bytes([0x08, 0x06, 0x32, 0x02, 0x08, 0x07])),
}


def send_garbage(port, data):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass  # the broker may answer (e.g. CONNECTED) before it closes
        except socket.timeout:
            return False
        return True  # closed by the broker


def test_malformed_frames_leave_other_clients_unaffected(broker):
    endpoint, proc = broker
    port = port_of(endpoint)
    topic = f"persistent://public/default/hostile-{int(time.time() * 1000)}"
    client = pulsar.Client(endpoint.service_url)
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=False)
    stop = threading.Event()
    sent = []

    def produce():
        i = 0
        while not stop.is_set():
            producer.send(b"%d" % i)
            sent.append(i)
            i += 1
            time.sleep(0.002)

    t = threading.Thread(target=produce)
    t.start()
    try:
        for name, data in BAD_FRAMES.items():
            assert send_garbage(port, data), f"{name}: the broker should close that connection"
        # Half a frame that never completes (slowloris): the broker keeps it, others carry on.
        lingering = socket.create_connection(("127.0.0.1", port), timeout=5)
        lingering.sendall(struct.pack(">I", 1000) + b"\x00" * 10)
    finally:
        time.sleep(0.2)
        stop.set()
        t.join()
    got = []
    while len(got) < len(sent):
        m = consumer.receive(5000)
        got.append(int(m.data()))
        consumer.acknowledge(m)
    assert got == sent
    assert proc.proc.poll() is None, "the broker is still running"
    lingering.close()
    client.close()
