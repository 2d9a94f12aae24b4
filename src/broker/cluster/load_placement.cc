#include "broker/cluster/load_placement.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <cmath>
#include <iterator>
#include <limits>
#include <regex>
#include <string>

#include "broker/cluster/bundles.h"

namespace magnetar::broker::cluster {

namespace json = boost::json;

namespace {

// Java's String.matches: the whole string; a regex that does not compile matches nothing.
bool fullMatch(const std::string& text, const std::string& re) {
  try {
    return std::regex_match(text, std::regex(re));
  } catch (const std::regex_error&) {
    return false;
  }
}

bool anyMatch(const std::vector<std::string>& res, const std::string& text) {
  return std::any_of(res.begin(), res.end(),
                     [&](const std::string& re) { return fullMatch(text, re); });
}

std::string nsOf(const std::string& bundleKey) {
  size_t slash = bundleKey.rfind('/');
  return slash == std::string::npos ? bundleKey : bundleKey.substr(0, slash);
}

Status invalid(const std::string& why) {
  return Status::invalidArgument("Invalid namespace isolation policy: " + why);
}

// A list of strings; nullopt when the field is missing or null, an error when not strings.
Result<std::optional<std::vector<std::string>>> strings(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (!v || v->is_null()) return std::optional<std::vector<std::string>>{};
  if (!v->is_array()) return invalid(std::string(key) + " is not a list");
  std::vector<std::string> out;
  for (const auto& e : v->as_array()) {
    if (!e.is_string()) return invalid(std::string(key) + " holds a value that is not a string");
    out.emplace_back(e.as_string());
  }
  return std::optional<std::vector<std::string>>(std::move(out));
}

Status checkRegexes(const std::vector<std::string>& res) {
  for (const auto& re : res) {
    try {
      (void)std::regex(re);
    } catch (const std::regex_error&) {
      return invalid("invalid policy regex " + re);
    }
  }
  return Status::ok();
}

bool isInteger(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i >= s.size()) return false;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(i), s.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

int intParam(const std::map<std::string, std::string>& p, const char* key) {
  auto it = p.find(key);
  if (it == p.end() || !isInteger(it->second)) return 0;
  try {
    return std::stoi(it->second);
  } catch (const std::exception&) {
    return 0;
  }
}

Status parseFailover(const json::object& o, NamespaceIsolationPolicy* p) {
  const json::value* f = o.if_contains("auto_failover_policy");
  if (!f || f->is_null()) return invalid("auto_failover_policy is missing");
  if (!f->is_object()) return invalid("auto_failover_policy is not an object");
  const auto& fo = f->as_object();
  const json::value* type = fo.if_contains("policy_type");
  if (!type || !type->is_string() || type->as_string() != "min_available") {
    return invalid("auto_failover_policy.policy_type must be min_available");
  }
  p->policyType = "min_available";
  if (const json::value* params = fo.if_contains("parameters"); params && params->is_object()) {
    for (const auto& [k, v] : params->as_object()) {
      if (v.is_string()) p->parameters[std::string(k)] = std::string(v.as_string());
      if (v.is_int64()) p->parameters[std::string(k)] = std::to_string(v.as_int64());
    }
  }
  for (const char* key : {"min_limit", "usage_threshold"}) {
    auto it = p->parameters.find(key);
    if (it == p->parameters.end() || !isInteger(it->second)) {
      return invalid(std::string("auto_failover_policy.parameters.") + key +
                     " is missing or not an integer");
    }
  }
  return Status::ok();
}

json::array stringArray(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

json::object policyObject(const NamespaceIsolationPolicy& p) {
  json::object o;
  o["namespaces"] = stringArray(p.namespaces);
  o["primary"] = stringArray(p.primary);
  o["secondary"] = stringArray(p.secondary);
  json::object f;  // Jackson's order of AutoFailoverPolicyData: parameters, policy_type
  json::object params;
  for (const auto& [k, v] : p.parameters) params[k] = v;
  f["parameters"] = std::move(params);
  f["policy_type"] = p.policyType;
  o["auto_failover_policy"] = std::move(f);
  if (!p.unloadScope.empty()) o["unload_scope"] = p.unloadScope;
  return o;
}

Result<NamespaceIsolationPolicy> policyFrom(const json::object& o) {
  NamespaceIsolationPolicy p;
  auto ns = strings(o, "namespaces");
  if (!ns.isOk()) return ns.status();
  if (!*ns || (*ns)->empty()) return invalid("namespaces is missing or empty");
  p.namespaces = std::move(**ns);
  auto primary = strings(o, "primary");
  if (!primary.isOk()) return primary.status();
  if (!*primary || (*primary)->empty()) return invalid("primary is missing or empty");
  p.primary = std::move(**primary);
  auto secondary = strings(o, "secondary");
  if (!secondary.isOk()) return secondary.status();
  if (!*secondary) return invalid("secondary is missing");
  p.secondary = std::move(**secondary);
  for (const auto* res : {&p.namespaces, &p.primary, &p.secondary}) {
    if (Status s = checkRegexes(*res); !s.isOk()) return s;
  }
  if (Status s = parseFailover(o, &p); !s.isOk()) return s;
  if (const json::value* u = o.if_contains("unload_scope"); u && u->is_string()) {
    p.unloadScope = std::string(u->as_string());
  }
  return p;
}

}  // namespace

std::string isolationPoliciesPath(const std::string& cluster) {
  return "/admin/clusters/" + cluster + "/namespaceIsolationPolicies";
}

std::string antiAffinityGroupOf(std::string_view localPolicies) {
  boost::system::error_code ec;
  json::value v = json::parse(localPolicies, ec);
  if (ec || !v.is_object()) return "";
  const json::value* g = v.as_object().if_contains("namespaceAntiAffinityGroup");
  return g && g->is_string() ? std::string(g->as_string()) : "";
}

std::string localPoliciesWithAntiAffinityGroup(const std::string& base,
                                               const std::vector<uint64_t>& boundaries,
                                               const std::optional<std::string>& group) {
  boost::system::error_code ec;
  json::value v = json::parse(base.empty() ? localPoliciesJson(boundaries, "") : base, ec);
  if (ec || !v.is_object()) v = json::parse(localPoliciesJson(boundaries, ""));
  json::object out;
  bool placed = false;
  auto place = [&] {
    if (!placed && group) out["namespaceAntiAffinityGroup"] = *group;
    placed = true;
  };
  for (const auto& [k, val] : v.as_object()) {
    if (k == "namespaceAntiAffinityGroup") continue;
    if (k == "migrated") place();
    out[k] = val;
  }
  place();
  return json::serialize(out);
}

bool NamespaceIsolationPolicy::shouldFailover(size_t primaries) const {
  return static_cast<int64_t>(primaries) < intParam(parameters, "min_limit");
}

bool NamespaceIsolationPolicy::matchesNamespace(const std::string& ns) const {
  return anyMatch(namespaces, ns);
}

bool NamespaceIsolationPolicy::isPrimary(const std::string& host) const {
  return anyMatch(primary, host);
}

bool NamespaceIsolationPolicy::isSecondary(const std::string& host) const {
  return anyMatch(secondary, host);
}

Result<NamespaceIsolationPolicy> parseNamespaceIsolationData(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return invalid("the body is not a JSON object");
  return policyFrom(v.as_object());
}

Result<NamespaceIsolationPolicies> parseNamespaceIsolationPolicies(std::string_view text,
                                                                   const std::string& path) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) {
    return Status::corruption("znode " + path + " does not hold NamespaceIsolationPolicies JSON");
  }
  NamespaceIsolationPolicies out;
  for (const auto& [name, pv] : v.as_object()) {
    if (!pv.is_object()) {
      return Status::corruption("znode " + path + ": policy " + std::string(name) +
                                " is not an object");
    }
    auto p = policyFrom(pv.as_object());
    if (!p.isOk()) {
      return Status::corruption("znode " + path + ": policy " + std::string(name) + ": " +
                                p.status().message());
    }
    out[std::string(name)] = std::move(*p);
  }
  return out;
}

