#include "broker/policies.h"

namespace magnetar::broker {

PolicyRegistry::PolicyRegistry(std::string clusterName) {
  tenants_["public"] = TenantInfo{{}, {std::move(clusterName)}};
}

Status PolicyRegistry::createTenant(const std::string& name, TenantInfo info) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!tenants_.emplace(name, std::move(info)).second) {
    return Status::alreadyExists("Tenant already exists");
  }
  return Status::ok();
}

Status PolicyRegistry::updateTenant(const std::string& name, TenantInfo info) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tenants_.find(name);
  if (it == tenants_.end()) return Status::notFound("Tenant does not exist");
  it->second = std::move(info);
  return Status::ok();
}

Status PolicyRegistry::deleteTenant(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (tenants_.erase(name) == 0) return Status::notFound("Tenant does not exist");
  return Status::ok();
}

std::optional<TenantInfo> PolicyRegistry::tenant(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tenants_.find(name);
  if (it == tenants_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> PolicyRegistry::tenants() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, info] : tenants_) out.push_back(name);
  return out;
}

NamespacePolicies PolicyRegistry::namespacePolicies(const std::string& ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = policies_.find(ns);
  return it == policies_.end() ? NamespacePolicies{} : it->second;
}

void PolicyRegistry::updateNamespacePolicies(
    const std::string& ns, const std::function<void(NamespacePolicies&)>& change) {
  std::lock_guard<std::mutex> lock(mu_);
  change(policies_[ns]);
}

void PolicyRegistry::removeNamespace(const std::string& ns) {
  std::lock_guard<std::mutex> lock(mu_);
  policies_.erase(ns);
}

std::optional<bool> PolicyRegistry::deduplicationEnabled(const std::string& ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = policies_.find(ns);
  return it == policies_.end() ? std::nullopt : it->second.deduplicationEnabled;
}

}  // namespace magnetar::broker
