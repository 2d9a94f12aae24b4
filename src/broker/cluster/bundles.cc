#include "broker/cluster/bundles.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/crc.hpp>
#include <charconv>

namespace magnetar::broker::cluster {

uint32_t topicHash(std::string_view fullTopicName) {
  boost::crc_32_type crc;
  crc.process_bytes(fullTopicName.data(), fullTopicName.size());
  return crc.checksum();
}

Result<std::vector<uint64_t>> defaultBoundaries(int64_t n) {
  if (n < 1 || n > static_cast<int64_t>(kFullUpperBound)) {
    return Status::invalidArgument(
        "Invalid number of bundles. Number of bundles has to be in the range of (0, 2^32].");
  }
  const uint64_t max = 1ULL << 32;
  const uint64_t seg = max / static_cast<uint64_t>(n);
  std::vector<uint64_t> b;
  b.reserve(static_cast<size_t>(n) + 1);
  b.push_back(0);
  for (int64_t i = 1; i < n; ++i) b.push_back(seg * static_cast<uint64_t>(i));
  b.push_back(max - 1);
  return b;
}

std::string formatBoundary(uint64_t v) { return fmt::format("0x{:08x}", v); }

std::string bundleName(uint64_t lower, uint64_t upper) {
  return formatBoundary(lower) + "_" + formatBoundary(upper);
}

namespace {

Result<uint64_t> parseHex(const std::string& s) {
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) {
    return Status::invalidArgument("bundle boundary '" + s + "' is not 0x<hex>");
  }
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), v, 16);
  if (ec != std::errc() || p != s.data() + s.size()) {
    return Status::invalidArgument("bundle boundary '" + s + "' is not 0x<hex>");
  }
  if (v > kFullUpperBound) {
    return Status::invalidArgument("bundle boundary '" + s + "' is above 0xffffffff");
  }
  return v;
}

}  // namespace

Result<std::vector<uint64_t>> parseBoundaries(const std::vector<std::string>& values) {
  if (values.size() < 2) {
    return Status::invalidArgument("bundle boundaries need at least 2 values, got " +
                                   std::to_string(values.size()));
  }
  std::vector<uint64_t> out;
  out.reserve(values.size());
  for (const auto& s : values) {
    auto v = parseHex(s);
    if (!v.isOk()) return v.status();
    if (!out.empty() && *v <= out.back()) {
      return Status::invalidArgument("bundle boundaries are not increasing at '" + s + "'");
    }
    out.push_back(*v);
  }
  if (out.front() != 0 || out.back() != kFullUpperBound) {
    return Status::invalidArgument("Input bundles do not cover the whole hash range. first:" +
                                   values.front() + ", last:" + values.back());
  }
  return out;
}

size_t findBundle(const std::vector<uint64_t>& boundaries, uint32_t hash) {
  // First boundary above hash; the bundle starts one before it.
  auto it = std::upper_bound(boundaries.begin(), boundaries.end(), static_cast<uint64_t>(hash));
  size_t i = static_cast<size_t>(it - boundaries.begin());
  if (i == 0) return 0;
  return std::min(i - 1, boundaries.size() - 2);  // 0xffffffff: the last bundle
}

Status parseBundleName(const std::string& name, uint64_t* lower, uint64_t* upper) {
  auto sep = name.find('_');
  if (sep == std::string::npos) return Status::invalidArgument("Invalid bundle range " + name);
  auto lo = parseHex(name.substr(0, sep));
  auto hi = parseHex(name.substr(sep + 1));
  if (!lo.isOk() || !hi.isOk() || *lo >= *hi) {
    return Status::invalidArgument("Invalid bundle range " + name);
  }
  *lower = *lo;
  *upper = *hi;
  return Status::ok();
}

}  // namespace magnetar::broker::cluster
