// Authorization as Pulsar's AuthorizationService with PulsarAuthorizationProvider: super-users
// (superUserRoles), tenant admins (TenantInfo adminRoles), and produce/consume permissions
// granted on a namespace or a topic (the namespace policies' auth_policies).
// Thread-safe; any thread (reads the PolicyRegistry, which locks).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_AUTH)
#error "broker/auth is not below this broker part (src/broker/README.md)"
#endif

#include <array>
#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "broker/common/topic_name.h"
#include "broker/policies/policies.h"

namespace magnetar::broker {

// Topic operations checked by the broker (a subset of Pulsar's TopicOperation).
enum class TopicOperation { kLookup, kProduce, kConsume, kAdmin, kCount };

// Denials counted in magnetar_authorization_denied_total{operation}. Any thread.
struct AuthorizationStats {
  static inline std::array<std::atomic<uint64_t>, static_cast<size_t>(TopicOperation::kCount) + 1>
      denied{};
  // op kCount: a namespace, tenant or broker-level admin operation.
  static void record(TopicOperation op) {
    denied[static_cast<size_t>(op)].fetch_add(1, std::memory_order_relaxed);
  }
  static const char* label(size_t i);  // "lookup", "produce", "consume", "topic_admin", "admin"
};

class AuthorizationService {
 public:
  AuthorizationService(PolicyRegistry& policies, bool enabled,
                       std::vector<std::string> superUserRoles);

  bool enabled() const { return enabled_; }
  // superUserRoles is dynamic in Pulsar: replaces the list. Any thread.
  void setSuperUserRoles(std::vector<std::string> roles);

  bool isSuperUser(const std::string& role) const;
  // Whether the tenant exists (Pulsar answers a refused role on a missing tenant with 404 /
  // TopicNotFound rather than AuthorizationError).
  bool tenantExists(const std::string& tenant) const {
    return policies_.tenant(tenant).has_value();
  }
  // Super-user, or one of the tenant's adminRoles.
  bool isTenantAdmin(const std::string& tenant, const std::string& role) const;
  // Pulsar's allowTopicOperation: true when authorization is off, for super-users and tenant
  // admins, and for produce / consume (kLookup: either) granted on the topic (a partition uses
  // its partitioned topic's grants) or on its namespace. kAdmin: tenant admins only.
  // kConsume with a `subscription` (SUBSCRIBE) is also refused when the namespace's
  // subscription_auth_roles has a non-empty list for that subscription without this role, and
  // when subscriptionPrefixError() has an error (Pulsar's
  // PulsarAuthorizationProvider.canConsumeAsync, in that order).
  bool allowTopicOperation(const TopicName& topic, const std::string& role, TopicOperation op,
                           const std::string& subscription = {}) const;
  // The namespace's subscription_auth_mode is Prefix (namespaces set-subscription-auth-mode)
  // and `subscription` does not start with `role` (Pulsar checks startsWith(role); its message
  // suggests "<role>-xxxx"): Pulsar's error text, which it sends with AuthorizationError.
  // nullopt otherwise, with authorization off, for super-users and tenant admins, and when the
  // subscription's role list already refuses the role (Pulsar's plain refusal comes first).
  std::optional<std::string> subscriptionPrefixError(const TopicName& topic,
                                                     const std::string& role,
                                                     const std::string& subscription) const;

 private:
  bool hasAction(const TopicName& topic, const std::string& role, const char* action) const;
  // The subscription's role list (subscription_auth_roles) is absent, empty or has `role`.
  bool mayUseSubscription(const TopicName& topic, const std::string& role,
                          const std::string& subscription) const;

  PolicyRegistry& policies_;
  const bool enabled_;
  mutable Mutex mu_;
  std::vector<std::string> superUserRoles_ GUARDED_BY(mu_);
};

}  // namespace magnetar::broker
