// broker::PolicyRegistry (tenants and namespace policies behind the admin routes).
#include "broker/policies.h"

#include <gtest/gtest.h>

namespace magnetar::broker {
namespace {

TEST(PolicyRegistry, Tenants) {
  PolicyRegistry r("c1");
  ASSERT_TRUE(r.tenant("public"));
  EXPECT_EQ(r.tenant("public")->allowedClusters, std::vector<std::string>{"c1"});
  EXPECT_TRUE(r.createTenant("acme", {{"admin"}, {"c1"}}));
  EXPECT_EQ(r.createTenant("acme", {}).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(r.tenants(), (std::vector<std::string>{"acme", "public"}));
  EXPECT_TRUE(r.updateTenant("acme", {{"a", "b"}, {"c1"}}));
  EXPECT_EQ(r.tenant("acme")->adminRoles, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.updateTenant("nope", {}).code(), StatusCode::kNotFound);
  EXPECT_TRUE(r.deleteTenant("acme"));
  EXPECT_EQ(r.deleteTenant("acme").code(), StatusCode::kNotFound);
  EXPECT_FALSE(r.tenant("acme"));
}

TEST(PolicyRegistry, NamespacePoliciesAndTheDeduplicationGetter) {
  PolicyRegistry r;
  EXPECT_FALSE(r.deduplicationEnabled("t/ns"));  // unset: the broker default applies
  r.updateNamespacePolicies("t/ns", [](NamespacePolicies& p) {
    p.deduplicationEnabled = true;
    p.retention = RetentionPolicy{60, 100};
    p.backlogQuotas["destination_storage"] = BacklogQuota{1024, -1, "producer_exception"};
    p.permissions["role"] = {"produce"};
  });
  EXPECT_EQ(r.deduplicationEnabled("t/ns"), true);
  auto p = r.namespacePolicies("t/ns");
  EXPECT_EQ(p.retention->retentionSizeInMB, 100);
  EXPECT_EQ(p.backlogQuotas.at("destination_storage").limitSize, 1024);
  EXPECT_EQ(p.permissions.at("role").count("produce"), 1u);
  EXPECT_FALSE(r.namespacePolicies("t/other").retention);
  r.removeNamespace("t/ns");
  EXPECT_FALSE(r.deduplicationEnabled("t/ns"));
  EXPECT_FALSE(r.namespacePolicies("t/ns").retention);
}

}  // namespace
}  // namespace magnetar::broker
