// Namespace bundles (Pulsar's NamespaceBundles): a namespace's 32-bit hash space cut into ranges;
// a topic belongs to the bundle holding the CRC32 of its full name, and a bundle is the unit of
// ownership (one broker owns a bundle and every topic in it).
//
// Formats and numbers are Pulsar's: boundaries "0x%08x"; the default cut of n bundles is
// PoliciesUtil.getBundles(n) (segment = 2^32 / n, the last boundary 0xffffffff); a bundle's name
// is "<lower>_<upper>", its range [lower, upper) except the last, which includes 0xffffffff
// (NamespaceBundleFactory.getBundle); the hash is Guava's crc32 of the UTF-8 topic name as an
// unsigned value (NamespaceBundleFactory.getLongHashCode, the default
// Pulsar's default bundle hash).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_CLUSTER)
#error "broker/cluster is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace magnetar::broker::cluster {

inline constexpr uint64_t kFullUpperBound = 0xffffffffULL;

// Pulsar's bundle hash of a full topic name ("persistent://t/ns/x", a partition with its
// "-partition-N" suffix): CRC32 (IEEE, as zlib and java.util.zip.CRC32), unsigned.
uint32_t topicHash(std::string_view fullTopicName);

// The default boundaries of n bundles (n + 1 values, first 0, last 0xffffffff).
// kInvalidArgument for n < 1 or n > 2^32 - 1 (Pulsar: "Invalid number of bundles").
Result<std::vector<uint64_t>> defaultBoundaries(int64_t n);

// "0x00000000" etc.
std::string formatBoundary(uint64_t v);
// "0x40000000_0x80000000".
std::string bundleName(uint64_t lower, uint64_t upper);

// Boundaries as Pulsar's BundlesData.boundaries strings ("0x..." hex, as Long.decode reads them).
// Errors (kInvalidArgument, naming the bad value): fewer than 2, not hex, above 0xffffffff, not
// strictly increasing, not starting at 0 or not ending at 0xffffffff.
Result<std::vector<uint64_t>> parseBoundaries(const std::vector<std::string>& values);

// Index of the bundle of `hash` in `boundaries` (validated, ascending): the i with
// boundaries[i] <= hash < boundaries[i+1], the last bundle also holding 0xffffffff.
size_t findBundle(const std::vector<uint64_t>& boundaries, uint32_t hash);

// Parses "0x...._0x...." (a bundle name) into lower and upper; kInvalidArgument otherwise.
Status parseBundleName(const std::string& name, uint64_t* lower, uint64_t* upper);

}  // namespace magnetar::broker::cluster
