"""A frame being read counts against the publish buffer: 40 producers, each on its own
connection, send 4 MB messages into slowed storage with a 16 MB publish buffer on one I/O thread.
Each frame is charged whole when its header arrives; over the share the other connections stop
at a frame boundary while the frames already charged complete. So the broker never holds 40
partial 4 MB frames (160 MB) at once: its peak RSS stays within the buffer, the cache and a
couple of frames, and every message still arrives once. (Before, each paused connection kept
its partial frame: the peak grew by about the number of connections x the frame size.)

The long form with 50 x 4.9 MB at the default and small limits is tools/memory/big_messages.py.
"""

import os
import threading
import time
import urllib.request

import pulsar

from harness.broker import MagnetarProcess
from harness.util import metric_sum, proc_status_kb, sanitized
from hostile_wire import WireClient, entry, send_frame

DELAY_ENV = "MAGNETAR_TEST_STORAGE_DELAY_MICROS"
PRODUCERS = 40
PER_PRODUCER = 3
MESSAGE_BYTES = 4 * 1024 * 1024
BUFFER_MB = 16
CACHE_MB = 8


def test_partial_big_frames_are_charged_and_rss_stays_bounded():
    broker = MagnetarProcess([
        "numIOThreads=1", f"maxMessagePublishBufferSizeInMB={BUFFER_MB}",
        f"managedLedgerCacheSizeMB={CACHE_MB}", "journalSyncData=false",
        "journalBufferedWritesThreshold=1048576"])
    # Storage at about 1 MB per 2 ms group commit: slower than 40 producers on loopback.
    os.environ[DELAY_ENV] = "2000"
    try:
        endpoint = broker.start()
    finally:
        os.environ.pop(DELAY_ENV, None)
    try:
        pid = broker.pid
        idle_mb = proc_status_kb(pid, "VmRSS") / 1024
        topic = f"persistent://public/default/big-frames-{int(time.time() * 1000)}"
        cclient = pulsar.Client(endpoint.service_url, operation_timeout_seconds=120)
        consumer = cclient.subscribe(topic, "sub", receiver_queue_size=2)
        errors = []
        payload = os.urandom(MESSAGE_BYTES - 64)

        def produce(i):
            try:
                c = pulsar.Client(endpoint.service_url, operation_timeout_seconds=120)
                p = c.create_producer(topic, producer_name=f"big-{i}", batching_enabled=False,
                                      send_timeout_millis=0)
                for n in range(PER_PRODUCER):
                    p.send(b"%04d-%04d" % (i, n) + payload)
                c.close()
            except Exception as e:  # noqa: BLE001
                errors.append(f"producer {i}: {e}")

        threads = [threading.Thread(target=produce, args=(i,)) for i in range(PRODUCERS)]
        for t in threads:
            t.start()
        seen = set()
        deadline = time.time() + 120
        while len(seen) < PRODUCERS * PER_PRODUCER and time.time() < deadline:
            try:
                m = consumer.receive(2000)
            except pulsar.Timeout:
                continue
            key = bytes(m.data()[:9])
            assert key not in seen, f"duplicate {key}"
            seen.add(key)
            consumer.acknowledge(m)
        for t in threads:
            t.join(timeout=60)
        peak_mb = proc_status_kb(pid, "VmHWM") / 1024
        text = urllib.request.urlopen(endpoint.admin_url + "/metrics", timeout=10).read().decode()
        cclient.close()
        assert errors == []
        assert len(seen) == PRODUCERS * PER_PRODUCER, "every message arrives once"
        # Reading stopped: at a frame boundary over the thread's share, or at a frame's header
        # while the broker's whole publish buffer was full (one thread: the same bound).
        assert metric_sum(text, "magnetar_io_thread_read_paused_total") + \
            metric_sum(text, "magnetar_publish_frames_waited_total") > 0, \
            "the broker never had to stop reading"
        assert metric_sum(text, "magnetar_publish_buffer_pending_bytes") == 0, \
            "every admitted frame is released"
        assert metric_sum(text, "magnetar_io_thread_publish_pending_bytes") == 0, \
            "every charge, partial frames included, is released"
        if not sanitized(pid):
            # Buffer + cache + one frame over the share + one frame started in the same read +
            # one frame being dispatched, and 32 MB for the rest. Measured on the 2-core box:
            # +49..57 MB; +125 MB before partial frames were charged.
            bound = BUFFER_MB + CACHE_MB + 3 * MESSAGE_BYTES / 2**20 + 32
            print(f"idle {idle_mb:.0f} MB, peak {peak_mb:.0f} MB, bound +{bound:.0f} MB")
            assert peak_mb - idle_mb < bound, (peak_mb, idle_mb, bound)
    finally:
        broker.close()


