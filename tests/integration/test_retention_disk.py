"""Retention frees the disk, measured with `du` on the data directory (not only storageSize):
a consumed topic with a subscription, and a topic without subscriptions where the retention size
alone decides. A second topic keeps publishing meanwhile, so the journal segments are shared and
only segment compaction gives their space back. The 2 GB form: tests/crash/retention_du.py."""

import os
import subprocess
import threading
import time

import pulsar
import pytest
import requests

from harness.broker import MagnetarProcess

MIB = 1 << 20
SETTINGS = ["managedLedgerMaxEntriesPerLedger=50", "managedLedgerMinLedgerRolloverTimeMinutes=0",
            "journalMaxSizeMB=4", "minorCompactionInterval=2", "majorCompactionInterval=4",
            "compactionRateByBytes=100000000", "retentionCheckIntervalInSeconds=1"]


def du(path):
    out = subprocess.run(["du", "-sb", path], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def storage_size(admin, topic):
    r = requests.get(f"{admin}/admin/v2/persistent/public/default/{topic}/stats", timeout=30)
    r.raise_for_status()
    return r.json()["storageSize"]


@pytest.fixture
def trickling_broker(request):
    """A broker with small ledgers and segments, and a topic receiving 20 msg/s meanwhile."""
    proc = MagnetarProcess(SETTINGS + list(getattr(request, "param", [])),
                           prefix="magnetar-retention-")
    ep = proc.start()
    client = pulsar.Client(ep.service_url)
    client.subscribe("persistent://public/default/trickle", "s").close()
    stop = threading.Event()

    def trickle():
        p = client.create_producer("persistent://public/default/trickle")
        while not stop.is_set():
            p.send(b"t" * 200)
            time.sleep(0.05)

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    yield proc, ep, client
    stop.set()
    t.join()
    client.close()
    proc.close()


def write(client, topic, mib):
    p = client.create_producer(topic, batching_enabled=False, max_pending_messages=500,
                               block_if_queue_full=True)
    payload = os.urandom(64 * 1024)
    for _ in range(mib * 16):
        p.send_async(payload, None)
    p.flush()
    p.close()


def wait_du_below(path, limit, timeout_s=90):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if du(path) < limit:
            return du(path)
        time.sleep(0.5)
    raise AssertionError(f"du stayed at {du(path) / MIB:.1f} MiB, over {limit / MIB:.1f} MiB")


def test_consumed_topic_gives_its_disk_back(trickling_broker):
    proc, ep, client = trickling_broker
    topic = "persistent://public/default/consumed"
    consumer = client.subscribe(topic, "s", receiver_queue_size=1000)
    write(client, topic, 32)
    written = du(proc.workdir)
    assert written > 32 * MIB
    assert storage_size(ep.admin_url, "consumed") >= 32 * MIB
    last = None
    for _ in range(32 * 16):
        last = consumer.receive(10000)
    consumer.acknowledge_cumulative(last)
    after = wait_du_below(proc.workdir, 12 * MIB)
    print(f"consumed topic: du {written / MIB:.1f} -> {after / MIB:.1f} MiB")
    # The last ledger stays (Pulsar keeps the current one): one ledger of 50 x 64 KiB at most.
    assert storage_size(ep.admin_url, "consumed") <= 50 * 64 * 1024


@pytest.mark.parametrize("trickling_broker", [["defaultRetentionSizeInMB=8",
                                               "defaultRetentionTimeInMinutes=-1"]],
                         indirect=True)
def test_retention_size_alone_trims_a_topic_without_subscriptions(trickling_broker):
    proc, ep, client = trickling_broker
    write(client, "persistent://public/default/nosub", 32)
    written = du(proc.workdir)
    assert written > 32 * MIB
    after = wait_du_below(proc.workdir, 20 * MIB)
    size = storage_size(ep.admin_url, "nosub")
    print(f"no subscriptions, retention 8 MiB: du {written / MIB:.1f} -> {after / MIB:.1f} MiB, "
          f"storageSize {size / MIB:.1f} MiB")
    # Retention keeps the newest ledgers up to 8 MiB, plus at most one ledger past it.
    assert 8 * MIB - 50 * 64 * 1024 <= size <= 8 * MIB + 2 * 50 * 64 * 1024
    # What retention keeps is still readable, newest last.
    reader = client.create_reader("persistent://public/default/nosub", pulsar.MessageId.earliest)
    n = 0
    while reader.has_message_available():
        reader.read_next(10000)
        n += 1
    assert n * 64 * 1024 == pytest.approx(size, rel=0.05)