std::string toJson(const NamespaceIsolationPolicy& p) { return json::serialize(policyObject(p)); }

std::string toJson(const NamespaceIsolationPolicies& p) {
  json::object o;
  for (const auto& [name, policy] : p) o[name] = policyObject(policy);
  return json::serialize(o);
}

const NamespaceIsolationPolicy* policyOf(const NamespaceIsolationPolicies& p,
                                         const std::string& ns) {
  for (const auto& [name, policy] : p) {
    if (policy.matchesNamespace(ns)) return &policy;
  }
  return nullptr;
}

bool isSharedBroker(const NamespaceIsolationPolicies& p, const std::string& host) {
  return std::none_of(p.begin(), p.end(), [&](const auto& e) { return e.second.isPrimary(host); });
}

std::string brokerHost(const std::string& brokerId) {
  size_t colon = brokerId.rfind(':');
  return colon == std::string::npos ? brokerId : brokerId.substr(0, colon);
}

std::set<std::string> applyNamespacePolicies(const std::string& ns,
                                             const NamespaceIsolationPolicies& policies,
                                             const std::set<std::string>& available,
                                             const BrokerLoads& loads) {
  const NamespaceIsolationPolicy* policy = policyOf(policies, ns);
  std::set<std::string> primaries, secondaries;
  for (const auto& broker : available) {
    std::string host = brokerHost(broker);
    if (policy) {
      if (policy->isPrimary(host)) {
        primaries.insert(broker);
      } else if (policy->isSecondary(host)) {
        secondaries.insert(broker);
      }
      continue;
    }
    auto it = loads.find(broker);
    if (it != loads.end() && !it->second.local.persistentTopicsEnabled) continue;
    if (isSharedBroker(policies, host)) secondaries.insert(broker);
  }
  if (!policy) return secondaries;
  if (policy->shouldFailover(primaries.size())) {
    primaries.insert(secondaries.begin(), secondaries.end());
  }
  return primaries;
}

