// Helpers shared by the /admin/v2 route files: the broker handles they need, query parameters,
// JSON bodies, Pulsar's status codes, and fan-out of work to topic executors.
#pragma once

#include <atomic>
#include <boost/json.hpp>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "admin/router.h"
#include "base/status.h"
#include "broker/service/broker_service.h"
#include "broker/topic/stats.h"
#include "config/service_configuration.h"
#include "net/executor.h"

namespace magnetar::broker::cluster {
class LoadManager;
}  // namespace magnetar::broker::cluster

namespace magnetar::admin {

// What the admin routes work on. Outlives the HTTP server.
struct AdminContext {
  broker::BrokerService& service;
  std::shared_ptr<config::ServiceConfiguration> config;
  broker::RateRegistry& rates;
  // `pulsar-web-async` (BrokerAdmin's): where a continuation that may block on the configuration
  // store runs when it completes on a broker executor. nullptr: run in place (unit tests).
  net::Executor* mayBlock = nullptr;
  // The load manager (load report, pulsar_lb_* metrics); nullptr: the load report is computed
  // from topic snapshots (unit tests).
  broker::cluster::LoadManager* loadManager = nullptr;
};

// Runs fn at once on a thread that may block (pulsar-web), else (on a broker executor: an I/O
// loop or ml-worker completing an admin operation) queues it on ctx.mayBlock, so the
// configuration-store writes in fn (blocking in cluster mode) never stall an executor.
void runMayBlock(const AdminContext& ctx, std::function<void()> fn);

// The decoded value of query parameter `name`, nullopt when absent.
std::optional<std::string> queryParam(const HttpRequest& req, std::string_view name);
// True when the parameter is present as "true" (Pulsar's boolean query flags, e.g. force=true).
bool queryFlag(const HttpRequest& req, std::string_view name);

// 204 No Content (Pulsar's answer to a successful PUT/POST/DELETE).
HttpResponse noContent();
HttpResponse jsonResponse(const boost::json::value& v, int status = 200);
// Pulsar's status for an internal error code: kNotFound 404, kAlreadyExists 409, kBusy 412,
// kInvalidArgument 412, kNotAllowed 405, others 500; body {"reason": message}.
HttpResponse errorResponse(const Status& s);

// Pulsar's AuthAction values in its enum order (the order permissions are printed in).
const std::vector<std::string>& authActions();
// role -> actions as Pulsar prints permissions: {"role": ["produce", "consume"]}.
boost::json::object permissionsJson(const std::map<std::string, std::set<std::string>>& p);
// A grant body: a JSON array of AuthAction values (authActionFrom). nullopt with 400 in *error
// otherwise.
std::optional<std::set<std::string>> parseAuthActions(const HttpRequest& req, HttpResponse* error);
// One AuthAction of a JSON body as Pulsar's mapper reads it: a known name, an ordinal (0 =
// produce, ...), or "" (shown as null) for null and unknown names (Pulsar stores a null and
// answers 204); nullopt for another type (400).
std::optional<std::string> authActionFrom(const boost::json::value& v);

// Pulsar's retention policy check: "" when valid, else its text (answered with 400).
std::string retentionPolicyError(int64_t timeInMinutes, int64_t sizeInMB);
// True when a Content-Type header value names application/json (any case, parameters such as
// charset ignored); with anyJsonSubtype, also what Pulsar's JSON reader takes on its topic
// resources: any type with subtype json (any case), *+json, javascript, x-javascript or x-json.
bool isJsonMediaType(std::string_view contentType, bool anyJsonSubtype = false);
// Parses a JSON request body. On failure returns nullopt and sets *error: 415 when the
// Content-Type is not application/json (or absent with a non-empty body), 400 when the body is
// not JSON ("Failed to parse the JSON body: ...") or a Java-int policy field is out of int32
// range (Jackson's text/plain "Numeric value (N) out of range of int ...").
std::optional<boost::json::value> parseJsonBody(const HttpRequest& req, HttpResponse* error);

// Jackson's reading of one JSON value into a Java field, as Pulsar's ObjectMapper does with its
// default coercions (source: Jackson StdDeserializer, checked against Pulsar 4.2.4). nullopt when
// Jackson refuses the value (Pulsar answers 400); a JSON null is refused here too, callers that
// take null (a wrapper type) check it first.
// int/long (int32 for a Java int): an integer in range; a float, truncated (1e3, 3.7 -> 3); a
// string of an optionally signed integer, blanks around it ignored (" 40 ", "+41"; "" is 0;
// "1.5" and "1e2" are refused).
std::optional<int64_t> javaInteger(const boost::json::value& v, bool int32);
// boolean: true/false; an integer (0 false, else true); the strings "true"/"True"/"TRUE",
// "false"/"False"/"FALSE" (blanks ignored), "" false. Floats are refused.
std::optional<bool> javaBoolean(const boost::json::value& v);
// String: a string; a number or boolean as its JSON text (1 -> "1", 1.5 -> "1.5", true -> "true").
std::optional<std::string> javaString(const boost::json::value& v);
// A Map<String,String> body or field (topic properties): an object whose values javaString
// takes. nullopt when it is not one.
std::optional<std::map<std::string, std::string>> javaStringMap(const boost::json::value& v);
// 400 with Jackson's kind of text ("Cannot deserialize value of type `int` from ...").
HttpResponse jacksonError(std::string_view javaType, const boost::json::value& v,
                          std::string_view field = "");

// A path segment of decimal digits only (no sign), at most 18 of them so it fits int64_t;
// nullopt otherwise (callers answer 412 as Pulsar does).
std::optional<int64_t> parseDecimal(std::string_view text);

// "ledger:entry", Pulsar's position text.
std::string positionText(storage::Position p);

// Host and port from a Host header value ("h:1", "[::1]:2", "h"); port -1 when absent.
struct HostPort {
  std::string host;
  int port = -1;
};
HostPort parseHostHeader(std::string_view host);

// The address clients should use for this broker: advertisedAddress when configured, else the
// host the HTTP client reached us at (so a lookup through 127.0.0.1 answers 127.0.0.1), else
// "localhost".
std::string advertisedHost(const AdminContext& ctx, const HttpRequest& req);
// This broker's pulsar:// URL as a standalone lookup answers it: the internal listener's with
// advertisedListeners, else pulsar://{advertisedHost}:{brokerServicePort}.
std::string standaloneBrokerUrl(const AdminContext& ctx, const HttpRequest& req);
// "http://host:port" of this broker's web service, as the client reached it.
std::string webServiceUrl(const AdminContext& ctx, const HttpRequest& req);
// https://<advertised host>:webServicePortTls, "" without a configured HTTPS port.
std::string webServiceUrlTls(const AdminContext& ctx, const HttpRequest& req);

// Parses "{domain}://{tenant}/{namespace}/{topic}" from the path params (domain: the "domain"
// param that the /admin/v2/non-persistent aliases add, else persistent); 412 on a bad name.
std::optional<broker::TopicName> topicFromParams(const PathParams& p, HttpResponse* error);
// The listing domain of a route: kNonPersistent under /admin/v2/non-persistent, else persistent.
broker::TopicDomain domainFromParams(const PathParams& p);
// Adds the /admin/v2/non-persistent/... copies of the persistent topic routes Pulsar's
// NonPersistentTopics serves (list, partitioned list, create/delete, partitions, stats,
// partitioned-stats, internalStats, subscriptions, unload). Call after those routes are added.
void addNonPersistentAliases(Router& r);
// Validates "{tenant}/{namespace}" params; 412 on a bad name, 404 when it does not exist.
std::optional<std::string> namespaceFromParams(const AdminContext& ctx, const PathParams& p,
                                               HttpResponse* error);

// Registers `method pattern` (with {tenant}, {namespace}, {topic}) with the topic name parsed as
// persistent://tenant/namespace/topic (412 on a bad name before h runs).
using TopicHandler =
    std::function<void(const HttpRequest&, const PathParams&, const broker::TopicName&, Respond)>;
void addTopicRoute(Router& r, const char* method, const std::string& pattern, TopicHandler h);

// Parses a Pulsar MessageId / ResetCursorData JSON body ({"ledgerId","entryId"[,"partitionIndex",
// "batchIndex","isExcluded"]}); nullopt with 400 (not JSON) or 412 (not a message id) in *error.
struct MessageIdBody {
  storage::Position position;
  int32_t partitionIndex = -1;
  bool isExcluded = false;
};
std::optional<MessageIdBody> parseMessageIdBody(const HttpRequest& req, HttpResponse* error);

// Loads an existing topic (with `create`: creates it if missing) and runs fn(topic) on its
// executor; answers 404 "Topic not found" (or the namespace error) itself when it does not exist,
// 500 naming the topic when the storage could not be read (ZooKeeper, bookies, disk).
void withTopic(const AdminContext& ctx, const broker::TopicName& name, const Respond& respond,
               std::function<void(std::shared_ptr<broker::PersistentTopic>)> fn,
               bool create = false);

// Topics of "tenant/ns" in `domain`, sorted: loaded and stored ones plus, for persistent
// topics, every partition of its partitioned topics (as Pulsar lists them).
// In cluster mode this is this broker's view only (cluster_routes.h lists the cluster's).
std::vector<std::string> listTopics(const broker::BrokerService& service, const std::string& ns,
                                    broker::TopicDomain domain = broker::TopicDomain::kPersistent);
inline std::vector<std::string> listTopics(
    const AdminContext& ctx, const std::string& ns,
    broker::TopicDomain domain = broker::TopicDomain::kPersistent) {
  return listTopics(ctx.service, ns, domain);
}

// Collects one result per task from several threads and calls done(results) once, on the thread
// that adds the last one (or at once for zero tasks). Results keep task order.
template <typename T>
class Gather : public std::enable_shared_from_this<Gather<T>> {
 public:
  static std::shared_ptr<Gather> create(size_t n, std::function<void(std::vector<T>)> done) {
    auto g = std::shared_ptr<Gather>(new Gather(n, std::move(done)));
    if (n == 0) g->finish();
    return g;
  }
  void set(size_t i, T value) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      results_[i] = std::move(value);
    }
    if (remaining_.fetch_sub(1) == 1) finish();
  }

 private:
  Gather(size_t n, std::function<void(std::vector<T>)> done)
      : results_(n), remaining_(n), done_(std::move(done)) {}
  void finish() {
    std::vector<T> out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      out = std::move(results_);
    }
    done_(std::move(out));
  }
  std::mutex mu_;
  std::vector<T> results_;
  std::atomic<size_t> remaining_;
  std::function<void(std::vector<T>)> done_;
};

}  // namespace magnetar::admin
