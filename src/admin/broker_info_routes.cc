#include "admin/broker_info_routes.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>

#include "admin/stats_json.h"
#include "broker/cluster/bundles.h"
#include "broker/cluster/load_report.h"

namespace magnetar::admin {
namespace {

namespace json = boost::json;

// Pulsar's default namespace bundles (defaultNumberOfNamespaceBundles = 4).
constexpr const char* kBundles[] = {"0x00000000_0x40000000", "0x40000000_0x80000000",
                                    "0x80000000_0xc0000000", "0xc0000000_0xffffffff"};

// "host:port" of this broker's web service as the client reached it.
std::string brokerId(const AdminContext& ctx, const HttpRequest& req) {
  std::string url = webServiceUrl(ctx, req);
  return url.substr(std::string("http://").size());
}

// The bundle of a loaded topic: in cluster mode by its namespace's real cut (a split's halves
// included), else the default 4-bundle cut.
std::string bundleOfTopic(const AdminContext& ctx, const std::string& ns,
                          const std::string& fullTopicName) {
  if (const broker::TopicOwnership* o = ctx.service.topicOwnership()) {
    std::string b = o->bundleOf(ns, fullTopicName);
    if (!b.empty()) return b;
  }
  return bundleOf(fullTopicName);
}

// Loaded topics' namespaces and bundles (namespace -> bundles).
std::map<std::string, std::set<std::string>> ownedBundles(const AdminContext& ctx) {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& t : ctx.service.topics()) {
    std::string ns = t->name().namespaceName();
    out[ns].insert(bundleOfTopic(ctx, ns, t->name().toString()));
  }
  return out;
}

void addBrokerRoutes(Router& r, const AdminContext* ctx) {
  r.addSync("GET", "/admin/v2/brokers/leaderBroker",
            [ctx](const HttpRequest& req, const PathParams&) {
              return jsonResponse(json::object{{"serviceUrl", webServiceUrl(*ctx, req)},
                                               {"brokerId", brokerId(*ctx, req)}});
            });
  r.addSync("GET", "/admin/v2/brokers/version", [ctx](const HttpRequest&, const PathParams&) {
    // Pulsar returns PulsarVersion.getVersion() as a bare string (no JSON quotes).
    return HttpResponse{200, "application/json", ctx->service.options().serverVersion, {}};
  });
  r.addSync("GET", "/admin/v2/brokers/internal-configuration",
            [ctx](const HttpRequest&, const PathParams&) {
              std::string url = ctx->config->metadataStoreUrl();
              return jsonResponse(json::object{{"zookeeperServers", nullptr},
                                               {"configurationStoreServers", nullptr},
                                               {"ledgersRootPath", nullptr},
                                               {"bookkeeperMetadataServiceUri", nullptr},
                                               {"stateStorageServiceUrl", nullptr},
                                               {"metadataStoreUrl", url},
                                               {"configurationMetadataStoreUrl", url}});
            });
  r.addSync(
      "GET", "/admin/v2/brokers/{cluster}/{broker}/ownedNamespaces",
      [ctx](const HttpRequest& req, const PathParams& p) {
        if (p.at("cluster") != ctx->config->clusterName()) {
          return HttpResponse::error(404, "Cluster does not exist");
        }
        HostPort asked = parseHostHeader(p.at("broker"));
        HostPort self = parseHostHeader(brokerId(*ctx, req));
        if (asked.port < 0) return HttpResponse::error(412, "Invalid broker url " + p.at("broker"));
        if (asked.port != self.port) {
          return HttpResponse::error(
              412, fmt::format("Broker {} is not this broker ({})", p.at("broker"),
                               brokerId(*ctx, req)));
        }
        json::object o;
        for (const auto& [ns, bundles] : ownedBundles(*ctx)) {
          for (const auto& b : bundles) {
            std::string key = ns;
            key += '/';
            key += b;
            o[key] = json::object{
                {"broker_assignment", "shared"}, {"is_controlled", false}, {"is_active", true}};
          }
        }
        return jsonResponse(o);
      });
}

void addClusterPeerRoute(Router& r, const AdminContext* ctx) {
  r.addSync("GET", "/admin/v2/clusters/{cluster}/peers",
            [ctx](const HttpRequest&, const PathParams& p) {
              if (p.at("cluster") != ctx->config->clusterName()) {
                return HttpResponse::error(404, "Cluster does not exist");
              }
              return noContent();  // Pulsar: peerClusterNames is null unless configured
            });
}

// Snapshots of every loaded topic, taken on their executors; done on any thread.
void snapshotAll(const AdminContext* ctx,
                 std::function<void(std::vector<broker::TopicSnapshot>)> done) {
  auto topics = ctx->service.topics();
  auto gather = Gather<broker::TopicSnapshot>::create(topics.size(), std::move(done));
  for (size_t i = 0; i < topics.size(); ++i) {
    auto t = topics[i];
    auto rates = ctx->rates.find(t->name().toString());
    t->executor().execute(
        [t, rates, gather, i] { gather->set(i, broker::snapshotTopic(*t, rates.get())); });
  }
}

struct NamespaceTotals {
  double rateIn = 0, rateOut = 0, throughputIn = 0, throughputOut = 0;
  int64_t storageSize = 0, backlog = 0, topics = 0, producers = 0, subscriptions = 0,
          consumers = 0;
};

std::map<std::string, NamespaceTotals> totalsByNamespace(
    const std::vector<broker::TopicSnapshot>& snaps) {
  std::map<std::string, NamespaceTotals> out;
  for (const auto& s : snaps) {
    NamespaceTotals& n = out[s.namespaceName];
    n.rateIn += s.rateIn.msgRate;
    n.throughputIn += s.rateIn.byteRate;
    n.rateOut += s.rateOut.msgRate;
    n.throughputOut += s.rateOut.byteRate;
    n.storageSize += s.storageSize;
    n.backlog += s.msgBacklog;
    n.topics += 1;
    n.producers += static_cast<int64_t>(s.publishers.size());
    n.subscriptions += static_cast<int64_t>(s.subscriptions.size());
    for (const auto& sub : s.subscriptions) {
      n.consumers += static_cast<int64_t>(sub.consumers.size());
    }
  }
  return out;
}

// Resident memory of this process and the machine's memory, in MB (from /proc).
std::pair<double, double> memoryMb() {
  double rss = 0, total = 0;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) rss = std::stod(line.substr(6)) / 1024.0;
  }
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("MemTotal:", 0) == 0) total = std::stod(line.substr(9)) / 1024.0;
  }
  return {rss, total};
}

