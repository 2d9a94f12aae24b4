"""Key_Shared subscription stats a user needs to debug a stuck subscription: per consumer its hash
ranges, permits, unacked count and draining hashes (Pulsar 4's names), per subscription the
draining totals and the entries held back by draining.

Scenario: a slow consumer holds (does not ack) messages of many keys; a second consumer joins and
takes over part of the hash space, so the hashes it got drain at the slow one. New messages of
those keys wait. Once the slow consumer acks, the draining clears and the joiner gets them."""

import json
import time
import urllib.request

import pulsar
from pulsar import ConsumerType

from harness.broker import MagnetarProcess
from harness.util import receive_for, wait_for

KEYS = 200


def topic_stats(admin_url, topic):
    local = topic.split("://", 1)[1]
    with urllib.request.urlopen(f"{admin_url}/admin/v2/persistent/{local}/stats", timeout=10) as r:
        return json.load(r)


def test_draining_shows_in_subscription_stats():
    broker = MagnetarProcess()
    endpoint = broker.start()
    try:
        client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=30)
        topic = f"persistent://public/default/ks-stats-{int(time.time() * 1000)}"
        slow = client.subscribe(topic, "ks", consumer_type=ConsumerType.KeyShared,
                                consumer_name="slow", receiver_queue_size=1000)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(KEYS):
            producer.send_async(b"first-%d" % i, None, partition_key=f"key-{i}")
        producer.flush()
        held = receive_for(slow, 2, ack=False)
        assert len(held) == KEYS

        stats = topic_stats(endpoint.admin_url, topic)
        sub = stats["subscriptions"]["ks"]
        (only,) = sub["consumers"]
        assert only["unackedMessages"] == KEYS
        # Consistent hashing hashes into [1, 65535], as Pulsar 4.
        assert only["keyHashRangeArrays"] == [[1, 65535]]
        assert only["keyHashRanges"] == ["[1, 65535]"]
        assert only["drainingHashesCount"] == 0 and sub["drainingHashesCount"] == 0

        joiner = client.subscribe(topic, "ks", consumer_type=ConsumerType.KeyShared,
                                  consumer_name="joiner", receiver_queue_size=1000)
        for i in range(KEYS):
            producer.send_async(b"second-%d" % i, None, partition_key=f"key-{i}")
        producer.flush()
        # The joiner's keys drain at the slow consumer: none of their new messages may reach it.
        early = receive_for(joiner, 2, ack=True)
        assert early == [], "a draining key was delivered before its previous messages were acked"

        stats = topic_stats(endpoint.admin_url, topic)
        sub = stats["subscriptions"]["ks"]
        by_name = {c["consumerName"]: c for c in sub["consumers"]}
        s, j = by_name["slow"], by_name["joiner"]
        # The hash space is split between the two consumers, with no overlap and no gap.
        ranges = sorted(tuple(r) for r in s["keyHashRangeArrays"] + j["keyHashRangeArrays"])
        assert ranges[0][0] == 1 and ranges[-1][1] == 65535
        assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:]))
        assert s["drainingHashesCount"] > 0
        assert s["drainingHashesUnackedMessages"] > 0
        assert len(s["drainingHashes"]) == s["drainingHashesCount"]
        assert all(h["unackMsgs"] > 0 for h in s["drainingHashes"])
        assert sum(h["blockedAttempts"] for h in s["drainingHashes"]) > 0
        assert j["drainingHashesCount"] == 0
        assert j["unackedMessages"] == 0 and j["availablePermits"] > 0
        assert sub["drainingHashesCount"] == s["drainingHashesCount"]
        assert sub["drainingHashesUnackedMessages"] == s["drainingHashesUnackedMessages"]
        assert sub["drainingBlockedEntries"] > 0
        assert sub["drainingBlockedAttemptsTotal"] > 0
        assert sub["drainingHashesClearedTotal"] == 0
        blocked = sub["drainingBlockedEntries"]
        draining = s["drainingHashesCount"]

        for m in held:
            slow.acknowledge(m)
        later = receive_for(joiner, 3, ack=True)
        assert len(later) == blocked, "the joiner got the held-back messages once drained"
        receive_for(slow, 1, ack=True)

        def drained():
            sub = topic_stats(endpoint.admin_url, topic)["subscriptions"]["ks"]
            return sub if sub["drainingHashesCount"] == 0 else None

        sub = wait_for(drained, 5)
        assert sub, "draining did not clear after the acks"
        assert sub["drainingBlockedEntries"] == 0
        assert sub["drainingHashesClearedTotal"] == draining
        by_name = {c["consumerName"]: c for c in sub["consumers"]}
        assert by_name["slow"]["drainingHashesClearedTotal"] == draining
        assert by_name["slow"]["drainingHashes"] == []
        assert sub["unackedMessages"] == 0
        client.close()
    finally:
        broker.close()
