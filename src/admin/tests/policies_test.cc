// broker::PolicyRegistry (tenants and namespace policies behind the admin routes).
#include "broker/policies/policies.h"

#include <gtest/gtest.h>

#include <future>

#include "base/blocking_wait.h"
#include "metadata/local_store.h"
#include "net/event_loop.h"

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
  EXPECT_TRUE(
      r.updateNamespacePolicies("t/ns", [](NamespacePolicies& p) {
         p.deduplicationEnabled = true;
         p.retention = RetentionPolicy{60, 100};
         p.backlogQuotas["destination_storage"] = BacklogQuota{1024, -1, "producer_exception"};
         p.permissions["role"] = {"produce"};
       }).isOk());
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

TEST(PolicyRegistry, TextFormRoundTripsOddNames) {
  TenantInfo t{{"a,b", "x=y", "50%\nz"}, {"standalone"}};
  TenantInfo t2 = decodeTenant(encodeTenant(t));
  EXPECT_EQ(t2.adminRoles, t.adminRoles);
  EXPECT_EQ(t2.allowedClusters, t.allowedClusters);
  NamespacePolicies p;
  p.retention = RetentionPolicy{-1, 2048};
  p.deduplicationEnabled = false;
  p.messageTtlSeconds = 0;
  p.backlogQuotas["message_age"] = BacklogQuota{-1, 3600, "consumer_backlog_eviction"};
  p.permissions["role,with=odd%chars"] = {"consume", "produce"};
  NamespacePolicies q = decodePolicies(encodePolicies(p));
  EXPECT_EQ(q.retention->retentionTimeInMinutes, -1);
  EXPECT_EQ(q.retention->retentionSizeInMB, 2048);
  EXPECT_EQ(q.deduplicationEnabled, false);
  EXPECT_EQ(q.messageTtlSeconds, 0);
  EXPECT_EQ(q.backlogQuotas.at("message_age").limitTime, 3600);
  EXPECT_EQ(q.backlogQuotas.at("message_age").policy, "consumer_backlog_eviction");
  EXPECT_EQ(q.permissions.at("role,with=odd%chars"), (std::set<std::string>{"consume", "produce"}));
  NamespacePolicies empty = decodePolicies(encodePolicies({}));
  EXPECT_FALSE(empty.retention || empty.deduplicationEnabled || empty.messageTtlSeconds);
  EXPECT_EQ(decodePolicies("garbage\nretention=x,y\n").retention->retentionSizeInMB, 0);
}

TEST(PolicyRegistry, SubscriptionAuthRolesAndNullActionsRoundTrip) {
  NamespacePolicies p;
  p.subscriptionAuthRoles["sub,1"] = {"r1", "r=2"};
  p.subscriptionAuthRoles["open"] = {};
  p.permissions["role"] = {"produce", ""};  // "": an unknown action Pulsar stores as null
  NamespacePolicies q = decodePolicies(encodePolicies(p));
  EXPECT_EQ(q.subscriptionAuthRoles, p.subscriptionAuthRoles);
  EXPECT_EQ(q.permissions.at("role"), (std::set<std::string>{"", "produce"}));
  // Stored by versions that kept the field as JSON text: read into the typed field.
  NamespacePolicies old = decodePolicies(
      "kept=subscription_auth_roles,"
      R"({"s":["a"%2C"b"]})"
      "\n");
  EXPECT_EQ(old.subscriptionAuthRoles.at("s"), (std::set<std::string>{"a", "b"}));
  EXPECT_FALSE(old.keptFields.count("subscription_auth_roles"));
}

TEST(PolicyRegistry, SchemaPoliciesRoundTrip) {
  NamespacePolicies p;
  p.schemaCompatibilityStrategy = "BACKWARD_TRANSITIVE";
  p.isAllowAutoUpdateSchema = false;
  p.schemaValidationEnforced = true;
  std::string text = encodePolicies(p);
  EXPECT_NE(text.find("schemaCompatibilityStrategy=BACKWARD_TRANSITIVE\n"), std::string::npos);
  NamespacePolicies q = decodePolicies(text);
  EXPECT_EQ(q.schemaCompatibilityStrategy, "BACKWARD_TRANSITIVE");
  EXPECT_EQ(q.isAllowAutoUpdateSchema, false);
  EXPECT_EQ(q.schemaValidationEnforced, true);
  NamespacePolicies empty = decodePolicies(encodePolicies({}));
  EXPECT_FALSE(empty.schemaCompatibilityStrategy || empty.isAllowAutoUpdateSchema ||
               empty.schemaValidationEnforced);
}

// Waits for an asynchronous registry call (the test thread is no executor).
Status waitFor(const std::function<void(std::function<void(Status)>)>& call) {
  auto p = std::make_shared<std::promise<Status>>();
  std::future<Status> f = p->get_future();
  call([p](const Status& s) { p->set_value(s); });
  return blockingGet(f, "policy registry test");
}