void filterBrokersWithLargeTopicCount(std::set<std::string>& candidates, const BrokerLoads& loads,
                                      int64_t maxTopics) {
  std::set<std::string> kept;
  for (const auto& broker : candidates) {
    int64_t topics = 0;
    if (auto it = loads.find(broker); it != loads.end()) {
      topics = it->second.local.numTopics;
      for (const auto& [b, d] : it->second.preallocated) topics += d.topics;
    }
    if (topics <= maxTopics) kept.insert(broker);
  }
  if (!kept.empty()) candidates = std::move(kept);
}

BrokerNamespaces brokerNamespaces(const BrokerLoads& loads) {
  BrokerNamespaces out;
  for (const auto& [broker, load] : loads) {
    auto& byNs = out[broker];
    auto add = [&](const std::string& bundle) { byNs[nsOf(bundle)].insert(bundle); };
    for (const auto& [bundle, stats] : load.local.lastStats) add(bundle);
    for (const auto& bundle : load.local.bundles) add(bundle);
    for (const auto& [bundle, data] : load.preallocated) add(bundle);
  }
  return out;
}

std::map<std::string, int> antiAffinityNamespaceCounts(
    const BrokerNamespaces& owned, const std::map<std::string, std::string>& groupOf,
    const std::string& group) {
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
  };
  std::string want = lower(group);
  std::map<std::string, int> counts;
  for (const auto& [broker, byNs] : owned) {
    for (const auto& [ns, bundles] : byNs) {
      if (bundles.empty()) continue;
      auto it = groupOf.find(ns);
      if (it != groupOf.end() && !it->second.empty() && lower(it->second) == want) {
        ++counts[broker];
      }
    }
  }
  return counts;
}

