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

}  // namespace
}  // namespace magnetar::broker
