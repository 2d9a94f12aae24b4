#include "broker/common/topic_name.h"

#include <charconv>

namespace magnetar::broker {

namespace {
constexpr std::string_view kPartitionSuffix = "-partition-";

bool validLocal(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c == '/' || c == '\0' || static_cast<unsigned char>(c) < 0x20) return false;
  }
  return true;
}
}  // namespace

bool isValidNamePart(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '=' || c == ':' || c == '.';
    if (!ok) return false;
  }
  return true;
}

Result<TopicName> TopicName::parse(std::string_view name) {
  TopicName t;
  std::string_view rest = name;
  auto sep = name.find("://");
  if (sep == std::string_view::npos) {
    // Short forms: "local" or "tenant/ns/local".
    size_t slashes = 0;
    for (char c : name) slashes += (c == '/');
    if (slashes == 0) {
      t.tenant_ = "public";
      t.ns_ = "default";
      t.local_ = std::string(name);
    } else if (slashes == 2) {
      auto a = name.find('/');
      auto b = name.find('/', a + 1);
      t.tenant_ = std::string(name.substr(0, a));
      t.ns_ = std::string(name.substr(a + 1, b - a - 1));
      t.local_ = std::string(name.substr(b + 1));
    } else {
      return Status::invalidArgument("Invalid short topic name '" + std::string(name) +
                                     "', it should be in the format of <tenant>/<namespace>/<topic>"
                                     " or <topic>");
    }
  } else {
    std::string_view domain = name.substr(0, sep);
    if (domain == "persistent") {
      t.persistent_ = true;
    } else if (domain == "non-persistent") {
      t.persistent_ = false;
    } else {
      return Status::invalidArgument("Invalid topic domain: '" + std::string(domain) + "'");
    }
    rest = name.substr(sep + 3);
    auto a = rest.find('/');
    if (a == std::string_view::npos)
      return Status::invalidArgument("Invalid topic name: " + std::string(name));
    auto b = rest.find('/', a + 1);
    if (b == std::string_view::npos)
      return Status::invalidArgument("Invalid topic name: " + std::string(name));
    t.tenant_ = std::string(rest.substr(0, a));
    t.ns_ = std::string(rest.substr(a + 1, b - a - 1));
    t.local_ = std::string(rest.substr(b + 1));
  }
  if (!isValidNamePart(t.tenant_) || !isValidNamePart(t.ns_) || !validLocal(t.local_)) {
    return Status::invalidArgument("Invalid topic name: " + std::string(name));
  }
  t.full_ = std::string(t.persistent_ ? "persistent" : "non-persistent") + "://" + t.tenant_ + "/" +
            t.ns_ + "/" + t.local_;
  auto p = t.local_.rfind(kPartitionSuffix);
  if (p != std::string::npos) {
    std::string_view idx = std::string_view(t.local_).substr(p + kPartitionSuffix.size());
    int v = -1;
    auto [ptr, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), v);
    if (ec == std::errc() && ptr == idx.data() + idx.size() && v >= 0 && !idx.empty()) {
      t.partition_ = v;
    }
  }
  return t;
}

std::string TopicName::partitionedTopicName() const {
  if (partition_ < 0) return full_;
  auto p = full_.rfind(kPartitionSuffix);
  return full_.substr(0, p);
}

TopicName TopicName::partition(int index) const {
  auto r = parse(partitionedTopicName() + std::string(kPartitionSuffix) + std::to_string(index));
  return *r;
}

std::string TopicName::persistenceName() const {
  return tenant_ + "/" + ns_ + "/" + (persistent_ ? "persistent" : "non-persistent") + "/" + local_;
}

}  // namespace magnetar::broker