void filterAntiAffinityGroupOwnedBrokers(std::set<std::string>& candidates,
                                         const std::map<std::string, int>& counts) {
  if (candidates.empty()) return;
  int least = std::numeric_limits<int>::max();
  for (const auto& broker : candidates) {
    auto it = counts.find(broker);
    least = std::min(least, it == counts.end() ? 0 : it->second);
  }
  for (auto it = candidates.begin(); it != candidates.end();) {
    auto c = counts.find(*it);
    int n = c == counts.end() ? 0 : c->second;
    it = n != least ? candidates.erase(it) : std::next(it);
  }
}

void removeMostServicingBrokersForNamespace(const std::string& bundleKey,
                                            std::set<std::string>& candidates,
                                            const BrokerNamespaces& owned) {
  if (candidates.empty()) return;
  std::string ns = nsOf(bundleKey);
  // A reported bundle whose range overlaps the one being placed is gone: the parent of a split
  // until its owner writes its next report. Counted, it would send both halves of a hot bundle
  // to the broker it left (the reports lag the split that unloaded the halves).
  auto rangeOf = [&ns](const std::string& key, uint64_t* lower, uint64_t* upper) {
    return key.size() > ns.size() + 1 &&
           parseBundleName(key.substr(ns.size() + 1), lower, upper).ok();
  };
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool ranged = rangeOf(bundleKey, &lo, &hi);
  auto stale = [&](const std::string& other) {
    uint64_t olo = 0;
    uint64_t ohi = 0;
    return ranged && other != bundleKey && rangeOf(other, &olo, &ohi) && olo < hi && lo < ohi;
  };
  auto countOf = [&](const std::string& broker) -> size_t {
    auto b = owned.find(broker);
    if (b == owned.end()) return 0;
    auto n = b->second.find(ns);
    if (n == b->second.end()) return 0;
    return static_cast<size_t>(
        std::count_if(n->second.begin(), n->second.end(),
                      [&](const std::string& other) { return !stale(other); }));
  };
  size_t least = std::numeric_limits<size_t>::max();
  for (const auto& broker : candidates) least = std::min(least, countOf(broker));
  for (auto it = candidates.begin(); it != candidates.end();) {
    it = countOf(*it) > least ? candidates.erase(it) : std::next(it);
  }
}

namespace {

double weightedMaxUsage5(const LocalBrokerData& d, const PlacementSettings& s) {
  return std::max({d.usage.cpu.percentUsage() * s.cpuWeight,
                   d.usage.memory.percentUsage() * s.memoryWeight,
                   d.usage.directMemory.percentUsage() * s.directMemoryWeight,
                   d.usage.bandwidthIn.percentUsage() * s.bandwithInWeight,
                   d.usage.bandwidthOut.percentUsage() * s.bandwithOutWeight}) /
         100;
}

}  // namespace

double leastLongTermMessageRateScore(const BrokerLoad& b, const PlacementSettings& s) {
  double threshold = s.overloadedThresholdPercentage / 100.0;
  if (weightedMaxUsage5(b.local, s) > threshold) return std::numeric_limits<double>::infinity();
  double rate = 0;
  for (const auto& [bundle, data] : b.preallocated) {
    rate += data.longTermData.msgRateIn + data.longTermData.msgRateOut;
  }
  return rate + b.timeAverage.longTermMsgRateIn + b.timeAverage.longTermMsgRateOut;
}

std::optional<std::string> leastLongTermMessageRate(const std::set<std::string>& candidates,
                                                    const BrokerLoads& loads,
                                                    const PlacementSettings& s, const Pick& pick) {
  std::vector<std::string> best;
  double min = std::numeric_limits<double>::infinity();
  static const BrokerLoad kNone;
  for (const auto& broker : candidates) {
    auto it = loads.find(broker);
    double score = leastLongTermMessageRateScore(it == loads.end() ? kNone : it->second, s);
    if (score < min) {
      best.assign(1, broker);
      min = score;
    } else if (score == min && !std::isinf(score)) {
      best.push_back(broker);
    }
  }
  if (best.empty()) best.assign(candidates.begin(), candidates.end());  // all overloaded
  if (best.empty()) return std::nullopt;
  size_t i = best.size() == 1 ? 0 : pick(best.size());
  return best[std::min(i, best.size() - 1)];
}

