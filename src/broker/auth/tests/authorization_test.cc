// AuthorizationService: consume grants and a subscription's role list (Pulsar's
// PulsarAuthorizationProvider.canConsumeAsync with auth_policies.subscription_auth_roles).
#include "broker/auth/authorization.h"

#include <gtest/gtest.h>

namespace magnetar::broker {
namespace {

TEST(Authorization, SubscriptionRolesRestrictConsumersThatMayConsume) {
  PolicyRegistry reg;
  ASSERT_TRUE(reg.createTenant("t", {{"tenant-admin"}, {"standalone"}}).isOk());
  ASSERT_TRUE(reg.updateNamespacePolicies("t/ns",
                                          [](NamespacePolicies& p) {
                                            p.permissions["reader"] = {"consume"};
                                            p.permissions["outsider"] = {"consume"};
                                            p.subscriptionAuthRoles["guarded"] = {"reader"};
                                            p.subscriptionAuthRoles["open"] = {};
                                          })
                  .isOk());
  AuthorizationService auth(reg, true, {"super"});
  TopicName topic = TopicName::parse("persistent://t/ns/x").value();
  auto consume = [&](const std::string& role, const std::string& sub) {
    return auth.allowTopicOperation(topic, role, TopicOperation::kConsume, sub);
  };
  EXPECT_TRUE(consume("reader", "guarded"));
  EXPECT_FALSE(consume("outsider", "guarded"));
  EXPECT_TRUE(consume("outsider", "open"));   // an empty list restricts nothing
  EXPECT_TRUE(consume("outsider", "other"));  // nor does an absent one
  EXPECT_TRUE(consume("super", "guarded"));
  EXPECT_TRUE(consume("tenant-admin", "guarded"));
  EXPECT_FALSE(consume("stranger", "open"));  // the list does not grant consume
  // Without a subscription (LOOKUP's consume check) the list does not apply.
  EXPECT_TRUE(auth.allowTopicOperation(topic, "outsider", TopicOperation::kLookup));
  EXPECT_TRUE(auth.allowTopicOperation(topic, "outsider", TopicOperation::kConsume));
}

TEST(Authorization, PrefixModeNeedsTheRoleAsTheSubscriptionsPrefix) {
  PolicyRegistry reg;
  ASSERT_TRUE(reg.createTenant("t", {{"tenant-admin"}, {"standalone"}}).isOk());
  ASSERT_TRUE(reg.updateNamespacePolicies("t/ns",
                                          [](NamespacePolicies& p) {
                                            p.permissions["dev"] = {"consume"};
                                            p.subscriptionAuthRoles["dev-guarded"] = {"other"};
                                            p.keptFields["subscription_auth_mode"] = "\"Prefix\"";
                                          })
                  .isOk());
  AuthorizationService auth(reg, true, {"super"});
  TopicName topic = TopicName::parse("persistent://t/ns/x").value();
  auto consume = [&](const std::string& role, const std::string& sub) {
    return auth.allowTopicOperation(topic, role, TopicOperation::kConsume, sub);
  };
  EXPECT_TRUE(consume("dev", "dev-telemetry"));
  EXPECT_TRUE(consume("dev", "devices"));  // Pulsar checks startsWith(role): no '-' needed
  EXPECT_FALSE(consume("dev", "telemetry"));
  EXPECT_FALSE(consume("dev", "de"));
  EXPECT_EQ(auth.subscriptionPrefixError(topic, "dev", "telemetry").value_or(""),
            "org.apache.pulsar.broker.PulsarServerException: Failed to create consumer - The "
            "subscription name needs to be prefixed by the authentication role, like dev-xxxx for "
            "topic: persistent://t/ns/x");
  EXPECT_FALSE(auth.subscriptionPrefixError(topic, "dev", "dev-telemetry"));
  // The subscription's role list refuses first, with the plain refusal (no prefix error).
  EXPECT_FALSE(consume("dev", "dev-guarded"));
  EXPECT_FALSE(auth.subscriptionPrefixError(topic, "dev", "dev-guarded"));
  // Super-users and tenant admins use any name; LOOKUP has no subscription.
  EXPECT_TRUE(consume("super", "telemetry"));
  EXPECT_TRUE(consume("tenant-admin", "telemetry"));
  EXPECT_FALSE(auth.subscriptionPrefixError(topic, "super", "telemetry"));
  EXPECT_TRUE(auth.allowTopicOperation(topic, "dev", TopicOperation::kLookup));
  // Mode None: any name again.
  ASSERT_TRUE(reg.updateNamespacePolicies("t/ns",
                                          [](NamespacePolicies& p) {
                                            p.keptFields["subscription_auth_mode"] = "\"None\"";
                                          })
                  .isOk());
  EXPECT_TRUE(consume("dev", "telemetry"));
  // Authorization off: nothing is checked.
  AuthorizationService off(reg, false, {});
  EXPECT_FALSE(off.subscriptionPrefixError(topic, "dev", "telemetry"));
}

}  // namespace
}  // namespace magnetar::broker
