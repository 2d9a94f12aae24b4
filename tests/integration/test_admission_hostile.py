"""Hostile reproductions for the frame admission of issue 25 (FrameAdmission,
src/broker/service/publish_throttle.h): frames whose body is still to be read are charged whole at
their 8-byte header against maxMessagePublishBufferSizeInMB, and while anything waits every
connection reads one header at a time.

Each test failed on the admission as first merged (d825645), which queued every frame:

- Headers of frames whose body never comes filled the whole limit with claims that hold no
  memory: 70 connections that never sent CONNECT (or 5 connected ones with 4 MB frames) froze
  every connection of the broker until keep-alive closed them (30 s or 60 s by default).
- A connection without a producer (a consumer's FLOW and ACK, a new client's CONNECT, PING)
  waited in the same queue behind the big frames of a publish flood.
- With TLS, a connection waiting at its header kept the rest of a decrypted read (up to 64 KiB)
  that no limit counted.

Now frames of at most one read (64 KiB) are never queued, and no bigger frame is allowed before
CONNECT (ServerCnx::kMaxUnqueuedFrame, docs/memory-limits.md).
"""

import os
import socket
import ssl
import statistics
import threading
import time

import pulsar
import pytest

from harness.broker import MagnetarProcess
from harness.tls import tls_certs, tls_settings  # noqa: F401 (fixture)
from harness.util import proc_status_kb
from hostile_wire import PONG, WireClient, entry, metric, ping_frame, send_frame

BUFFER_MB = 16
QUIET = pulsar.FileLogger(pulsar.LoggerLevel.Error, os.devnull)


def unfinished_frame(frame_bytes: int) -> bytes:
    """The first 100 bytes of a SEND frame of frame_bytes: a header and a valid command, then
    nothing of its body."""
    return send_frame(1, 0, entry("x", 0, b"z" * (frame_bytes - 60)))[:100]


def ping_round_trip(port: int, timeout: float) -> float:
    """Seconds for CONNECT + PING -> PONG on a new connection (inf when it does not complete)."""
    start = time.time()
    w = WireClient(port, timeout=timeout)
    try:
        w.handshake()
        w.alive()
        return time.time() - start
    except (OSError, AssertionError):
        return float("inf")
    finally:
        w.close()


@pytest.mark.parametrize("connected", [False, True], ids=["before-connect", "connected"])
def test_headers_of_frames_that_never_complete_do_not_freeze_the_broker(connected):
    """Claims that hold no memory (8-byte headers of frames whose body never comes) fill the whole
    publish buffer. The broker must still serve everyone else: a new client's CONNECT and PING,
    and a small publish of an existing producer. (main: nothing is read on any connection until
    keep-alive closes the claimants, 30 s before CONNECT, 60 s after.)"""
    broker = MagnetarProcess(["numIOThreads=2", f"maxMessagePublishBufferSizeInMB={BUFFER_MB}",
                              "managedLedgerCacheSizeMB=8"], prefix="magnetar-admission-")
    endpoint = broker.start()
    claimants = []
    client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=30, logger=QUIET)
    try:
        port = endpoint.port
        topic = f"persistent://public/default/admission-freeze-{time.time_ns()}"
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"before")
        # Before CONNECT a frame may be 64 KiB: 300 x 60 KB > 16 MiB. After, 5 x 4 MiB.
        count, frame_bytes = (5, 4 * 1024 * 1024) if connected else (300, 60_000)
        for _ in range(count):
            w = WireClient(port, timeout=60)
            if connected:
                w.handshake()
            w.send(unfinished_frame(frame_bytes))
            claimants.append(w)
        time.sleep(1)
        pending = metric(broker.admin_url, "magnetar_publish_buffer_pending_bytes")
        # Connected: the big frames were admitted and hold the whole buffer. Before CONNECT: no
        # frame is big enough to be admitted or to wait (each holds at most one read).
        assert pending > 12 * 2**20 if connected else pending == 0, pending
        ping = ping_round_trip(port, timeout=5)
        start = time.time()
        sent = threading.Event()
        producer.send_async(b"during", lambda res, _id: res == pulsar.Result.Ok and sent.set())
        sent.wait(5)
        send_s = time.time() - start
        assert ping < 2 and sent.is_set(), \
            f"new connection's CONNECT+PING {ping:.2f} s, small send {send_s:.2f} s"
    finally:
        for w in claimants:
            w.close()
        client.close()
        broker.close()


