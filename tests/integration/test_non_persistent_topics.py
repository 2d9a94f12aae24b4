"""Non-persistent topics keep nothing (Pulsar's NonPersistentTopic): publishing to one writes no
file in the broker's directory, and a producer flooding one whose consumers cannot take the
messages (one without permits, one whose socket does not drain) leaves the broker's memory where
it was: each message goes out at once to a consumer that can take it or is dropped and counted
(msgDropCounter beside Pulsar's msgDropRate)."""

import os
import time

import pulsar
import requests
from test_slow_consumer_socket import stalled_client

from harness.util import proc_status_kb, receive_all, sanitized
from hostile_wire import (
    SUCCESS,
    HostileBroker,
    WireClient,
    flow_frame,
    port_of,
    subscribe_frame,
)


def dir_files(root: str, skip: set[str]) -> dict[str, int]:
    """Relative path -> size of every file under root, the paths in `skip` aside."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root)
            if rel in skip:
                continue
            try:
                out[rel] = os.path.getsize(p)
            except FileNotFoundError:
                pass  # removed while walking (a RocksDB log rolled)
    return out


def np_stats(admin_url: str, local: str) -> dict:
    r = requests.get(f"{admin_url}/admin/v2/non-persistent/public/default/{local}/stats",
                     timeout=30)
    r.raise_for_status()
    return r.json()


def test_publishing_to_a_non_persistent_topic_writes_no_file():
    broker = HostileBroker(["journalSyncData=false"])
    endpoint = broker.start()
    try:
        local = f"np-files-{int(time.time() * 1000)}"
        topic = f"non-persistent://public/default/{local}"
        skip = {os.path.relpath(broker.log_path, broker.workdir),
                os.path.relpath(broker.ports_file, broker.workdir)}
        client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=30)
        consumer = client.subscribe(topic, "s", receiver_queue_size=5000)
        producer = client.create_producer(topic, batching_enabled=False)
        time.sleep(2)  # start-up writes (metadata, the journal's first segment) settle
        before = dir_files(broker.workdir, skip)
        payload = bytes(10 * 1024)
        for _ in range(2000):  # 20 MB
            producer.send_async(payload, None)
        producer.flush()
        got = receive_all(consumer, 1500)
        assert len(got) > 0
        after = dir_files(broker.workdir, skip)
        grown = sum(after.values()) - sum(before.values())
        print(f"\n20 MB published: the directory grew {grown} B")
        assert not [p for p in after if local in p], "a file is named after the topic"
        # 20 MB went through; what was written meanwhile is unrelated metadata at most.
        assert grown < 1024 * 1024, {p: after[p] - before.get(p, 0) for p in after
                                     if after[p] != before.get(p, 0)}
        assert np_stats(endpoint.admin_url, local)["storageSize"] == 0
        client.close()
    finally:
        broker.close()


def test_flood_with_consumers_that_cannot_take_keeps_memory_bounded():
    broker = HostileBroker(["numIOThreads=2"])
    endpoint = broker.start()
    stalled = None
    no_permits = None
    try:
        local = f"np-flood-{int(time.time() * 1000)}"
        topic = f"non-persistent://public/default/{local}"
        # A consumer that never sends FLOW: no permits, so everything is dropped for it.
        no_permits = WireClient(port_of(endpoint), timeout=15)
        no_permits.handshake()
        no_permits.send(subscribe_frame(topic, "no-permits", 1, 1))
        no_permits.expect(SUCCESS)
        # A consumer with many permits whose socket does not drain: held at the watermark.
        stalled = stalled_client(port_of(endpoint))
        stalled.handshake()
        stalled.send(subscribe_frame(topic, "stalled", 1, 1))
        stalled.expect(SUCCESS)
        stalled.send(flow_frame(1, 1000000))
        time.sleep(0.5)

        client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=60)
        producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=500,
                                          block_if_queue_full=True)
        rss_before = proc_status_kb(broker.pid, "VmRSS") / 1024
        peak = rss_before
        payload = bytes(64 * 1024)
        sent = 4000  # 250 MB
        for i in range(sent):
            producer.send_async(payload, None)
            if i % 200 == 0:
                peak = max(peak, proc_status_kb(broker.pid, "VmRSS") / 1024)
        producer.flush()
        time.sleep(0.5)
        peak = max(peak, proc_status_kb(broker.pid, "VmRSS") / 1024)
        subs = np_stats(endpoint.admin_url, local)["subscriptions"]
        assert subs["no-permits"]["msgOutCounter"] == 0
        assert subs["no-permits"]["msgDropCounter"] == sent
        held = subs["stalled"]["msgOutCounter"]
        assert held < 200, f"{held} of {sent} messages were queued to a stalled socket"
        assert held + subs["stalled"]["msgDropCounter"] == sent
        assert subs["no-permits"]["msgBacklog"] == 0 and subs["stalled"]["msgBacklog"] == 0
        print(f"\nflood of {sent} x 64 KB: RSS {rss_before:.0f} -> peak {peak:.0f} MB; "
              f"stalled socket took {held}, dropped {subs['stalled']['msgDropCounter']}")
        if not sanitized(broker.pid):
            assert peak - rss_before < 80, f"RSS grew {peak - rss_before:.0f} MB"
        client.close()
    finally:
        for c in (stalled, no_permits):
            if c:
                c.close()
        broker.close()
