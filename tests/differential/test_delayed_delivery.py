"""Delayed delivery as Pulsar does it (default settings: 1 s tick, not strict): deliver_after holds
a message on Shared subscriptions and not on Exclusive ones, the messages behind it are not held,
msgDelayed / msgBacklogNoDelayed, and the namespace delayedDelivery policy's REST shape (the
refusal of a delay over maxDeliveryDelayInMillis is in tests/java: the C++ client resends
after that SEND_ERROR forever). When a held message goes out, measured against its deliverAt,
in strict and non-strict mode (Pulsar 4.2's InMemoryDelayedDeliveryTracker bounds)."""

import statistics
import threading
import time
import uuid
from datetime import timedelta

import pulsar
import pytest
import requests

from harness.util import temp_namespace, wait_for
from helpers import assert_nothing, receive_n, texts


def stats(admin_url, topic):
    path = topic.replace("persistent://", "")
    r = requests.get(f"{admin_url}/admin/v2/persistent/{path}/stats", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def namespace(admin_url):
    yield from temp_namespace(admin_url, "delayed")


def test_shared_holds_exclusive_does_not(client, topic, admin_url):
    shared = client.subscribe(topic, "shared", consumer_type=pulsar.ConsumerType.Shared)
    excl = client.subscribe(topic, "excl", consumer_type=pulsar.ConsumerType.Exclusive)
    producer = client.create_producer(topic, batching_enabled=False)
    sent = time.time()
    producer.send(b"late", deliver_after=timedelta(seconds=4))
    producer.send(b"now")
    assert texts(receive_n(excl, 2)) == ["late", "now"]
    first = receive_n(shared, 1)
    assert texts(first) == ["now"]
    shared.acknowledge(first[0])
    # The client groups acks: wait until "now"'s ack is in too.
    s = wait_for(lambda: (lambda x: x if x["msgDelayed"] == 1 and x["msgBacklog"] == 1 else None)(
        stats(admin_url, topic)["subscriptions"]["shared"]), 20.0)
    assert s and s["msgDelayed"] == 1 and s["msgBacklog"] == 1 and s["msgBacklogNoDelayed"] == 0
    assert stats(admin_url, topic)["subscriptions"]["excl"]["msgDelayed"] == 0
    assert_nothing(shared, 1000)
    late = receive_n(shared, 1)
    assert texts(late) == ["late"]
    # Not strict by default: at most one tick (1 s) early.
    assert time.time() - sent >= 4 - 1.2
    shared.acknowledge(late[0])


def test_namespace_policy_rest_shape(admin_url, namespace):
    url = f"{admin_url}/admin/v2/namespaces/{namespace}/delayedDelivery"
    unset = requests.get(url, timeout=30)
    assert unset.status_code == 200 and unset.text == "", "unset: 200, empty body (Pulsar)"
    body = {"active": True, "tickTime": 500, "maxDeliveryDelayInMillis": 1000}
    r = requests.post(url, json=body, timeout=30)
    assert r.status_code == 204, r.text
    assert requests.get(url, timeout=30).json() == body
    assert requests.delete(url, timeout=30).status_code == 204
    assert requests.get(url, timeout=30).text == ""
    # Fields left out take Java's defaults.
    assert requests.post(url, json={"active": True}, timeout=30).status_code == 204
    assert requests.get(url, timeout=30).json() == {
        "active": True, "tickTime": 0, "maxDeliveryDelayInMillis": 0}


# --- when a held message goes out ---------------------------------------------------------------
#
# Pulsar 4.2 (InMemoryDelayedDeliveryTracker) with tick T (delayedDeliveryTickTimeMillis, 1000)
# and bucket width W (the largest power of two <= T: 512): not strict, a message due within T is
# not held; a held one is filed under deliverAt rounded down to W, its bucket goes out when
# start <= now + T - W + 1 (so no message more than T early), and the timer targets the first
# bucket's start on a wheel that ticks every T: a message alone in its subscription goes out at
# the earliest W - 1 ms before its deliverAt, at the latest about T after it. Strict: rounded up,
# out when start <= now: never early.

TICK, WIDTH = 1000, 512


def _delivered_minus_deliver_at(client, topics, delays_ms, per_topic=1):
    """Sends per_topic messages with deliver_at = now + delay to each of `topics` (one delay per
    topic, then +7 ms for each further message), each topic with a Shared consumer recording
    arrival times in a listener; returns {topic: [(deliver_at, arrived - deliver_at)]} (ms)."""
    arrivals = {t: [] for t in topics}
    lock = threading.Lock()
    consumers = []
    for t in topics:
        def listener(consumer, msg, t=t):
            now = time.time() * 1000.0
            with lock:
                arrivals[t].append((int(msg.properties()["at"]), now))
            consumer.acknowledge(msg)
        consumers.append(client.subscribe(t, "delayed", consumer_type=pulsar.ConsumerType.Shared,
                                          message_listener=listener))
    producers = [client.create_producer(t, batching_enabled=False) for t in topics]
    expected = 0
    for producer, delay in zip(producers, delays_ms):
        for i in range(per_topic):
            at = int(time.time() * 1000) + delay + 7 * i
            producer.send(b"x", properties={"at": str(at)}, deliver_at=at)
            expected += 1
    deadline = time.time() + max(delays_ms) / 1000.0 + 3 * TICK / 1000.0 + 10
    while time.time() < deadline:
        with lock:
            if sum(len(v) for v in arrivals.values()) >= expected:
                break
        time.sleep(0.05)
    for c in consumers:
        c.close()
    with lock:
        assert sum(len(v) for v in arrivals.values()) == expected, arrivals
        return {t: sorted((at, arrived - at) for at, arrived in v) for t, v in arrivals.items()}


def _summary(name, diffs):
    diffs = sorted(diffs)
    line = (f"{name}: n={len(diffs)} delivered-deliverAt ms: min={diffs[0]:.0f} "
            f"median={statistics.median(diffs):.0f} max={diffs[-1]:.0f} "
            f"early={sum(1 for d in diffs if d < 0)}")
    print(line)
    return line


def test_non_strict_goes_out_no_earlier_than_pulsars_timer(client, broker_kind):
    # 12 messages, each alone in its own topic's tracker, delays spread over the bucket phases.
    topics = [f"persistent://public/default/delayed-alone-{uuid.uuid4().hex[:8]}"
              for _ in range(12)]
    delays = [1500 + 173 * i for i in range(len(topics))]
    got = _delivered_minus_deliver_at(client, topics, delays)
    diffs = [d for v in got.values() for _, d in v]
    _summary(f"{broker_kind} non-strict alone", diffs)
    # Pulsar's timer targets deliverAt rounded down to 512 ms: never more than 511 ms early.
    assert min(diffs) >= -(WIDTH - 1) - 2, sorted(diffs)
    # Its wheel ticks every second: out within about a tick after deliverAt (slack for a
    # loaded machine).
    assert max(diffs) <= 2 * TICK, sorted(diffs)


def test_non_strict_burst_at_most_one_tick_early(client, broker_kind):
    # The Go client's TestConsumerKeySharedWithDelayedMessages: a burst with one delay on one
    # topic. The first of them is held as above; those that go out with it are early by less
    # than a tick (Pulsar's due rule: every message of a bucket going out has deliverAt <=
    # now + tick).
    topic = f"persistent://public/default/delayed-burst-{uuid.uuid4().hex[:8]}"
    got = _delivered_minus_deliver_at(client, [topic], [2500], per_topic=30)[topic]
    diffs = [d for _, d in got]
    _summary(f"{broker_kind} non-strict burst", diffs)
    assert got[0][1] >= -(WIDTH - 1) - 2, got[:3]  # the earliest deliverAt
    assert min(diffs) >= -TICK - 2, sorted(diffs)
    assert max(diffs) <= 2 * TICK, sorted(diffs)


def test_strict_is_never_early(start_broker, broker_kind):
    endpoint = start_broker(["isDelayedDeliveryDeliverAtTimeStrict=true"])
    c = pulsar.Client(endpoint.service_url, operation_timeout_seconds=15,
                      logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:
        topics = [f"persistent://public/default/delayed-strict-{uuid.uuid4().hex[:8]}"
                  for _ in range(6)]
        got = _delivered_minus_deliver_at(c, topics, [700 + 191 * i for i in range(6)],
                                          per_topic=5)
    finally:
        c.close()
    diffs = [d for v in got.values() for _, d in v]
    _summary(f"{broker_kind} strict", diffs)
    # Lateness is not pinned here: rounded up to 512 ms, then Pulsar's wheel and, for a later
    # bucket of the same topic, its one-run-per-tick limit; 2.2 s and (a loaded machine, a
    # fresh JVM) 4.1 s late seen on Pulsar, about 1 s on Magnetar.
    assert min(diffs) >= -1, sorted(diffs)  # ms rounding of the arrival clock
