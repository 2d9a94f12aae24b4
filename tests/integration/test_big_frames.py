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
from harness.util import metric_sum

DELAY_ENV = "MAGNETAR_TEST_STORAGE_DELAY_MICROS"
PRODUCERS = 40
PER_PRODUCER = 3
MESSAGE_BYTES = 4 * 1024 * 1024
BUFFER_MB = 16
CACHE_MB = 8


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def sanitized(pid):
    with open(f"/proc/{pid}/maps") as f:
        return any(lib in line for line in f for lib in ("libasan", "libtsan", "libubsan"))


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
        idle_mb = status_kb(pid, "VmRSS") / 1024
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
        peak_mb = status_kb(pid, "VmHWM") / 1024
        text = urllib.request.urlopen(endpoint.admin_url + "/metrics", timeout=10).read().decode()
        cclient.close()
        assert errors == []
        assert len(seen) == PRODUCERS * PER_PRODUCER, "every message arrives once"
        assert metric_sum(text, "magnetar_io_thread_read_paused_total") > 0, \
            "the I/O thread never had to stop reading"
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
