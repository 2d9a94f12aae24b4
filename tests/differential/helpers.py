"""Small helpers shared by the differential tests."""

import bisect
from collections.abc import Iterable

import pulsar

from harness.hashes import murmur3_32, pulsar_hash  # noqa: F401 (used by the tests)
from harness.util import receive_all  # noqa: F401 (used by the tests; idle 1.5 s = NOTHING_MS)

# How long to wait for a message that must arrive, and for proof that nothing more arrives.
# Pulsar delays dispatch to a newly active Failover consumer by
# activeConsumerFailoverDelayTimeMillis (1 s by default), so "must arrive" waits are well above
# that.
RECEIVE_MS = 10_000
NOTHING_MS = 1_500


def receive_n(consumer: pulsar.Consumer, n: int,
              timeout_ms: int = RECEIVE_MS) -> list[pulsar.Message]:
    """Receives exactly n messages (fails the test with what arrived if fewer come in time)."""
    out = []
    while len(out) < n:
        try:
            out.append(consumer.receive(timeout_ms))
        except pulsar.Timeout:
            raise AssertionError(
                f"expected {n} messages, got {len(out)}: {[m.data()[:40] for m in out[-5:]]}"
            ) from None
    return out


def assert_nothing(consumer: pulsar.Consumer, idle_ms: int = NOTHING_MS) -> None:
    try:
        m = consumer.receive(idle_ms)
    except pulsar.Timeout:
        return
    raise AssertionError(f"expected no message, got {m.data()[:60]!r} id={m.message_id()}")


def texts(messages: Iterable[pulsar.Message]) -> list[str]:
    return [m.data().decode() for m in messages]


def ids_tuple(msg_id: pulsar.MessageId) -> tuple[int, int, int]:
    return (msg_id.ledger_id(), msg_id.entry_id(), msg_id.batch_index())


def predicted_failover_active(topic: str, consumer_names: Iterable[str]) -> str:
    """The consumer Pulsar makes active on a non-partitioned topic's Failover subscription.

    Pulsar (AbstractDispatcherSingleActiveConsumer, equal priority levels) sorts the consumers by
    name, puts 100 points per consumer on a ring at hash(name + str(j)) (a later consumer wins a
    collision), and picks the first point at or after hash(full topic name), wrapping around.
    """
    names = sorted(consumer_names)
    ring = {}
    for i, name in enumerate(names):
        for j in range(100):
            ring[pulsar_hash(f"{name}{j}".encode())] = i
    keys = sorted(ring)
    h = pulsar_hash(topic.encode())
    pos = bisect.bisect_left(keys, h)
    return names[ring[keys[pos if pos < len(keys) else 0]]]
