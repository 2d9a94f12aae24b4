"""Bounded memory under a publish flood into slowed storage.

500 producers publish without pause into a broker whose journal sleeps in every group commit
(the MAGNETAR_TEST_STORAGE_DELAY_MICROS test hook), so publishes arrive much faster than storage
takes them. maxMessagePublishBufferSizeInMB makes the I/O threads stop reading instead of
buffering: the broker's peak RSS (VmHWM) stays under a stated bound however much is sent, and
every message still arrives, exactly once, after storage catches up.

CI runs the short version (test_flood_into_slow_storage_keeps_rss_bounded). The table in
docs/memory-limits.md comes from the command-line mode:

    MAGNETAR_BIN=build/src/app/magnetar .venv/bin/python tests/integration/test_publish_flood.py \
        --io-threads 2 8 32 --buffer-mb 64 --messages-per-producer 200
"""

import argparse
import os
import threading
import time
import urllib.request

import pulsar

from harness.broker import MagnetarProcess
from harness.util import proc_status_kb, sanitized

DELAY_ENV = "MAGNETAR_TEST_STORAGE_DELAY_MICROS"


def metric_sum(admin_url, name):
    text = urllib.request.urlopen(admin_url + "/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{"))


def run_flood(io_threads, buffer_mb, producers=500, clients=25, messages_per_producer=40,
              payload_bytes=4096, storage_delay_us=5000, group_bytes=65536, cache_mb=8,
              timeout_s=240):
    """Starts a broker with slowed storage, floods it, consumes everything. Returns a dict with
    peak RSS (MB), counts and timings."""
    settings = [
        f"numIOThreads={io_threads}",
        f"maxMessagePublishBufferSizeInMB={buffer_mb}",
        f"managedLedgerCacheSizeMB={cache_mb}",
        f"journalBufferedWritesThreshold={group_bytes}",
        "journalSyncData=false",
    ]
    broker = MagnetarProcess(settings)
    old = os.environ.get(DELAY_ENV)
    os.environ[DELAY_ENV] = str(storage_delay_us)  # inherited by the broker process only
    try:
        endpoint = broker.start()
    finally:
        if old is None:
            os.environ.pop(DELAY_ENV, None)
        else:
            os.environ[DELAY_ENV] = old
    try:
        pid = broker.proc.pid
        rss_idle_mb = proc_status_kb(pid, "VmRSS") / 1024
        with_sanitizer = sanitized(pid)
        topic = f"persistent://public/default/flood-{int(time.time() * 1000)}"
        total = producers * messages_per_producer
        consumer_client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=120)
        consumer = consumer_client.subscribe(topic, "sub", receiver_queue_size=1000)

        # Producers spread over `clients` connections (each Python client is one connection).
        conns = [pulsar.Client(endpoint.service_url, operation_timeout_seconds=120)
                 for _ in range(clients)]
        prods = [conns[i % clients].create_producer(
                     topic, producer_name=f"flood-{i}", batching_enabled=False,
                     block_if_queue_full=True, max_pending_messages=messages_per_producer,
                     send_timeout_millis=0)
                 for i in range(producers)]
        errors = []
        received = {}
        duplicates = []

        def consume():
            deadline = time.time() + timeout_s
            while len(received) < total and time.time() < deadline:
                try:
                    m = consumer.receive(1000)
                except pulsar.Timeout:
                    continue
                key = bytes(m.data()[:24])
                if key in received:
                    duplicates.append(key)
                received[key] = True
                consumer.acknowledge(m)

        reader = threading.Thread(target=consume)
        reader.start()
        filler = b"x" * payload_bytes
        start = time.time()
        # Round-robin over the producers: all 500 publish at once, none waits for a receipt.
        for n in range(messages_per_producer):
            for i, p in enumerate(prods):
                key = b"%08d-%015d" % (i, n)
                p.send_async(key + filler[len(key):],
                             lambda r, _mid: r != pulsar.Result.Ok and errors.append(r))
        sent_s = time.time() - start
        for p in prods:
            p.flush()
        persisted_s = time.time() - start
        reader.join()
        delivered_s = time.time() - start
        peak_mb = proc_status_kb(pid, "VmHWM") / 1024
        pauses = metric_sum(endpoint.admin_url, "magnetar_io_thread_read_paused_total")
        pending = metric_sum(endpoint.admin_url, "magnetar_io_thread_publish_pending_bytes")
        for c in conns:
            c.close()
        consumer_client.close()
        return {
            "io_threads": io_threads, "buffer_mb": buffer_mb, "producers": producers,
            "connections": clients, "messages": total,
            "volume_mb": total * payload_bytes / 2**20, "received": len(received),
            "duplicates": len(duplicates), "errors": len(errors), "idle_rss_mb": rss_idle_mb,
            "peak_rss_mb": peak_mb, "read_pauses": pauses, "pending_bytes_after": pending,
            "sanitizer": with_sanitizer, "send_loop_s": sent_s, "persisted_s": persisted_s,
            "delivered_s": delivered_s,
        }
    finally:
        broker.close()


