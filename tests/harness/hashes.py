"""Pulsar's hashes, computed in Python for tests that predict where the broker routes a key."""


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
