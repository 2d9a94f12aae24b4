"""A consumer whose socket does not drain holds little of the broker's memory. A raw client
subscribes with many permits, then reads nothing from a small receive window; a producer sends
about 100 MB of 256 KB messages that an official client on another subscription takes at once.
The broker stops dispatching to the stalled connection when its outbound queue passes
pulsarChannelWriteBufferHighWaterMark (one dispatch pass gives a consumer at most
dispatcherMaxReadSizeBytes), so only a few messages go its way and the broker's RSS does not grow
by the 100 MB. When the client reads again, the queue drains below the low watermark, dispatch
goes on, and every message arrives once, in order. (Before, the broker queued all of them to the
stalled socket.)"""

import os
import socket
import struct
import time

import pulsar
import requests

from hostile_wire import (
    MESSAGE,
    PING,
    PONG,
    SUCCESS,
    HostileBroker,
    WireClient,
    base_command,
    decode,
    flow_frame,
    frame,
    port_of,
    subscribe_frame,
)

MESSAGES = 400
MESSAGE_BYTES = 256 * 1024


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def stalled_client(port: int) -> WireClient:
    """A raw client whose receive window is a few KB (set before connect, so it holds)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    client = WireClient.__new__(WireClient)
    client.sock = s
    client.buf = b""
    return client


def sub_stats(admin_url: str, topic: str, sub: str) -> dict:
    local = topic.rsplit("/", 1)[1]
    r = requests.get(f"{admin_url}/admin/v2/persistent/public/default/{local}/stats", timeout=30)
    r.raise_for_status()
    return r.json()["subscriptions"][sub]


def test_stalled_consumer_socket_is_held_at_the_watermark_then_resumes():
    broker = HostileBroker(["numIOThreads=1", "managedLedgerCacheSizeMB=8",
                            "journalSyncData=false"])
    endpoint = broker.start()
    slow = None
    try:
        topic = f"persistent://public/default/slow-socket-{int(time.time() * 1000)}"
        slow = stalled_client(port_of(endpoint))
        slow.handshake()
        slow.send(subscribe_frame(topic, "stalled", 1, 1, earliest=True))
        slow.expect(SUCCESS)
        slow.send(flow_frame(1, 100000))

        client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=60)
        fast = client.subscribe(topic, "fast", receiver_queue_size=50)
        producer = client.create_producer(topic, batching_enabled=False,
                                          max_pending_messages=64, block_if_queue_full=True)
        rss_before = rss_mb(broker.pid)
        peak = rss_before
        for i in range(MESSAGES):
            producer.send_async(struct.pack(">I", i) + bytes(MESSAGE_BYTES - 4), None)
            if i % 50 == 0:
                peak = max(peak, rss_mb(broker.pid))
        producer.flush()
        for i in range(MESSAGES):
            msg = fast.receive(timeout_millis=30000)
            assert struct.unpack(">I", msg.data()[:4])[0] == i
            fast.acknowledge(msg)
            if i % 50 == 0:
                peak = max(peak, rss_mb(broker.pid))
        time.sleep(0.5)
        peak = max(peak, rss_mb(broker.pid))
        held = sub_stats(broker.admin_url, topic, "stalled")["msgOutCounter"]
        # Kernel buffers (a few MB on loopback) + 64 KB + one 5 MB pass: some tens of messages.
        assert held < 100, f"{held} of {MESSAGES} messages were dispatched to a stalled socket"
        # Under a sanitizer RSS says nothing (ASan's quarantine keeps up to 256 MB of freed
        # blocks); the held count above is the check there.
        if not os.environ.get("MAGNETAR_SANITIZED"):
            assert peak - rss_before < 60, f"RSS grew {peak - rss_before:.0f} MB"

        # The client reads again: the rest follows, each message once and in order.
        slow.sock.settimeout(30)
        ids = []
        while len(ids) < MESSAGES:
            cmd = slow.recv_command()
            assert cmd is not None, "the broker closed the stalled connection"
            if cmd[0] == PING:
                slow.send(frame(base_command(PONG, b"")))
            if cmd[0] != MESSAGE:
                continue
            mid = decode(cmd[1][2][0])  # CommandMessage.message_id: (ledgerId, entryId)
            ids.append((mid[1][0], mid[2][0]))
        assert ids == sorted(set(ids)), "messages repeated or out of order"
        assert sub_stats(broker.admin_url, topic, "stalled")["msgOutCounter"] == MESSAGES
        client.close()
    finally:
        if slow:
            slow.close()  # a stalled peer would hold up the graceful shutdown
        broker.close()