# CI: 500 producers over 25 connections, 40 messages of 4 KiB each (78 MiB), into storage slowed
# to about 13 MB/s (5 ms per group commit of at most 64 KiB), with an 8 MB publish buffer and an
# 8 MB entry cache. The broker idles near 15 MB; its peak may grow by at most 40 MB (buffer + cache
# + slack). Measured: +12 MB with the throttle, +69 MB with maxMessagePublishBufferSizeInMB=-1.
RSS_GROWTH_BOUND_MB = 40


def test_flood_into_slow_storage_keeps_rss_bounded():
    r = run_flood(io_threads=2, buffer_mb=8)
    assert r["errors"] == 0
    assert r["duplicates"] == 0
    assert r["received"] == r["messages"], "every message arrives once storage catches up"
    assert r["read_pauses"] > 0, "the I/O threads never had to stop reading"
    assert r["pending_bytes_after"] == 0
    if not r["sanitizer"]:
        assert r["peak_rss_mb"] - r["idle_rss_mb"] < RSS_GROWTH_BOUND_MB, r


def main():
    ap = argparse.ArgumentParser(description="Peak broker RSS under the publish flood")
    ap.add_argument("--io-threads", type=int, nargs="+", default=[2, 8, 32])
    ap.add_argument("--buffer-mb", type=int, default=64)
    ap.add_argument("--producers", type=int, default=500)
    ap.add_argument("--connections", type=int, default=25)
    ap.add_argument("--messages-per-producer", type=int, default=200)
    ap.add_argument("--payload-bytes", type=int, default=4096)
    ap.add_argument("--storage-delay-us", type=int, default=5000)
    a = ap.parse_args()
    print("| numIOThreads | maxMessagePublishBufferSizeInMB | share per thread (MB) | messages | "
          "volume (MB) | idle RSS (MB) | peak RSS (MB) | read pauses | all delivered once | "
          "time to deliver (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in a.io_threads:
        r = run_flood(io_threads=n, buffer_mb=a.buffer_mb, producers=a.producers,
                      clients=a.connections, messages_per_producer=a.messages_per_producer,
                      payload_bytes=a.payload_bytes, storage_delay_us=a.storage_delay_us)
        ok = r["received"] == r["messages"] and r["duplicates"] == 0 and r["errors"] == 0
        share = a.buffer_mb / n if a.buffer_mb > 0 else float("nan")
        print(f"| {n} | {a.buffer_mb} | {share:.1f} | {r['messages']} | {r['volume_mb']:.0f} | "
              f"{r['idle_rss_mb']:.0f} | {r['peak_rss_mb']:.0f} | {r['read_pauses']:.0f} | "
              f"{'yes' if ok else 'NO'} | {r['delivered_s']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