WAITERS = 60
WAITER_FRAME_BYTES = 4 * 1024 * 1024
WAITER_BUFFER_MB = 16


def test_frames_of_connections_without_producers_wait_at_their_header():
    """60 connected clients without a producer each start a 4 MB frame (a SEND for a producer
    they never created: read whole, then refused). Only what fits in the whole publish buffer
    (16 MB: 4 frames) is admitted and read; the others hold their 8-byte header and wait in one
    queue, on any number of I/O threads. As refused frames give their charge back, the waiters
    are admitted in turn: every frame is read and answered, and the charges come back to 0.
    (Before, each connection read its frame at once: 60 x 4 MB held together.)"""
    for io_threads in (2, 16):
        _frames_wait_at_their_header(io_threads)


def _frames_wait_at_their_header(io_threads):
    broker = MagnetarProcess([
        f"numIOThreads={io_threads}", f"maxMessagePublishBufferSizeInMB={WAITER_BUFFER_MB}",
        "managedLedgerCacheSizeMB=8"])
    endpoint = broker.start()
    try:
        pid = broker.pid
        idle_mb = proc_status_kb(pid, "VmRSS") / 1024
        big = send_frame(1, 0, entry("none", 0, os.urandom(WAITER_FRAME_BYTES - 100)))
        clients = []
        for _ in range(WAITERS):
            c = WireClient(endpoint.port, timeout=120)
            c.handshake()
            clients.append(c)
        # Each sends 3/4 of its frame, then the rest: the sender blocks while its
        # connection waits (the kernel's buffers hold the bytes, not the broker).
        part = 3 * len(big) // 4
        first_done = threading.Barrier(WAITERS + 1, timeout=120)
        go_on = threading.Event()
        closed = []
        errors = []

        def run(c):
            try:
                c.sock.settimeout(120)
                c.send(big[:part])
            except Exception as e:  # noqa: BLE001
                errors.append(f"first part: {e}")
            try:
                first_done.wait()
            except threading.BrokenBarrierError:
                pass
            go_on.wait(120)
            try:
                c.send(big[part:])
                closed.append(c.wait_closed(120))
            except (BrokenPipeError, ConnectionResetError):
                closed.append(True)
            except Exception as e:  # noqa: BLE001
                errors.append(f"rest: {e}")

        threads = [threading.Thread(target=run, args=(c,)) for c in clients]
        for t in threads:
            t.start()

        def metrics():
            text = urllib.request.urlopen(endpoint.admin_url + "/metrics",
                                          timeout=10).read().decode()
            return (metric_sum(text, "magnetar_publish_frames_waiting"),
                    metric_sum(text, "magnetar_publish_buffer_pending_bytes"),
                    metric_sum(text, "magnetar_publish_frames_waited_total"))

        deadline = time.time() + 60
        waiting, pending, _ = metrics()
        while waiting < WAITERS - 5 and time.time() < deadline:
            time.sleep(0.2)
            waiting, pending, _ = metrics()
        time.sleep(1)  # what was admitted has been read by now
        waiting, pending, _ = metrics()
        held_mb = proc_status_kb(pid, "VmRSS") / 1024 - idle_mb
        limit = WAITER_BUFFER_MB << 20
        assert waiting >= WAITERS - 5, (io_threads, waiting)
        assert pending <= limit, (io_threads, pending)
        go_on.set()
        try:
            first_done.wait()
        except threading.BrokenBarrierError:
            pass
        for t in threads:
            t.join(timeout=180)
        assert errors == [], errors
        assert len(closed) == WAITERS and all(closed), "every frame was read and answered"
        # The last frames' charges are released on their loops after the clients saw the close
        # (seconds later under ASan): wait for it; a leaked charge stays.
        deadline = time.time() + 15
        waiting, pending, waited = metrics()
        while (waiting or pending) and time.time() < deadline:
            time.sleep(0.2)
            waiting, pending, waited = metrics()
        peak_mb = proc_status_kb(pid, "VmHWM") / 1024 - idle_mb
        assert waited >= WAITERS - 5
        assert waiting == 0 and pending == 0, (waiting, pending)
        if not sanitized(pid):
            # The buffer, one frame more and 32 MB for the rest (60 x 3 MB = 180 MB
            # before).
            bound = WAITER_BUFFER_MB + WAITER_FRAME_BYTES / 2**20 + 32
            print(f"numIOThreads={io_threads}: {held_mb:.0f} MB held while waiting, "
                  f"peak +{peak_mb:.0f} MB, bound +{bound:.0f} MB")
            assert held_mb < bound and peak_mb < bound, (held_mb, peak_mb, bound)
    finally:
        broker.close()