json::object usage(double used, double limit) {
  return {{"usage", used}, {"limit", limit}};
}

json::object loadReport(const AdminContext& ctx, const HttpRequest& req,
                        const std::vector<broker::TopicSnapshot>& snaps) {
  auto totals = totalsByNamespace(snaps);
  NamespaceTotals all;
  std::set<std::string> bundles;
  for (const auto& s : snaps) {
    bundles.insert(s.namespaceName + "/" + bundleOfTopic(ctx, s.namespaceName, s.name));
  }
  for (const auto& [ns, n] : totals) {
    all.rateIn += n.rateIn;
    all.rateOut += n.rateOut;
    all.throughputIn += n.throughputIn;
    all.throughputOut += n.throughputOut;
    all.topics += n.topics;
    all.producers += n.producers;
    all.consumers += n.consumers;
  }
  // CPU: this process's user+system time over its life, in percent of one core (Pulsar's
  // cpu.usage is percent, limit 100 per core).
  static const auto start = std::chrono::steady_clock::now();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  double cpuSec = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                  static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double cpuPct = wall > 1 ? 100.0 * cpuSec / wall : 0.0;
  auto [rss, total] = memoryMb();
  json::array bundleList;
  for (const auto& b : bundles) bundleList.emplace_back(b);
  std::string host = advertisedHost(ctx, req);
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  return {{"webServiceUrl", webServiceUrl(ctx, req)},
          {"pulsarServiceUrl",
           fmt::format("pulsar://{}:{}", host, ctx.service.brokerServicePort())},
          {"persistentTopicsEnabled", true},
          {"nonPersistentTopicsEnabled", false},
          {"cpu", usage(cpuPct, 100.0 * ctx.config->availableProcessors())},
          {"memory", usage(rss, total)},
          {"directMemory", usage(0, 0)},
          {"bandwidthIn", usage(all.throughputIn / 1024.0, -1)},
          {"bandwidthOut", usage(all.throughputOut / 1024.0, -1)},
          {"msgThroughputIn", all.throughputIn},
          {"msgThroughputOut", all.throughputOut},
          {"msgRateIn", all.rateIn},
          {"msgRateOut", all.rateOut},
          {"lastUpdate", now},
          {"lastStats", json::object{}},
          {"numTopics", all.topics},
          {"numBundles", static_cast<int64_t>(bundles.size())},
          {"numConsumers", all.consumers},
          {"numProducers", all.producers},
          {"bundles", std::move(bundleList)},
          {"lastBundleGains", json::array{}},
          {"lastBundleLosses", json::array{}},
          {"brokerVersionString", ctx.service.options().serverVersion},
          {"protocols", json::object{}},
          {"advertisedListeners", json::object{}},
          {"loadReportType", "LocalBrokerData"}};
}

