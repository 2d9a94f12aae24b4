// Topic lists for pattern (regex) consumers: the list hash, broker-side pattern matching and the
// per-namespace listeners behind topic-list watchers (Pulsar's TopicList / TopicListService).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_SERVICE)
#error "broker/service is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_annotations.h"

namespace magnetar::broker {

// Pulsar's TopicList.calculateHash: CRC32C over the sorted names joined by ',' (no trailing
// comma), printed as Guava's HashCode.toString() does: the 4 bytes little-endian, lower-case hex
// (8 characters). The client compares it with its own, so it must be byte-exact.
std::string topicListHash(std::vector<std::string> topics);

// A subscription pattern as the broker evaluates it: the domain scheme is removed from the
// regex ("persistent://public/default/t-.*" -> "public/default/t-.*", TopicList's
// removeTopicDomainScheme) and a topic matches when its partitioned name without the scheme
// matches the whole regex. std::regex ECMAScript syntax; Java's regex features beyond it (possessive
// quantifiers, lookbehind) are refused as invalid.
class TopicPattern {
 public:
  // Errors: kInvalidArgument for a regex std::regex cannot compile or an unknown domain prefix.
  static Result<TopicPattern> compile(const std::string& pattern);
  // `topic`: a full name, possibly "-partition-N".
  bool matches(const std::string& topic) const;
  std::vector<std::string> filter(const std::vector<std::string>& topics) const;

 private:
  std::shared_ptr<const std::regex> re_;
};

// Listeners for topics of a namespace being created or deleted (the persistent topics' ledgers,
// partitions included), as Pulsar's TopicResources listeners. Thread-safe; callbacks run on the
// thread that reports the event and must not block (they post to their own loop).
class TopicEventListeners {
 public:
  using Listener = std::function<void(const std::string& topic, bool created)>;
  // ns: "tenant/namespace". Returns an id for remove().
  uint64_t add(const std::string& ns, Listener fn);
  void remove(uint64_t id);
  // topic: full name ("persistent://tenant/ns/local[-partition-N]"); a non-persistent topic is
  // ignored (Pulsar watches persistent topics only).
  void notify(const std::string& ns, const std::string& topic, bool created);
  size_t size() const;

 private:
  struct Entry {
    std::string ns;
    std::shared_ptr<Listener> fn;
  };
  mutable Mutex mu_;
  uint64_t nextId_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Entry> listeners_ GUARDED_BY(mu_);
};

}  // namespace magnetar::broker
