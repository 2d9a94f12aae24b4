#include "broker/auth/authorization.h"

#include <algorithm>

namespace magnetar::broker {

const char* AuthorizationStats::label(size_t i) {
  switch (i) {
    case static_cast<size_t>(TopicOperation::kLookup):
      return "lookup";
    case static_cast<size_t>(TopicOperation::kProduce):
      return "produce";
    case static_cast<size_t>(TopicOperation::kConsume):
      return "consume";
    case static_cast<size_t>(TopicOperation::kAdmin):
      return "topic_admin";
    default:
      return "admin";
  }
}

AuthorizationService::AuthorizationService(PolicyRegistry& policies, bool enabled,
                                           std::vector<std::string> superUserRoles)
    : policies_(policies), enabled_(enabled), superUserRoles_(std::move(superUserRoles)) {}

void AuthorizationService::setSuperUserRoles(std::vector<std::string> roles) {
  MutexLock lock(mu_);
  superUserRoles_ = std::move(roles);
}

bool AuthorizationService::isSuperUser(const std::string& role) const {
  MutexLock lock(mu_);
  return std::find(superUserRoles_.begin(), superUserRoles_.end(), role) != superUserRoles_.end();
}

bool AuthorizationService::isTenantAdmin(const std::string& tenant, const std::string& role) const {
  if (isSuperUser(role)) return true;
  auto t = policies_.tenant(tenant);
  if (!t) return false;
  return std::find(t->adminRoles.begin(), t->adminRoles.end(), role) != t->adminRoles.end();
}

bool AuthorizationService::hasAction(const TopicName& topic, const std::string& role,
                                     const char* action) const {
  NamespacePolicies p = policies_.namespacePolicies(topic.namespaceName());
  auto granted = [&](const std::map<std::string, std::set<std::string>>& roles) {
    auto it = roles.find(role);
    return it != roles.end() && it->second.count(action) > 0;
  };
  if (granted(p.permissions)) return true;
  for (const std::string& name : {topic.toString(), topic.partitionedTopicName()}) {
    auto it = p.topicPermissions.find(name);
    if (it != p.topicPermissions.end() && granted(it->second)) return true;
  }
  return false;
}

bool AuthorizationService::mayUseSubscription(const TopicName& topic, const std::string& role,
                                              const std::string& subscription) const {
  NamespacePolicies p = policies_.namespacePolicies(topic.namespaceName());
  auto it = p.subscriptionAuthRoles.find(subscription);
  return it == p.subscriptionAuthRoles.end() || it->second.empty() || it->second.count(role) > 0;
}

namespace {

// subscription_auth_mode of the policies: "Prefix" or "None" (kept as its JSON text).
bool prefixMode(const NamespacePolicies& p) {
  auto it = p.keptFields.find("subscription_auth_mode");
  return it != p.keptFields.end() && it->second == "\"Prefix\"";
}

}  // namespace

std::optional<std::string> AuthorizationService::subscriptionPrefixError(
    const TopicName& topic, const std::string& role, const std::string& subscription) const {
  if (!enabled_ || subscription.empty() || subscription.rfind(role, 0) == 0) return std::nullopt;
  if (!prefixMode(policies_.namespacePolicies(topic.namespaceName()))) return std::nullopt;
  if (isTenantAdmin(topic.tenant(), role) || !mayUseSubscription(topic, role, subscription)) {
    return std::nullopt;
  }
  // The exception's text as Pulsar's ServerCnx sends it (its class name first).
  return "org.apache.pulsar.broker.PulsarServerException: Failed to create consumer - The "
         "subscription name needs to be prefixed by the authentication role, like " +
         role + "-xxxx for topic: " + topic.toString();
}

bool AuthorizationService::allowTopicOperation(const TopicName& topic, const std::string& role,
                                               TopicOperation op,
                                               const std::string& subscription) const {
  if (!enabled_) return true;
  if (isTenantAdmin(topic.tenant(), role)) return true;
  switch (op) {
    case TopicOperation::kProduce:
      return hasAction(topic, role, "produce");
    case TopicOperation::kConsume:
      if (!subscription.empty() && !mayUseSubscription(topic, role, subscription)) return false;
      if (subscriptionPrefixError(topic, role, subscription)) return false;
      return hasAction(topic, role, "consume");
    case TopicOperation::kLookup:
      return hasAction(topic, role, "produce") || hasAction(topic, role, "consume");
    case TopicOperation::kAdmin:
    case TopicOperation::kCount:
      break;
  }
  return false;
}

}  // namespace magnetar::broker
