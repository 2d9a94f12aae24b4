#include "broker/service/topic_list.h"

#include <algorithm>

#include "base/crc32c.h"
#include "broker/common/topic_name.h"

namespace magnetar::broker {

std::string topicListHash(std::vector<std::string> topics) {
  std::sort(topics.begin(), topics.end());
  Crc32c crc;
  for (size_t i = 0; i < topics.size(); ++i) {
    if (i > 0) crc.update(",", 1);
    crc.update(topics[i].data(), topics[i].size());
  }
  uint32_t v = crc.value();
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int b = 0; b < 4; ++b) {
    uint8_t byte = static_cast<uint8_t>(v >> (8 * b));
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 0xf]);
  }
  return out;
}

namespace {

// "persistent://a/b/c.*" -> "a/b/c.*"; "a/b/c.*" unchanged. Errors on another scheme.
Result<std::string> removeDomainScheme(const std::string& pattern) {
  auto sep = pattern.find("://");
  if (sep == std::string::npos) return pattern;
  std::string prefix = pattern.substr(0, sep);
  std::string rest = pattern.substr(sep + 3);
  for (const std::string domain : {"non-persistent", "persistent"}) {
    if (prefix.size() >= domain.size() &&
        prefix.compare(prefix.size() - domain.size(), domain.size(), domain) == 0) {
      return prefix.substr(0, prefix.size() - domain.size()) + rest;
    }
  }
  return Status::invalidArgument("Does not support topic domain: " + prefix);
}

}  // namespace

Result<TopicPattern> TopicPattern::compile(const std::string& pattern) {
  auto stripped = removeDomainScheme(pattern);
  if (!stripped.isOk()) return stripped.status();
  TopicPattern p;
  try {
    p.re_ = std::make_shared<const std::regex>(*stripped, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return Status::invalidArgument("Invalid topics pattern '" + pattern + "': " + e.what());
  }
  return p;
}

bool TopicPattern::matches(const std::string& topic) const {
  auto name = TopicName::parse(topic);
  std::string base = name.isOk() ? name->partitionedTopicName() : topic;
  auto sep = base.find("://");
  if (sep != std::string::npos) base = base.substr(sep + 3);
  return std::regex_match(base, *re_);
}

std::vector<std::string> TopicPattern::filter(const std::vector<std::string>& topics) const {
  std::vector<std::string> out;
  for (const auto& t : topics) {
    if (matches(t)) out.push_back(t);
  }
  return out;
}

uint64_t TopicEventListeners::add(const std::string& ns, Listener fn) {
  MutexLock lock(mu_);
  uint64_t id = nextId_++;
  listeners_[id] = Entry{ns, std::make_shared<Listener>(std::move(fn))};
  return id;
}

void TopicEventListeners::remove(uint64_t id) {
  MutexLock lock(mu_);
  listeners_.erase(id);
}

void TopicEventListeners::notify(const std::string& ns, const std::string& topic, bool created) {
  // Pulsar's watchers follow persistent topics only (their events come from the managed-ledger
  // metadata, which non-persistent topics do not have).
  if (topic.rfind("persistent://", 0) != 0) return;
  std::vector<std::shared_ptr<Listener>> targets;
  {
    MutexLock lock(mu_);
    for (const auto& [id, e] : listeners_) {
      if (e.ns == ns) targets.push_back(e.fn);
    }
  }
  for (const auto& fn : targets) (*fn)(topic, created);
}

size_t TopicEventListeners::size() const {
  MutexLock lock(mu_);
  return listeners_.size();
}

}  // namespace magnetar::broker