def test_connections_without_producers_are_read_while_big_frames_wait():
    """A publish flood of 4.9 MB messages keeps frames waiting for the 16 MB buffer. A connection
    without a producer must still be read at once (Pulsar pauses only the connections that
    publish; docs/memory-limits.md says the same for the per-thread share): its PINGs are answered
    without waiting for the flood's frames. (main: every frame of every connection joins the
    queue; PONGs on a connected connection took 0.55-2.4 s with 20 producers, under 10 ms with the
    buffer off; a new client took 25 s to create a producer.)"""
    os.environ["MAGNETAR_TEST_STORAGE_DELAY_MICROS"] = "100000"
    broker = MagnetarProcess(["numIOThreads=4", f"maxMessagePublishBufferSizeInMB={BUFFER_MB}",
                              "managedLedgerCacheSizeMB=8", "journalSyncData=false",
                              "journalBufferedWritesThreshold=65536"],
                             prefix="magnetar-admission-")
    try:
        endpoint = broker.start()
    finally:
        os.environ.pop("MAGNETAR_TEST_STORAGE_DELAY_MICROS", None)
    stop = threading.Event()
    clients = []
    try:
        topic = f"persistent://public/default/admission-flood-{time.time_ns()}"
        payload = os.urandom(4_900_000)

        progress = {"producers": 0, "sent": 0, "errors": []}

        def flood():
            c = pulsar.Client(endpoint.service_url, operation_timeout_seconds=120, logger=QUIET)
            clients.append(c)
            try:
                p = c.create_producer(topic, batching_enabled=False, send_timeout_millis=0)
            except pulsar.PulsarException as e:
                progress["errors"].append(repr(e))
                return
            progress["producers"] += 1
            while not stop.is_set():
                try:
                    p.send(payload)
                    progress["sent"] += 1
                except pulsar.PulsarException:
                    return  # closed at the end of the test

        for _ in range(20):
            threading.Thread(target=flood, daemon=True).start()
        # 60 s: on a loaded machine (CI's parallel workers) 20 s once saw no waiting frame.
        waited = wait_for_waiters(broker.admin_url, 60)
        assert waited, f"the flood never made frames wait: {progress}"
        w = WireClient(endpoint.port, timeout=30)
        w.handshake()
        rtts = []
        for _ in range(10):
            start = time.time()
            w.send(ping_frame())
            w.expect(PONG)
            rtts.append(time.time() - start)
            time.sleep(0.2)
        w.close()
        assert statistics.median(rtts) < 0.3, f"PONG after {[round(r, 2) for r in rtts]} s"
    finally:
        stop.set()
        for c in clients:
            c.close()
        broker.close()


def wait_for_waiters(admin_url: str, timeout: float) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if metric(admin_url, "magnetar_publish_frames_waiting") > 0:
            return True
        time.sleep(0.2)
    return False


def test_tls_connections_waiting_at_a_header_hold_no_read(tls_certs):  # noqa: F811
    """While frames wait, a plaintext connection reads up to the next header and holds 8 bytes;
    a TLS connection decrypts a whole read. Connections that have not sent CONNECT (no
    credentials needed) and send the header and 62 KiB of a 256 KiB frame must not cost more than
    idle TLS connections plus a few KB: the frame is over the 64 KiB allowed before CONNECT, so
    the header closes them. (Before: they waited for admission, each keeping a decrypted read:
    about 116 KB against 49 KB for an idle TLS connection; 1,500 of them took a 16/8 MB broker,
    bound 152 MB, to 197 MB.)"""
    broker = MagnetarProcess(tls_settings(tls_certs) + [
        "numIOThreads=2", f"maxMessagePublishBufferSizeInMB={BUFFER_MB}",
        "managedLedgerCacheSizeMB=8"], prefix="magnetar-admission-")
    endpoint = broker.start()
    claimants, conns = [], []
    try:
        for _ in range(5):  # fill the buffer with admitted 4 MiB frames: from now on frames wait
            w = WireClient(endpoint.port, timeout=60)
            w.handshake()
            w.send(unfinished_frame(4 * 1024 * 1024))
            claimants.append(w)
        deadline = time.time() + 5
        while metric(broker.admin_url, "magnetar_publish_buffer_pending_bytes") < 15 * 2**20:
            assert time.time() < deadline, "the claimants' frames were not admitted"
            time.sleep(0.2)
        ctx = ssl.create_default_context(cafile=tls_certs.ca)
        ctx.check_hostname = False
        tls_port = int(endpoint.service_url_tls.rsplit(":", 1)[1])
        body = send_frame(1, 0, entry("x", 0, b"z" * 261_000))[:62 * 1024]

        refused = []

        def open_tls(n: int, send: bool) -> float:
            before = proc_status_kb(broker.pid, "VmRSS") / 1024
            for _ in range(n):
                s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", tls_port), timeout=30),
                                    server_hostname="localhost")
                if send:
                    try:
                        s.sendall(body)
                    except OSError:  # closed at the header (ssl.SSLError is an OSError)
                        refused.append(s)
                conns.append(s)
            time.sleep(2)
            return (proc_status_kb(broker.pid, "VmRSS") / 1024 - before) * 1024 / n

        idle_kb = open_tls(500, send=False)
        waiting_kb = open_tls(1000, send=True)
        assert waiting_kb < idle_kb + 16, \
            f"a waiting TLS connection costs {waiting_kb:.0f} KB, an idle one {idle_kb:.0f} KB"
        assert metric(broker.admin_url, "magnetar_publish_frames_waiting") <= 1
        print(f"idle TLS {idle_kb:.0f} KB, sending {waiting_kb:.0f} KB per connection; "
              f"{len(refused)} of 1000 saw the close while sending")
    finally:
        for s in conns:
            s.close()
        for w in claimants:
            w.close()
        broker.close()
