#include "client/routing.h"

#include <algorithm>

#include "base/murmur3.h"

namespace magnetar::client {

Result<std::string> normalizeTopic(std::string_view topic) {
  if (topic.empty()) return Status::invalidArgument("empty topic name");
  auto scheme = topic.find("://");
  if (scheme != std::string_view::npos) {
    auto domain = topic.substr(0, scheme);
    if (domain != "persistent" && domain != "non-persistent") {
      return Status::invalidArgument("invalid topic domain: " + std::string(topic));
    }
    auto rest = topic.substr(scheme + 3);
    if (std::count(rest.begin(), rest.end(), '/') < 2 || rest.back() == '/') {
      return Status::invalidArgument("invalid topic name: " + std::string(topic));
    }
    return std::string(topic);
  }
  auto slashes = std::count(topic.begin(), topic.end(), '/');
  if (slashes == 0) return "persistent://public/default/" + std::string(topic);
  if (slashes == 2 && topic.front() != '/' && topic.back() != '/') {
    return "persistent://" + std::string(topic);
  }
  return Status::invalidArgument("invalid topic name: " + std::string(topic));
}

std::string partitionName(std::string_view topic, int index) {
  return std::string(topic) + "-partition-" + std::to_string(index);
}

int partitionForKey(std::string_view key, int numPartitions) {
  uint32_t h = murmur3_32(key.data(), key.size(), 0) & 0x7fffffffu;
  return static_cast<int>(h % static_cast<uint32_t>(numPartitions));
}

PartitionRouter::PartitionRouter(RoutingMode mode, int numPartitions, uint32_t start)
    : mode_(mode),
      n_(std::max(1, numPartitions)),
      single_(start % static_cast<uint32_t>(n_)),
      next_(start) {}

int PartitionRouter::route(std::string_view key) {
  if (!key.empty()) return partitionForKey(key, n_);
  if (mode_ == RoutingMode::kSinglePartition) return static_cast<int>(single_);
  return static_cast<int>(next_.fetch_add(1, std::memory_order_relaxed) %
                          static_cast<uint32_t>(n_));
}

}  // namespace magnetar::client