namespace {

// RoundRobinBrokerSelector over the candidates in ascending order.
std::optional<std::string> roundRobinBroker(const std::set<std::string>& candidates,
                                            uint64_t* counter) {
  if (candidates.empty()) return std::nullopt;
  uint64_t n = counter ? (*counter)++ : 0;
  return *std::next(candidates.begin(), static_cast<std::ptrdiff_t>(n % candidates.size()));
}

}  // namespace

std::optional<std::string> selectBroker(const PlacementInput& in, const PlacementSettings& s,
                                        const Pick& pick) {
  static const BrokerLoads kNoLoads;
  static const NamespaceIsolationPolicies kNoPolicies;
  const BrokerLoads& loads = in.loads ? *in.loads : kNoLoads;
  const NamespaceIsolationPolicies& policies = in.policies ? *in.policies : kNoPolicies;
  std::string ns = nsOf(in.bundleKey);
  const std::set<std::string> allowed = applyNamespacePolicies(ns, policies, in.available, loads);
  std::set<std::string> candidates = allowed;
  filterBrokersWithLargeTopicCount(candidates, loads, s.brokerMaxTopics);
  if (in.antiAffinityCounts)
    filterAntiAffinityGroupOwnedBrokers(candidates, *in.antiAffinityCounts);
  if (s.distributeBundlesEvenly) {
    removeMostServicingBrokersForNamespace(in.bundleKey, candidates, brokerNamespaces(loads));
  }
  if (candidates.empty()) candidates = allowed;
  auto broker = s.sheddingExcludedNamespaces.count(ns)
                    ? roundRobinBroker(candidates, in.roundRobin)
                    : leastLongTermMessageRate(candidates, loads, s, pick);
  if (!broker) return broker;
  auto it = loads.find(*broker);
  if (it != loads.end()) {
    double usage = it->second.local.maxResourceUsageWithWeight(
        s.cpuWeight, s.directMemoryWeight, s.bandwidthInWeight, s.bandwidthOutWeight);
    if (usage > s.overloadedThresholdPercentage / 100.0) {
      // Every filtered candidate was overloaded: the strategy again over all allowed brokers.
      if (auto other = leastLongTermMessageRate(allowed, loads, s, pick)) broker = other;
    }
  }
  return broker;
}

std::optional<std::string> Preallocations::brokerOf(const std::string& bundleKey) const {
  auto it = byBundle_.find(bundleKey);
  if (it == byBundle_.end()) return std::nullopt;
  return it->second.broker;
}

void Preallocations::add(const std::string& bundleKey, const std::string& broker,
                         const BundleData& data, int64_t nowMs) {
  byBundle_[bundleKey] = Entry{broker, data, nowMs};
}

void Preallocations::prune(const std::map<std::string, LocalBrokerData>& reports, int64_t nowMs,
                           int64_t maxAgeMs) {
  for (auto it = byBundle_.begin(); it != byBundle_.end();) {
    auto r = reports.find(it->second.broker);
    bool drop = r == reports.end() || r->second.bundles.count(it->first) > 0 ||
                r->second.lastStats.count(it->first) > 0 || nowMs - it->second.atMs > maxAgeMs;
    it = drop ? byBundle_.erase(it) : std::next(it);
  }
}

std::vector<std::string> Preallocations::bundles() const {
  std::vector<std::string> out;
  out.reserve(byBundle_.size());
  for (const auto& [bundle, e] : byBundle_) out.push_back(bundle);
  return out;
}

std::map<std::string, BundleData> Preallocations::of(const std::string& broker) const {
  std::map<std::string, BundleData> out;
  for (const auto& [bundle, e] : byBundle_) {
    if (e.broker == broker) out[bundle] = e.data;
  }
  return out;
}

}  // namespace magnetar::broker::cluster
