// TopicName: Pulsar's topic naming. "persistent://tenant/namespace/local" is the full form;
// "local" means persistent://public/default/local and "tenant/ns/local"
// persistent://tenant/ns/local (Pulsar's TopicName short forms). A partition is
// "<topic>-partition-<i>".
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_COMMON)
#error "broker/common is not below this broker part (src/broker/README.md)"
#endif

#include <string>
#include <string_view>

#include "base/status.h"

namespace magnetar::broker {

// Which topics a listing covers (Pulsar's CommandGetTopicsOfNamespace.Mode).
enum class TopicDomain { kPersistent, kNonPersistent, kAll };

// Value type; any thread.
class TopicName {
 public:
  // Parses and validates a name. Errors: kInvalidArgument (the broker answers InvalidTopicName)
  // for an empty part, a bad domain, or characters outside Pulsar's allowed set
  // ([-=:.\w] in tenant/namespace; the local name may not contain '/').
  static Result<TopicName> parse(std::string_view name);

  const std::string& toString() const { return full_; }
  const std::string& tenant() const { return tenant_; }
  const std::string& namespacePortion() const { return ns_; }
  std::string namespaceName() const { return tenant_ + "/" + ns_; }
  const std::string& localName() const { return local_; }
  bool isPersistent() const { return persistent_; }
  // Partition index from a "-partition-<i>" suffix, or -1.
  int partitionIndex() const { return partition_; }
  // The partitioned topic's name for a partition ("...-partition-3" -> "..."), else itself.
  std::string partitionedTopicName() const;
  TopicName partition(int index) const;
  // Storage name: "tenant/namespace/persistent/local" (Pulsar's managed ledger name).
  std::string persistenceName() const;

 private:
  std::string full_, tenant_, ns_, local_;
  bool persistent_ = true;
  int partition_ = -1;
};

// Validates a tenant or namespace part: non-empty, [A-Za-z0-9_=:.-] only.
bool isValidNamePart(std::string_view s);

}  // namespace magnetar::broker
