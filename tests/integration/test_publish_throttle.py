"""maxMessagePublishBufferSizeInMB: with a small buffer and many producers pushing 8 KB messages
without pause, the I/O threads pause reading when their share is full (the pause counters on
/metrics move), resume, and every message still arrives; the broker's memory stays bounded."""

import threading
import time
import urllib.request

import pulsar

from harness.broker import MagnetarProcess


def rss_peak_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0


def test_flood_with_small_publish_buffer_delivers_everything():
    broker = MagnetarProcess([
        "maxMessagePublishBufferSizeInMB=1", "numIOThreads=2", "journalSyncData=true",
        "managedLedgerCacheSizeMB=4"])
    endpoint = broker.start()
    try:
        topic = f"persistent://public/default/flood-{int(time.time() * 1000)}"
        client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=60)
        consumer = client.subscribe(topic, "sub", receiver_queue_size=1000)
        producers = 20
        per_producer = 300
        payload = b"x" * 8192
        errors = []

        def flood(i):
            c = pulsar.Client(endpoint.service_url, operation_timeout_seconds=60)
            p = c.create_producer(topic, producer_name=f"flood-{i}", batching_enabled=False,
                                  block_if_queue_full=True, max_pending_messages=1000)
            for n in range(per_producer):
                p.send_async(payload + b"%d-%d" % (i, n),
                             lambda r, _mid: r != pulsar.Result.Ok and errors.append(r))
            p.flush()
            c.close()

        threads = [threading.Thread(target=flood, args=(i,)) for i in range(producers)]
        for t in threads:
            t.start()
        got = 0
        deadline = time.time() + 120
        while got < producers * per_producer and time.time() < deadline:
            m = consumer.receive(30000)
            consumer.acknowledge(m)
            got += 1
        for t in threads:
            t.join()
        peak = rss_peak_mb(broker.proc.pid)
        metrics = urllib.request.urlopen(endpoint.admin_url + "/metrics", timeout=10).read()
        client.close()
        assert errors == []
        assert got == producers * per_producer
        pauses = sum(float(line.rsplit(" ", 1)[1]) for line in metrics.decode().splitlines()
                     if line.startswith("magnetar_io_thread_read_paused_total{"))
        assert pauses > 0, "the I/O threads never paused reading"
        pending = [float(line.rsplit(" ", 1)[1]) for line in metrics.decode().splitlines()
                   if line.startswith("magnetar_io_thread_publish_pending_bytes{")]
        assert len(pending) == 2 and all(p == 0 for p in pending), "all publishes released"
        # 48 MB of payload through a 1 MB buffer and a 4 MB entry cache.
        assert peak < 100, f"broker peak RSS {peak:.0f} MB"
    finally:
        broker.close()