void addStatsRoutes(Router& r, const AdminContext* ctx) {
  r.add("GET", "/admin/v2/broker-stats/topics",
        [ctx](const HttpRequest&, const PathParams&, const Respond& respond) {
          snapshotAll(ctx, [ctx, respond](const std::vector<broker::TopicSnapshot>& snaps) {
            json::object out;
            for (const auto& s : snaps) {
              json::value& ns = out[s.namespaceName];
              if (!ns.is_object()) ns = json::object{};
              json::value& bundle = ns.as_object()[bundleOfTopic(*ctx, s.namespaceName, s.name)];
              if (!bundle.is_object()) bundle = json::object{{"persistent", json::object{}}};
              bundle.as_object()["persistent"].as_object()[s.name] = topicStatsJson(s);
            }
            respond(jsonResponse(out));
          });
        });
  r.add("GET", "/admin/v2/broker-stats/metrics",
        [ctx](const HttpRequest& req, const PathParams&, const Respond& respond) {
          std::string cluster = ctx->config->clusterName();
          std::string broker = brokerId(*ctx, req);
          int64_t connections = ctx->service.activeConnections();
          snapshotAll(ctx, [respond, cluster, broker,
                            connections](const std::vector<broker::TopicSnapshot>& snaps) {
            json::array out;
            // Broker-wide connection metrics (Pulsar's "connection" dimension set).
            out.emplace_back(json::object{
                {"metrics", json::object{{"brk_active_connections", connections}}},
                {"dimensions", json::object{{"broker", broker},
                                            {"cluster", cluster},
                                            {"metric", "connection"}}}});
            for (const auto& [ns, n] : totalsByNamespace(snaps)) {
              json::object m{{"brk_in_rate", n.rateIn},
                             {"brk_in_tp_rate", n.throughputIn},
                             {"brk_out_rate", n.rateOut},
                             {"brk_out_tp_rate", n.throughputOut},
                             {"brk_storage_size", n.storageSize},
                             {"brk_msg_backlog", n.backlog},
                             {"brk_no_of_topics", n.topics},
                             {"brk_no_of_producers", n.producers},
                             {"brk_no_of_subscriptions", n.subscriptions},
                             {"brk_no_of_consumers", n.consumers},
                             {"brk_no_of_replicators", 0},
                             {"brk_replication_backlog", 0}};
              out.emplace_back(json::object{
                  {"metrics", std::move(m)},
                  {"dimensions",
                   json::object{{"broker", broker}, {"cluster", cluster}, {"namespace", ns}}}});
            }
            respond(jsonResponse(out));
          });
        });
  r.add("GET", "/admin/v2/broker-stats/load-report",
        [ctx](const HttpRequest& req, const PathParams&, const Respond& respond) {
          if (ctx->loadManager) {
            return respond(
                HttpResponse{200, "application/json", ctx->loadManager->generateLoadReport(), {}});
          }
          snapshotAll(ctx,
                      [ctx, respond, copy = req](const std::vector<broker::TopicSnapshot>& snaps) {
                        respond(jsonResponse(loadReport(*ctx, copy, snaps)));
                      });
        });
}

}  // namespace

broker::cluster::BundleStatsMap bundleStats(broker::BrokerService& service) {
  broker::cluster::BundleStatsMap out;
  const broker::TopicOwnership* ownership = service.topicOwnership();
  for (const auto& t : service.topics()) {
    std::string name = t->name().toString();
    std::string ns = t->name().namespaceName();
    std::string bundle = ownership ? ownership->bundleOf(ns, name) : std::string();
    if (bundle.empty()) bundle = bundleOf(name);
    std::string key = ns;
    key += '/';
    key += bundle;
    broker::cluster::NamespaceBundleStats& s = out[key];
    broker::TopicLoad l;
    if (auto rates = service.rates().find(name)) l = rates->load();
    s.msgRateIn += l.msgRateIn;
    s.msgThroughputIn += l.msgThroughputIn;
    s.msgRateOut += l.msgRateOut;
    s.msgThroughputOut += l.msgThroughputOut;
    s.producerCount += l.producers;
    s.consumerCount += l.consumers;
    s.topics += 1;
  }
  return out;
}

std::string bundleOf(const std::string& fullTopicName) {
  // Pulsar's bundle hash (CRC32 of the name); with 4 equal bundles the top two bits pick one.
  return kBundles[broker::cluster::topicHash(fullTopicName) >> 30];
}

void addBrokerInfoRoutes(Router& router, const AdminContext& ctx) {
  addBrokerRoutes(router, &ctx);
  addClusterPeerRoute(router, &ctx);
}

void addBrokerStatsRoutes(Router& router, const AdminContext& ctx) { addStatsRoutes(router, &ctx); }

}  // namespace magnetar::admin
