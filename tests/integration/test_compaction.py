"""Compaction on Magnetar's own storage: the compacted view survives a restart, a kill -9 during
compaction leaves the old or the new view, automatic compaction past the threshold, and the
throughput figure (MB/s) of a compaction run.

Throughput alone: COMPACTION_MB=200 .venv/bin/python -m pytest -q -s \
    tests/integration/test_compaction.py -k throughput
"""

import os
import signal
import tempfile
import time

import pulsar
import requests
from pulsar import MessageId

from harness.broker import restartable_magnetar


def rest(topic: str) -> str:
    return topic.replace("persistent://", "persistent/")


def wait_compaction(admin: str, topic: str, timeout_s: float = 120.0) -> dict:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        s = requests.get(f"{admin}/admin/v2/{rest(topic)}/compaction", timeout=30).json()
        if s["status"] != "RUNNING":
            return s
        time.sleep(0.05)
    raise AssertionError("compaction did not finish")


def read_compacted(url: str, topic: str) -> dict:
    client = pulsar.Client(url)
    reader = client.create_reader(topic, MessageId.earliest, is_read_compacted=True)
    out = {}
    while reader.has_message_available():
        m = reader.read_next(10000)
        if m.partition_key():  # not a compacted_out placeholder of a re-batched batch
            out[m.partition_key()] = m.data()
    client.close()
    return out


def produce(url: str, topic: str, rounds: int, keys: int, size: int = 100) -> None:
    client = pulsar.Client(url)
    p = client.create_producer(topic, batching_enabled=True, batching_max_messages=500,
                               block_if_queue_full=True,
                               batching_max_publish_delay_ms=5)
    for r in range(rounds):
        for k in range(keys):
            p.send_async(b"%d:" % r + b"x" * size, None, partition_key=f"k{k}")
    p.flush()
    client.close()


def test_view_survives_restart_and_kill_during_compaction_keeps_a_view():
    topic = "persistent://public/default/compaction-crash"
    with tempfile.TemporaryDirectory(prefix="magnetar-compaction-") as d:
        d = os.environ.get("COMPACTION_CRASH_DIR", d)
        broker = restartable_magnetar(d)
        ep = broker.start()
        produce(ep.service_url, topic, rounds=2, keys=50)
        requests.put(f"{ep.admin_url}/admin/v2/{rest(topic)}/compaction", timeout=30)
        assert wait_compaction(ep.admin_url, topic)["status"] == "SUCCESS"
        first = read_compacted(ep.service_url, topic)
        assert len(first) == 50 and all(v.startswith(b"1:") for v in first.values())

        # More data, then kill -9 at several points of the next compaction.
        produce(ep.service_url, topic, rounds=40, keys=50)
        for delay in (0.0, 0.005, 0.02, 0.08):
            requests.put(f"{ep.admin_url}/admin/v2/{rest(topic)}/compaction", timeout=30)
            time.sleep(delay)
            broker.stop(signal.SIGKILL)
            ep = broker.start()
            view = read_compacted(ep.service_url, topic)
            # Either the old view (round 1) or the new one (round 39), never a mix or nothing.
            rounds = {v.split(b":")[0] for v in view.values()}
            assert len(view) == 50 and rounds in ({b"1"}, {b"39"}), rounds
        requests.put(f"{ep.admin_url}/admin/v2/{rest(topic)}/compaction", timeout=30)
        assert wait_compaction(ep.admin_url, topic)["status"] == "SUCCESS"
        broker.stop()
        ep = broker.start()
        view = read_compacted(ep.service_url, topic)
        assert {v.split(b":")[0] for v in view.values()} == {b"39"}
        # Only the current compacted ledger is left after the restarts.
        internal = requests.get(f"{ep.admin_url}/admin/v2/{rest(topic)}/internalStats",
                                timeout=30).json()
        assert internal["compactedLedger"]["entries"] >= 1
        broker.stop()


def test_view_is_read_after_the_ledgers_it_covers_are_trimmed():
    # A restart starts a new ledger, so the compaction cursor (the only durable one) moves past
    # the old ledger and storage trims it: the view alone then holds the keys.
    topic = "persistent://public/default/compaction-trimmed"
    with tempfile.TemporaryDirectory(prefix="magnetar-compaction-") as d:
        broker = restartable_magnetar(d)
        ep = broker.start()
        produce(ep.service_url, topic, rounds=2, keys=50)
        broker.stop()
        ep = broker.start()
        requests.put(f"{ep.admin_url}/admin/v2/{rest(topic)}/compaction", timeout=30)
        assert wait_compaction(ep.admin_url, topic)["status"] == "SUCCESS"
        deadline = time.time() + 30
        while time.time() < deadline:
            internal = requests.get(f"{ep.admin_url}/admin/v2/{rest(topic)}/internalStats",
                                    timeout=30).json()
            if sum(ledger["entries"] for ledger in internal["ledgers"]) == 0:
                break
            time.sleep(0.1)
        assert sum(ledger["entries"] for ledger in internal["ledgers"]) == 0, internal["ledgers"]
        for _ in range(2):  # before and after a restart
            view = read_compacted(ep.service_url, topic)
            assert len(view) == 50 and {v.split(b":")[0] for v in view.values()} == {b"1"}
            broker.stop(signal.SIGKILL)
            ep = broker.start()
        broker.stop()


def test_automatic_compaction_past_the_threshold(magnetar):
    broker = magnetar(["brokerServiceCompactionThresholdInBytes=20000",
                       "brokerServiceCompactionMonitorIntervalInSeconds=1"])
    topic = "persistent://public/default/compaction-auto"
    produce(broker.endpoint.service_url, topic, rounds=5, keys=100)
    deadline = time.time() + 30
    status = {}
    while time.time() < deadline:
        status = requests.get(f"{broker.admin_url}/admin/v2/{rest(topic)}/compaction",
                              timeout=30).json()
        if status["status"] == "SUCCESS":
            break
        time.sleep(0.5)
    assert status["status"] == "SUCCESS"
    assert len(read_compacted(broker.endpoint.service_url, topic)) == 100


def test_compaction_throughput(magnetar):
    mb = int(os.environ.get("COMPACTION_MB", "20"))
    broker = magnetar()
    topic = "persistent://public/default/compaction-throughput"
    size = 1000
    keys = 10000
    rounds = max(1, mb * 1024 * 1024 // (size * keys))
    produce(broker.endpoint.service_url, topic, rounds=rounds, keys=keys, size=size)
    stats = requests.get(f"{broker.admin_url}/admin/v2/{rest(topic)}/stats", timeout=30).json()
    stored = stats["storageSize"]
    start = time.time()
    requests.put(f"{broker.admin_url}/admin/v2/{rest(topic)}/compaction", timeout=30)
    assert wait_compaction(broker.admin_url, topic)["status"] == "SUCCESS"
    elapsed = time.time() - start
    print(f"\ncompaction: {stored / 1e6:.1f} MB ({rounds * keys} messages, {keys} keys) in "
          f"{elapsed:.2f} s = {stored / 1e6 / elapsed:.1f} MB/s")
    assert len(read_compacted(broker.endpoint.service_url, topic)) == keys