Status attachTopicPolicies(PolicyRegistry& r, metadata::Store* store, net::Executor* loop) {
  return waitFor([&](auto done) { r.attachTopicPolicies(store, loop, nullptr, done); });
}

TEST(PolicyRegistry, TopicPoliciesSurviveARestart) {
  auto backend = metadata::LocalBackend::create();  // topic policies' store
  const std::string t = "persistent://acme/a/odd,name=x%y";
  {
    auto session = backend->openSession();
    PolicyRegistry r;
    net::EventLoop loop("test-metadata");  // stopped before r goes (it runs r's callbacks)
    loop.start();
    ASSERT_TRUE(attachTopicPolicies(r, session.get(), &loop).isOk());
    auto set = [&](const std::string& topic, const std::string& policy, std::string v) {
      EXPECT_TRUE(waitFor([&](auto done) { r.setTopicPolicy(topic, policy, v, done); }).isOk());
    };
    set(t, "maxProducers", "3");
    set(t, "retention", R"({"retentionTimeInMinutes":1,"retentionSizeInMB":2})");
    set(t, "deduplicationEnabled", "true");
    set("persistent://acme/a/gone", "maxConsumers", "1");
    auto removed =
        waitFor([&](auto done) { r.removeTopicPolicies("persistent://acme/a/gone", done); });
    EXPECT_TRUE(removed.isOk());
    EXPECT_TRUE(r.topicPolicies("persistent://acme/a/gone").empty());  // at once
    backend->flush();
    r.detachTopicPolicies();
    loop.stop();
  }
  auto session = backend->openSession();
  PolicyRegistry again;
  net::EventLoop loop("test-metadata");
  loop.start();
  ASSERT_TRUE(attachTopicPolicies(again, session.get(), &loop).isOk());
  EXPECT_EQ(again.topicPolicyInt(t, "maxProducers"), 3);
  EXPECT_EQ(again.topicPolicyBool(t, "deduplicationEnabled"), true);
  EXPECT_EQ(again.topicPolicies(t).at("retention"),
            R"({"retentionTimeInMinutes":1,"retentionSizeInMB":2})");
  EXPECT_FALSE(again.topicPolicyInt(t, "retention"));  // not an integer policy
  EXPECT_TRUE(again.topicPolicies("persistent://acme/a/gone").empty());
  again.setTopicPolicy(t, "maxProducers", std::nullopt);
  EXPECT_FALSE(again.topicPolicyInt(t, "maxProducers"));
  EXPECT_EQ(again.topicPolicyInt(t, "missing"), std::nullopt);
  again.detachTopicPolicies();
  loop.stop();
}

TEST(PolicyRegistry, InactiveTopicPoliciesRoundTripAndTopicPolicy) {
  NamespacePolicies p;
  p.inactiveTopicPolicies = InactiveTopicPolicies{"delete_when_subscriptions_caught_up", 120, true};
  NamespacePolicies q = decodePolicies(encodePolicies(p));
  ASSERT_TRUE(q.inactiveTopicPolicies);
  EXPECT_EQ(q.inactiveTopicPolicies->inactiveTopicDeleteMode,
            "delete_when_subscriptions_caught_up");
  EXPECT_EQ(q.inactiveTopicPolicies->maxInactiveDurationSeconds, 120);
  EXPECT_TRUE(q.inactiveTopicPolicies->deleteWhileInactive);
  EXPECT_FALSE(decodePolicies(encodePolicies({})).inactiveTopicPolicies);

  PolicyRegistry r;
  EXPECT_FALSE(r.topicInactiveTopicPolicies("persistent://t/n/x"));
  r.setTopicPolicy("persistent://t/n/x", "inactiveTopicPolicies",
                   R"({"inactiveTopicDeleteMode":"delete_when_no_subscriptions",)"
                   R"("maxInactiveDurationSeconds":7,"deleteWhileInactive":true})");
  auto t = r.topicInactiveTopicPolicies("persistent://t/n/x");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->inactiveTopicDeleteMode, "delete_when_no_subscriptions");
  EXPECT_EQ(t->maxInactiveDurationSeconds, 7);
  EXPECT_TRUE(t->deleteWhileInactive);
  r.setTopicPolicy("persistent://t/n/x", "inactiveTopicPolicies", "[1]");
  EXPECT_FALSE(r.topicInactiveTopicPolicies("persistent://t/n/x"));
}

TEST(PolicyRegistry, TopicPolicyIntRejectsNonIntegers) {
  PolicyRegistry r;
  r.setTopicPolicy("persistent://t/n/x", "a", "-5");
  r.setTopicPolicy("persistent://t/n/x", "b", "1.5");
  r.setTopicPolicy("persistent://t/n/x", "c", "-");
  EXPECT_EQ(r.topicPolicyInt("persistent://t/n/x", "a"), -5);
  EXPECT_FALSE(r.topicPolicyInt("persistent://t/n/x", "b"));
  EXPECT_FALSE(r.topicPolicyInt("persistent://t/n/x", "c"));
}

}  // namespace
}  // namespace magnetar::broker
