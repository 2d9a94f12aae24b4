"""Unload storms (issue 52 and the faults issue): producers send as fast as they can while the
admin API unloads their topic again and again; then everything is read back.

What must hold:
- every message with a receipt is read back, and with deduplication off none twice: a producer
  closed by the broker gets the receipts of its publishes in flight before CLOSE_PRODUCER, and a
  SEND that reaches the closed topic is neither stored nor answered (the client sends it again);
- SENDs already on the wire for a producer the broker just closed do not close the connection
  (Pulsar's recentlyClosedProducers);
- the broker stops on SIGTERM with exit code 0: before the fix an add refused by a closed ledger
  completed in a task of its own on the topic's ml-worker, after the connection had dropped the
  last reference to the unloaded PersistentTopic, and wrote into the freed topic (ASan:
  heap-use-after-free in PersistentTopic::publish's callback; release builds aborted at exit with
  "tcache_thread_shutdown(): unaligned tcache chunk detected").

The sanitizer CI stage runs this module on the ASan build with shorter storms; the long form is
`STORM_SECONDS=40 .venv/bin/python -m pytest tests/integration/test_unload_storm.py`. The TSan
subset runs its plain form.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import pulsar
import pytest
import requests

from harness.broker import MagnetarProcess
from harness.util import Receipts

SANITIZED = bool(os.environ.get("MAGNETAR_SANITIZER_LOG_DIR"))
STORM_S = float(os.environ.get("STORM_SECONDS", "4" if SANITIZED else "8"))


def unload_all(admin: str, names: list[str], stop: threading.Event, counter: list[int]) -> None:
    while not stop.is_set():
        for n in names:
            r = requests.put(f"{admin}/admin/v2/persistent/public/default/{n}/unload", timeout=60)
            assert r.status_code == 204, r.text
        counter[0] += 1
        stop.wait(0.2)


def live_consumers(client: pulsar.Client, topic: str, kind: pulsar.ConsumerType,
                   stop: threading.Event, got: list[int]) -> None:
    consumers = [client.subscribe(topic, "live", consumer_type=kind,
                                  initial_position=pulsar.InitialPosition.Earliest)
                 for _ in range(2)]
    while not stop.is_set():
        for c in consumers:
            try:
                c.acknowledge(c.receive(50))
                got[0] += 1
            except pulsar.Timeout:
                pass
    for c in consumers:
        c.close()


@pytest.mark.parametrize("dedup,batching,partitions,live", [
    (False, False, 0, None),
    (False, True, 2, pulsar.ConsumerType.KeyShared),
    (True, False, 0, pulsar.ConsumerType.Shared),
], ids=["plain", "batched-partitioned-keyshared", "dedup-shared"])
def test_unload_storm_loses_nothing_stores_nothing_twice_and_stops_cleanly(
        dedup, batching, partitions, live):
    broker = MagnetarProcess([f"brokerDeduplicationEnabled={str(dedup).lower()}"])
    try:
        ep = broker.start()
        name = f"storm-{uuid.uuid4().hex[:8]}"
        topic = f"persistent://public/default/{name}"
        names = [name]
        if partitions:
            r = requests.put(f"{ep.admin_url}/admin/v2/persistent/public/default/{name}/partitions",
                             json=partitions, timeout=30)
            assert r.status_code == 204, r.text
            names = [f"{name}-partition-{i}" for i in range(partitions)]
        client = pulsar.Client(ep.service_url, operation_timeout_seconds=60,
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        client.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest).close()
        stop = threading.Event()
        unloads = [0]
        live_got = [0]
        threads = [threading.Thread(target=unload_all, args=(ep.admin_url, names, stop, unloads))]
        if live is not None:
            threads.append(threading.Thread(target=live_consumers,
                                            args=(client, topic, live, stop, live_got)))
        producer = client.create_producer(
            topic, batching_enabled=batching, send_timeout_millis=0, block_if_queue_full=True,
            max_pending_messages=500)
        # The storm starts after the first receipt: the official C++ client (under the Python
        # one) restarts its sequence ids at PRODUCER_SUCCESS.last_sequence_id + 1 on every
        # reconnection until it has had a receipt, although its pending messages already hold
        # those ids; with deduplication the new messages are then answered as duplicates and
        # lost (ProducerImpl::handleCreateProducer; the Java client resets only before its first
        # message). Not the broker's doing: the last persisted id is Pulsar's answer.
        producer.send(b"first", partition_key="first")
        for t in threads:
            t.start()
        receipts = Receipts([b"first"])
        receipted, failed = receipts.ok, receipts.failed

        sent = 0
        # At least STORM_S, and at least 3 unload rounds (a slow sanitized broker), 120 s at most.
        end = time.time() + STORM_S
        cap = time.time() + 120
        while time.time() < cap and (time.time() < end or unloads[0] < 3):
            payload = b"%d" % sent
            producer.send_async(payload, receipts.callback(payload), partition_key=str(sent % 64))
            sent += 1
        producer.flush()
        stop.set()
        for t in threads:
            t.join(timeout=120)
        producer.close()
        assert unloads[0] >= 3, f"only {unloads[0]} unload rounds"
        assert not failed, failed[:5]
        assert len(receipted) == sent + 1

        consumer = client.subscribe(topic, "check", receiver_queue_size=5000)
        seen: list[bytes] = []
        while True:
            try:
                m = consumer.receive(3000 if len(seen) > sent else 20000)
            except pulsar.Timeout:
                break
            seen.append(m.data())
            consumer.acknowledge(m)
        consumer.close()
        client.close()
        duplicates = len(seen) - len(set(seen))
        lost = receipted - set(seen)
        assert not lost, f"{len(lost)} of {sent} receipted messages never read"
        assert duplicates == 0, (f"{duplicates} of {sent} stored twice over {unloads[0]} "
                                 f"unload rounds")
        print(f"\n{sent + 1} sent, {len(set(seen))} read back, 0 lost, 0 stored twice, over "
              f"{unloads[0]} unload rounds")
        log = open(broker.log_path, errors="replace").read()
        assert "SEND for unknown producer" not in log
        assert broker.stop(timeout_s=60) == 0, "SIGTERM did not end in exit code 0"
    finally:
        broker.close()
