// The leader's placement of unowned bundles (pickBroker): with
// loadBalancerDistributeBundlesEvenlyEnabled a namespace's bundles spread over every broker even
// when one broker already holds many bundles of other namespaces.
#include "broker/cluster/namespace_service.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

namespace magnetar::broker::cluster {
namespace {

using Brokers = std::map<std::string, std::set<std::string>>;

// Assigns `n` bundles of public/default one after the other, as the leader does (each choice
// counted at once); returns how many each broker got.
std::map<std::string, int> assign(Brokers brokers, int n, bool evenly) {
  std::map<std::string, int> got;
  for (int i = 0; i < n; ++i) {
    std::string key = "public/default/b" + std::to_string(100 + i);
    std::string b = pickBroker(brokers, key, evenly);
    brokers[b].insert(key);
    ++got[b];
  }
  return got;
}

Brokers withEarlierBundles() {
  // Broker a won eight ownership races in other namespaces (test_cluster's race test before the
  // spread test: the 21/9/0 CI run).
  Brokers b{{"a:1", {}}, {"b:1", {}}, {"c:1", {}}};
  for (int i = 0; i < 8; ++i) b["a:1"].insert("race-" + std::to_string(i) + "/ns/0x0_0x1");
  return b;
}

TEST(PickBroker, EmptyWhenNoBroker) { EXPECT_EQ(pickBroker({}, "public/default/x", true), ""); }

TEST(PickBroker, TiesGoToTheFirstBrokerId) {
  Brokers b{{"b:1", {}}, {"a:1", {}}};
  EXPECT_EQ(pickBroker(b, "public/default/x", true), "a:1");
  EXPECT_EQ(pickBroker(b, "public/default/x", false), "a:1");
}

TEST(PickBroker, FewestBundlesInAllWithoutEvenSpread) {
  // Counting every bundle, the broker with eight others gets none of twelve new ones.
  auto got = assign(withEarlierBundles(), 12, false);
  EXPECT_EQ(got.count("a:1"), 0u);
  EXPECT_EQ(got["b:1"] + got["c:1"], 12);
}

TEST(PickBroker, EvenSpreadGivesEveryBrokerItsShareOfTheNamespace) {
  auto got = assign(withEarlierBundles(), 12, true);
  EXPECT_EQ(got["a:1"], 4);
  EXPECT_EQ(got["b:1"], 4);
  EXPECT_EQ(got["c:1"], 4);
}

TEST(PickBroker, EvenSpreadBreaksNamespaceTiesByTotalBundles) {
  Brokers b{{"a:1", {"public/default/b1", "other/ns/b1", "other/ns/b2"}},
            {"b:1", {"public/default/b2"}},
            {"c:1", {"public/default/b3", "public/default/b4"}}};
  // a and b hold one bundle of public/default each; b has fewer in all.
  EXPECT_EQ(pickBroker(b, "public/default/b9", true), "b:1");
  // Another namespace: nobody has one of it, so the fewest in all (b, 1) wins.
  EXPECT_EQ(pickBroker(b, "t/n/b9", true), "b:1");
  // A namespace whose name is a prefix of another's is not mixed up with it.
  Brokers p{{"a:1", {"t/n/b1"}}, {"b:1", {"t/nn/b1", "t/nn/b2"}}};
  EXPECT_EQ(pickBroker(p, "t/nn/b3", true), "a:1");
}

}  // namespace
}  // namespace magnetar::broker::cluster
