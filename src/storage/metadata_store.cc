#include "storage/metadata_store.h"

#include <cstdio>
#include <set>

namespace magnetar::storage {

namespace {
// The smallest key after every key that starts with base + child + "/" ('0' follows '/').
std::string subtreeEnd(const std::string& base, const std::string& child) {
  return base + child + "0";
}
}  // namespace

Result<std::string> MemoryMetadataStore::get(const std::string& key) {
  MutexLock lock(mu_);
  auto it = kv_.find(key);
  if (it == kv_.end()) return Status::notFound(key);
  return it->second;
}

Status MemoryMetadataStore::put(const std::string& key, const std::string& value) {
  MutexLock lock(mu_);
  kv_[key] = value;
  return Status::ok();
}

Status MemoryMetadataStore::remove(const std::string& key) {
  MutexLock lock(mu_);
  kv_.erase(key);
  return Status::ok();
}

Status MemoryMetadataStore::write(const std::vector<MetadataOp>& ops) {
  MutexLock lock(mu_);
  for (const auto& op : ops) {
    switch (op.kind) {
      case MetadataOp::Kind::kPut:
        kv_[op.key] = op.value;
        break;
      case MetadataOp::Kind::kDelete:
        kv_.erase(op.key);
        break;
      case MetadataOp::Kind::kDeletePrefix: {
        auto it = kv_.lower_bound(op.key);
        while (it != kv_.end() && it->first.compare(0, op.key.size(), op.key) == 0) {
          it = kv_.erase(it);
        }
        break;
      }
    }
  }
  return Status::ok();
}

Result<std::vector<std::pair<std::string, std::string>>> MemoryMetadataStore::scan(
    const std::string& prefix) {
  MutexLock lock(mu_);
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = kv_.lower_bound(prefix);
       it != kv_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    out.emplace_back(it->first, it->second);
  }
  return out;
}

Result<std::vector<std::string>> MemoryMetadataStore::getChildren(const std::string& path) {
  MutexLock lock(mu_);
  std::string base = path.empty() || path.back() != '/' ? path + "/" : path;
  std::set<std::string> children;
  auto it = kv_.lower_bound(base);
  while (it != kv_.end() && it->first.compare(0, base.size(), base) == 0) {
    std::string rest = it->first.substr(base.size());
    size_t slash = rest.find('/');
    std::string child = rest.substr(0, slash);
    if (!child.empty()) children.insert(child);
    if (slash == std::string::npos) {
      ++it;
    } else {
      it = kv_.lower_bound(subtreeEnd(base, child));
    }
  }
  return std::vector<std::string>(children.begin(), children.end());
}

std::string escapePathComponent(const std::string& name) {
  std::string out;
  out.reserve(name.size());
  for (unsigned char c : name) {
    if (c == '%' || c == '/' || c < 0x20) {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

namespace {
int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

// Keys come from disk: a '%' not followed by two hex digits is kept as it is (no exception).
std::string unescapePathComponent(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); i++) {
    int hi = s[i] == '%' && i + 2 < s.size() ? hexDigit(s[i + 1]) : -1;
    int lo = hi >= 0 ? hexDigit(s[i + 2]) : -1;
    if (lo >= 0) {
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace magnetar::storage
