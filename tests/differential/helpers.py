"""Small helpers shared by the differential tests."""

import bisect

import pulsar

# How long to wait for a message that must arrive, and for proof that nothing more arrives.
# Pulsar delays dispatch to a newly active Failover consumer by activeConsumerFailoverDelayTimeMillis
# (1 s by default), so "must arrive" waits are well above that.
RECEIVE_MS = 10_000
NOTHING_MS = 1_500


def receive_n(consumer, n, timeout_ms=RECEIVE_MS):
    """Receives exactly n messages (fails the test with what arrived if fewer come in time)."""
    out = []
    while len(out) < n:
        try:
            out.append(consumer.receive(timeout_ms))
        except pulsar.Timeout:
            raise AssertionError(
                f"expected {n} messages, got {len(out)}: {[m.data()[:40] for m in out[-5:]]}"
            )
    return out


def receive_all(consumer, idle_ms=NOTHING_MS):
    """Receives until nothing arrives for idle_ms."""
    out = []
    while True:
        try:
            out.append(consumer.receive(idle_ms))
        except pulsar.Timeout:
            return out


def assert_nothing(consumer, idle_ms=NOTHING_MS):
    try:
        m = consumer.receive(idle_ms)
    except pulsar.Timeout:
        return
    raise AssertionError(f"expected no message, got {m.data()[:60]!r} id={m.message_id()}")


def texts(messages):
    return [m.data().decode() for m in messages]


def ids_tuple(msg_id):
    return (msg_id.ledger_id(), msg_id.entry_id(), msg_id.batch_index())


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit, the hash Pulsar uses for sticky keys and failover rings."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed
    n_blocks = len(data) // 4
    for i in range(n_blocks):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    k = 0
    for i, b in enumerate(data[4 * n_blocks:]):
        k ^= b << (8 * i)
    k = (k * c1) & mask
    k = ((k << 15) | (k >> 17)) & mask
    k = (k * c2) & mask
    h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h


def pulsar_hash(data: bytes) -> int:
    """Pulsar's Murmur3_32Hash.makeHash: murmur3 (seed 0) masked to a non-negative int."""
    return murmur3_32(data) & 0x7FFFFFFF


def predicted_failover_active(topic: str, consumer_names):
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
