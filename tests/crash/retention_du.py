#!/usr/bin/env python3
"""Disk usage before and after trimming: a long run, not in CI (docs/storage-format.md).

Starts `magnetar standalone` on a fresh data directory, writes --mb MiB to one topic with a
subscription (64 KiB messages, no batching) while a second topic gets 10 msg/s, acks everything
on the big topic, and prints `du` of the data directory and the topic's storageSize: before the
ack, after trimming (the consumed ledgers deleted) and after compaction (segments shared with the
small topic copied forward). Retention 0 (the default), rollover every 2000 entries, compaction
every 10 s so the run is short.

Usage: MAGNETAR_BIN=build/src/app/magnetar retention_du.py [--mb 2048] [--keep]
"""

import argparse
import os
import subprocess
import sys
import threading
import time

import pulsar
import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.broker import MagnetarProcess  # noqa: E402


def du(path):
    return int(subprocess.run(["du", "-sb", path], capture_output=True, text=True,
                              check=True).stdout.split()[0])


def storage_size(admin, topic):
    r = requests.get(f"{admin}/admin/v2/persistent/public/default/{topic}/stats", timeout=30)
    r.raise_for_status()
    return r.json()["storageSize"]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=2048)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    broker = MagnetarProcess(["managedLedgerMaxEntriesPerLedger=2000",
                              "managedLedgerMinLedgerRolloverTimeMinutes=0",
                              "journalMaxSizeMB=256", "minorCompactionInterval=10",
                              "majorCompactionInterval=20", "compactionRateByBytes=100000000"],
                             prefix="magnetar-retention-du-")
    ep = broker.start()
    client = pulsar.Client(ep.service_url)
    big, small = "persistent://public/default/big", "persistent://public/default/small"
    consumer = client.subscribe(big, "s", receiver_queue_size=1000)
    client.subscribe(small, "s").close()
    stop = threading.Event()

    def trickle():
        p = client.create_producer(small)
        while not stop.is_set():
            p.send(b"x" * 100)
            time.sleep(0.1)

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    p = client.create_producer(big, batching_enabled=False, max_pending_messages=2000,
                               block_if_queue_full=True)
    payload = os.urandom(64 * 1024)
    n = args.mb * 16
    for _ in range(n):
        p.send_async(payload, None)
    p.flush()
    data = broker.workdir
    print(f"written: {n} x 64 KiB; du {du(data) / 2**20:.0f} MiB, "
          f"storageSize {storage_size(ep.admin_url, 'big') / 2**20:.0f} MiB", flush=True)
    last = None
    for _ in range(n):
        last = consumer.receive()
    consumer.acknowledge_cumulative(last)
    time.sleep(3)
    print(f"acked and trimmed: du {du(data) / 2**20:.0f} MiB, "
          f"storageSize {storage_size(ep.admin_url, 'big') / 2**20:.0f} MiB", flush=True)
    time.sleep(45)
    m = requests.get(f"{ep.admin_url}/metrics", timeout=30).text
    compacted = [line for line in m.splitlines()
                 if line.startswith("magnetar_storage_segments_compacted_total")]
    print(f"after compaction: du {du(data) / 2**20:.0f} MiB ({compacted})", flush=True)
    stop.set()
    t.join()
    client.close()
    broker.stop()
    if not args.keep:
        broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
