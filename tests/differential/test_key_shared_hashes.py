"""Key_Shared hash assignment is the same on both brokers: the test predicts, from Pulsar 4's
algorithm (Murmur3_32 of the key into [1, 65535]; 100 ring points per consumer at the hashes of
name + '\\0' + name index + '\\0' + point index; a key belongs to the first point at or after its
hash), which consumer gets each key, and both Magnetar and Pulsar must deliver exactly that."""

import bisect

from pulsar import ConsumerType

from helpers import receive_all

REPLICA_POINTS = 100  # subscriptionKeySharedConsistentHashingReplicaPoints default


def murmur3_32(data: bytes, seed: int = 0) -> int:
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed
    n = len(data) // 4
    for i in range(n):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    tail = data[4 * n:]
    k = 0
    for i, b in enumerate(tail):
        k |= b << (8 * i)
    if tail:
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


def consistent_hash(data: bytes) -> int:
    h = (murmur3_32(data) & 0x7FFFFFFF) % 65535 + 1
    return h


def predicted_owners(names, keys):
    ring = {}
    for name in names:  # distinct names: name index 0 each
        for i in range(REPLICA_POINTS):
            point = consistent_hash(f"{name}\0{0}\0{i}".encode())
            ring.setdefault(point, name)  # the first consumer to claim a point keeps it
    points = sorted(ring)
    owners = {}
    for k in keys:
        h = consistent_hash(k.encode())
        i = bisect.bisect_left(points, h)
        owners[k] = ring[points[i % len(points)]]
    return owners


def test_murmur3_matches_published_vectors():
    assert murmur3_32(b"") == 0
    assert murmur3_32(b"\x21\x43\x65\x87") == 0xF55B516B
    assert murmur3_32(b"\x21\x43\x65") == 0x7E4A8634
    assert murmur3_32(b"Hello, world!", 1234) == 0xFAF6CDB3


def test_each_key_goes_to_the_consumer_pulsars_ring_predicts(client, topic):
    names = ["ks-alpha", "ks-beta", "ks-gamma"]
    consumers = {n: client.subscribe(topic, "sub", consumer_type=ConsumerType.KeyShared,
                                     consumer_name=n) for n in names}
    keys = [f"device-{k:04d}" for k in range(60)]
    expected = predicted_owners(names, keys)
    assert len(set(expected.values())) == 3, "the key set should reach every consumer"
    producer = client.create_producer(topic, batching_enabled=False)
    for k in keys:
        producer.send_async(k.encode(), None, partition_key=k)
    producer.flush()
    got = {}
    for name, c in consumers.items():
        for m in receive_all(c):
            got[m.data().decode()] = name
            c.acknowledge(m)
    assert got == expected
