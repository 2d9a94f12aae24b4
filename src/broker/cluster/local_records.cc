#include "broker/cluster/local_records.h"

namespace magnetar::broker::cluster {

bool MetadataStorePersistence::persists(const std::string& path) const {
  for (const auto& root : roots_) {
    if (path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                         path[root.size()] == '/')) {
      return true;
    }
  }
  return false;
}

Result<std::vector<std::pair<std::string, std::string>>> MetadataStorePersistence::load() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& root : roots_) {
    auto self = store_->get(root);
    if (self.isOk()) {
      out.emplace_back(root, std::move(*self));
    } else if (self.status().code() != StatusCode::kNotFound) {
      return self.status();
    }
    auto below = store_->scan(root + "/");
    if (!below.isOk()) return below.status();
    for (auto& kv : *below) out.push_back(std::move(kv));
  }
  return out;
}

Status MetadataStorePersistence::write(const std::string& path,
                                       const std::optional<std::string>& value) {
  return value ? store_->put(path, *value) : store_->remove(path);
}

Result<std::shared_ptr<metadata::LocalBackend>> openLocalRecords(storage::MetadataStore* store,
                                                                 std::vector<std::string> roots) {
  return metadata::LocalBackend::open(
      std::make_unique<MetadataStorePersistence>(store, std::move(roots)));
}

}  // namespace magnetar::broker::cluster
