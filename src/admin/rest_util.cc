#include "admin/rest_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <set>

#include "base/blocking_wait.h"

namespace magnetar::admin {

void runMayBlock(const AdminContext& ctx, std::function<void()> fn) {
  if (executorThreadName() == nullptr || ctx.mayBlock == nullptr) return fn();
  ctx.mayBlock->execute(std::move(fn));
}

std::optional<std::string> queryParam(const HttpRequest& req, std::string_view name) {
  std::string_view q = req.query;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view kv = q.substr(0, amp);
    size_t eq = kv.find('=');
    std::string_view key = kv.substr(0, eq);
    if (percentDecode(key) == name) {
      return eq == std::string_view::npos ? std::string() : percentDecode(kv.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

bool queryFlag(const HttpRequest& req, std::string_view name) {
  auto v = queryParam(req, name);
  return v && (*v == "true" || *v == "1");
}

HttpResponse noContent() { return HttpResponse{204, "", "", {}}; }

HttpResponse jsonResponse(const boost::json::value& v, int status) {
  return HttpResponse::json(boost::json::serialize(v), status);
}

HttpResponse errorResponse(const Status& s) {
  int code = 500;
  switch (s.code()) {
    case StatusCode::kNotFound:
      code = 404;
      break;
    case StatusCode::kAlreadyExists:
      code = 409;
      break;
    case StatusCode::kBusy:
      code = 412;
      break;
    case StatusCode::kInvalidArgument:
      code = 412;
      break;
    case StatusCode::kNotAllowed:
      code = 405;
      break;
    default:
      break;
  }
  return HttpResponse::error(code, s.message());
}

namespace {

std::string_view trimmed(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

// The number's text as sent for top-level field `key` of a JSON object body ("" when not found).
std::string_view numberText(std::string_view body, std::string_view key) {
  std::string quoted = "\"" + std::string(key) + "\"";
  for (size_t at = body.find(quoted); at != std::string_view::npos;
       at = body.find(quoted, at + 1)) {
    size_t i = at + quoted.size();
    while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
    if (i >= body.size() || body[i] != ':') continue;
    ++i;
    while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
    size_t end = body.find_first_of(",} \t\r\n]", i);
    return body.substr(i, end == std::string_view::npos ? body.size() - i : end - i);
  }
  return {};
}

}  // namespace

bool isJsonMediaType(std::string_view contentType, bool anyJsonSubtype) {
  std::string_view type = trimmed(contentType.substr(0, contentType.find(';')));
  size_t slash = type.find('/');
  if (slash == std::string_view::npos) return false;
  std::string_view major = trimmed(type.substr(0, slash));
  std::string_view subtype = trimmed(type.substr(slash + 1));
  if (!anyJsonSubtype) {
    return equalsIgnoreCase(major, "application") && equalsIgnoreCase(subtype, "json");
  }
  auto endsWith = [&](std::string_view tail) {
    return subtype.size() >= tail.size() && subtype.substr(subtype.size() - tail.size()) == tail;
  };
  return !major.empty() &&
         (equalsIgnoreCase(subtype, "json") || endsWith("+json") || subtype == "javascript" ||
          subtype == "x-javascript" || subtype == "x-json");
}

std::optional<boost::json::value> parseJsonBody(const HttpRequest& req, HttpResponse* error) {
  // Pulsar's resources consume application/json only (its topic resources: whatever its JSON
  // reader takes); another media type, or a body without one (then application/octet-stream),
  // is refused by JAX-RS before the handler runs.
  bool topicResource = req.path.rfind("/admin/v2/persistent/", 0) == 0 ||
                       req.path.rfind("/admin/v2/non-persistent/", 0) == 0;
  if (!isJsonMediaType(req.contentType, topicResource) &&
      (!req.contentType.empty() || !req.body.empty())) {
    *error = HttpResponse::error(415, "Unsupported Media Type");
    return std::nullopt;
  }
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(req.body, ec);
  if (ec) {
    *error = HttpResponse::error(400, "Failed to parse the JSON body: " + ec.message());
    return std::nullopt;
  }
  // Fields that are Java ints in Pulsar's policy classes: Jackson refuses a value out of range
  // with 400 instead of storing it (a float in range is truncated later).
  static const std::set<std::string, std::less<>> kIntFields = {
      "retentionTimeInMinutes",     "limitTime",
      "maxInactiveDurationSeconds", "bookkeeperEnsemble",
      "bookkeeperWriteQuorum",      "bookkeeperAckQuorum",
      "ratePeriodInSecond",         "dispatchThrottlingRateInMsg",
      "publishThrottlingRateInMsg"};
  if (const auto* o = v.if_object()) {
    for (const auto& [key, field] : *o) {
      if (!kIntFields.count(std::string_view(key))) continue;
      bool inRange = !field.is_number() || javaInteger(field, true).has_value();
      if (!inRange) {
        // Jackson's text, as Pulsar answers it (text/plain, no JSON reason).
        std::string_view sent = numberText(req.body, key);
        *error = HttpResponse::text(
            fmt::format("Numeric value ({}) out of range of int (-2147483648 - 2147483647)",
                        sent.empty() ? boost::json::serialize(field) : std::string(sent)),
            400);
        return std::nullopt;
      }
    }
  }
  return v;
}

namespace {

std::string_view trimmedBlanks(std::string_view v) {
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
  return v;
}

std::string jsonKind(const boost::json::value& v) {
  switch (v.kind()) {
    case boost::json::kind::object:
      return "Object value";
    case boost::json::kind::array:
      return "Array value";
    case boost::json::kind::bool_:
      return "Boolean value";
    case boost::json::kind::double_:
      return "Floating-point value";
    case boost::json::kind::string:
      return fmt::format("String \"{}\"", std::string(v.get_string()));
    case boost::json::kind::null:
      return "null value";
    default:
      return "Integer value";
  }
}

}  // namespace

std::optional<int64_t> javaInteger(const boost::json::value& v, bool int32) {
  int64_t lo = int32 ? INT32_MIN : INT64_MIN;
  int64_t hi = int32 ? INT32_MAX : INT64_MAX;
  if (v.is_int64()) {
    if (v.get_int64() < lo || v.get_int64() > hi) return std::nullopt;
    return v.get_int64();
  }
  if (v.is_uint64()) {
    if (v.get_uint64() > static_cast<uint64_t>(hi)) return std::nullopt;
    return static_cast<int64_t>(v.get_uint64());
  }
  if (v.is_double()) {  // ACCEPT_FLOAT_AS_INT: truncated
    double d = v.get_double();
    if (!(d >= static_cast<double>(lo) && d <= static_cast<double>(hi))) return std::nullopt;
    // (double)INT64_MAX is 2^63, which int64 cannot hold: Java's (long) cast saturates there.
    if (d >= 9223372036854775808.0) return hi;
    return static_cast<int64_t>(d);
  }
  if (!v.is_string()) return std::nullopt;
  std::string_view t = trimmedBlanks(v.get_string());
  if (t.empty()) return 0;
  bool negative = t.front() == '-';
  if (t.front() == '-' || t.front() == '+') t.remove_prefix(1);
  if (t.empty() || t.size() > 19 || t.find_first_not_of("0123456789") != t.npos) {
    return std::nullopt;
  }
  uint64_t n = 0;
  for (char ch : t) n = n * 10 + static_cast<uint64_t>(ch - '0');
  uint64_t limit = negative ? static_cast<uint64_t>(hi) + 1 : static_cast<uint64_t>(hi);
  if (n > limit) return std::nullopt;
  return negative ? static_cast<int64_t>(0 - n) : static_cast<int64_t>(n);
}

std::optional<bool> javaBoolean(const boost::json::value& v) {
  if (v.is_bool()) return v.get_bool();
  if (v.is_int64()) return v.get_int64() != 0;
  if (v.is_uint64()) return v.get_uint64() != 0;
  if (!v.is_string()) return std::nullopt;
  std::string_view t = trimmedBlanks(v.get_string());
  if (t == "true" || t == "True" || t == "TRUE") return true;
  if (t.empty() || t == "false" || t == "False" || t == "FALSE") return false;
  return std::nullopt;
}

std::optional<std::string> javaString(const boost::json::value& v) {
  if (v.is_string()) return std::string(v.get_string());
  if (v.is_bool()) return v.get_bool() ? "true" : "false";
  if (v.is_int64()) return std::to_string(v.get_int64());
  if (v.is_uint64()) return std::to_string(v.get_uint64());
  if (v.is_double()) return fmt::format("{}", v.get_double());
  return std::nullopt;
}

std::optional<std::map<std::string, std::string>> javaStringMap(const boost::json::value& v) {
  if (!v.is_object()) return std::nullopt;
  std::map<std::string, std::string> out;
  for (const auto& [k, val] : v.get_object()) {
    auto s = javaString(val);
    if (!s) return std::nullopt;
    out[std::string(k)] = std::move(*s);
  }
  return out;
}

HttpResponse jacksonError(std::string_view javaType, const boost::json::value& v,
                          std::string_view field) {
  std::string text =
      fmt::format("Cannot deserialize value of type `{}` from {}", javaType, jsonKind(v));
  if (!field.empty()) text += fmt::format(" (field \"{}\")", field);
  return HttpResponse::error(400, text);
}

std::string retentionPolicyError(int64_t timeInMinutes, int64_t sizeInMB) {
  if (sizeInMB < -1) return "Invalid retention policy: size limit must be >= -1";
  if (timeInMinutes < -1) return "Invalid retention policy: time limit must be >= -1";
  if ((timeInMinutes == 0) != (sizeInMB == 0)) {
    return "Invalid retention policy: Setting a single time or size limit to 0 is invalid when "
           "one of the limits has a non-zero value. Use the value of -1 instead of 0 to ignore a "
           "specific limit. To disable retention both limits must be set to 0.";
  }
  return "";
}

std::string positionText(storage::Position p) {
  return fmt::format("{}:{}", p.ledgerId, p.entryId);
}

std::optional<int64_t> parseDecimal(std::string_view text) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != text.npos) {
    return std::nullopt;
  }
  int64_t n = 0;
  for (char ch : text) n = n * 10 + (ch - '0');
  return n;
}

HostPort parseHostHeader(std::string_view host) {
  HostPort out;
  size_t colon = host.rfind(':');
  size_t bracket = host.rfind(']');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    std::string port(host.substr(colon + 1));
    if (auto n = parseDecimal(port); n && port.size() <= 5) out.port = static_cast<int>(*n);
    host = host.substr(0, colon);
  }
  out.host = std::string(host);
  return out;
}

std::string standaloneBrokerUrl(const AdminContext& ctx, const HttpRequest& req) {
  if (!ctx.service.options().advertisedListeners.byName.empty()) {
    return ctx.service.brokerServiceUrl();
  }
  return fmt::format("pulsar://{}:{}", advertisedHost(ctx, req), ctx.service.brokerServicePort());
}

std::string advertisedHost(const AdminContext& ctx, const HttpRequest& req) {
  std::string configured = ctx.config->advertisedAddress();
  if (!configured.empty()) return configured;
  HostPort hp = parseHostHeader(req.host);
  return hp.host.empty() ? "localhost" : hp.host;
}

std::string webServiceUrl(const AdminContext& ctx, const HttpRequest& req) {
  HostPort hp = parseHostHeader(req.host);
  int port = hp.port > 0 ? hp.port : ctx.config->webServicePort();
  return fmt::format("http://{}:{}", advertisedHost(ctx, req), port);
}

std::string webServiceUrlTls(const AdminContext& ctx, const HttpRequest& req) {
  std::optional<int> port = ctx.config->webServicePortTls();
  if (!port || *port <= 0) return "";
  return fmt::format("https://{}:{}", advertisedHost(ctx, req), *port);
}

std::optional<broker::TopicName> topicFromParams(const PathParams& p, HttpResponse* error) {
  auto get = [&](const char* k) {
    auto it = p.find(k);
    return it == p.end() ? std::string() : it->second;
  };
  std::string domain = get("domain");
  auto name =
      broker::TopicName::parse(fmt::format("{}://{}/{}/{}", domain.empty() ? "persistent" : domain,
                                           get("tenant"), get("namespace"), get("topic")));
  if (!name.isOk()) {
    *error = HttpResponse::error(412, "Invalid topic name: " + name.status().message());
    return std::nullopt;
  }
  return *name;
}

broker::TopicDomain domainFromParams(const PathParams& p) {
  auto it = p.find("domain");
  return it != p.end() && it->second == "non-persistent" ? broker::TopicDomain::kNonPersistent
                                                         : broker::TopicDomain::kPersistent;
}

const std::vector<std::string>& authActions() {
  static const std::vector<std::string> kActions = {"produce", "consume", "functions",
                                                    "sources", "sinks",   "packages"};
  return kActions;
}

boost::json::object permissionsJson(const std::map<std::string, std::set<std::string>>& p) {
  boost::json::object o;
  for (const auto& [role, actions] : p) {
    boost::json::array a;
    for (const auto& x : authActions()) {
      if (actions.count(x)) a.emplace_back(x);
    }
    if (actions.count("")) a.emplace_back(nullptr);  // an unknown action Pulsar stored as null
    o[role] = std::move(a);
  }
  return o;
}

std::optional<std::string> authActionFrom(const boost::json::value& v) {
  const auto& all = authActions();
  if (v.is_null()) return std::string();
  if (v.is_string()) {
    auto it = std::find(all.begin(), all.end(), v.as_string());
    return it == all.end() ? std::string() : *it;
  }
  if (v.is_int64() || v.is_uint64()) {
    const int64_t i = v.is_int64() ? v.as_int64() : static_cast<int64_t>(v.as_uint64());
    return i >= 0 && i < static_cast<int64_t>(all.size()) ? all[static_cast<size_t>(i)]
                                                          : std::string();
  }
  return std::nullopt;
}

std::optional<std::set<std::string>> parseAuthActions(const HttpRequest& req, HttpResponse* error) {
  auto v = parseJsonBody(req, error);
  if (!v) return std::nullopt;
  std::set<std::string> out;
  if (!v->is_array()) {
    *error =
        jacksonError("java.util.HashSet<org.apache.pulsar.common.policies.data.AuthAction>", *v);
    return std::nullopt;
  }
  for (const auto& e : v->as_array()) {
    std::optional<std::string> action = authActionFrom(e);
    if (!action) {
      *error = HttpResponse::error(
          400, "Cannot deserialize AuthAction from " + boost::json::serialize(e));
      return std::nullopt;
    }
    out.insert(std::move(*action));
  }
  return out;
}

void addNonPersistentAliases(Router& r) {
  static const std::pair<const char*, const char*> kRoutes[] = {
      {"GET", ""},
      {"GET", "/partitioned"},
      {"PUT", "/{topic}"},
      {"DELETE", "/{topic}"},
      {"PUT", "/{topic}/partitions"},
      {"GET", "/{topic}/partitions"},
      {"POST", "/{topic}/partitions"},
      {"DELETE", "/{topic}/partitions"},
      {"GET", "/{topic}/stats"},
      {"GET", "/{topic}/partitioned-stats"},
      {"GET", "/{topic}/internalStats"},
      {"GET", "/{topic}/subscriptions"},
      {"DELETE", "/{topic}/subscription/{subscription}"},
      {"PUT", "/{topic}/unload"},
      {"GET", "/{topic}/permissions"},
      {"POST", "/{topic}/permissions/{role}"},
      {"DELETE", "/{topic}/permissions/{role}"},
  };
  const PathParams extra{{"domain", "non-persistent"}};
  for (const auto& [method, suffix] : kRoutes) {
    r.alias(method, std::string("/admin/v2/persistent/{tenant}/{namespace}") + suffix,
            "/admin/v2/persistent/", "/admin/v2/non-persistent/", extra);
  }
}

std::optional<std::string> namespaceFromParams(const AdminContext& ctx, const PathParams& p,
                                               HttpResponse* error) {
  const std::string& tenant = p.at("tenant");
  const std::string& ns = p.at("namespace");
  if (!broker::isValidNamePart(tenant) || !broker::isValidNamePart(ns)) {
    *error = HttpResponse::error(412, "Invalid namespace name: " + tenant + "/" + ns);
    return std::nullopt;
  }
  std::string full = tenant + "/" + ns;
  if (!ctx.service.namespaceExists(full) && ctx.service.sharedConfig()) {
    ctx.service.sharedConfig()->refreshNamespace(full);  // created through another broker?
  }
  if (!ctx.service.namespaceExists(full)) {
    *error = HttpResponse::error(404, "Namespace does not exist");
    return std::nullopt;
  }
  return full;
}

void addTopicRoute(Router& r, const char* method, const std::string& pattern, TopicHandler h) {
  r.add(method, pattern,
        [h = std::move(h)](const HttpRequest& req, const PathParams& p, Respond respond) {
          HttpResponse err;
          auto name = topicFromParams(p, &err);
          if (!name) return respond(err);
          h(req, p, *name, std::move(respond));
        });
}

std::optional<MessageIdBody> parseMessageIdBody(const HttpRequest& req, HttpResponse* error) {
  auto v = parseJsonBody(req, error);
  if (!v) return std::nullopt;
  const boost::json::object* o = v->if_object();
  const boost::json::value* l = o ? o->if_contains("ledgerId") : nullptr;
  const boost::json::value* e = o ? o->if_contains("entryId") : nullptr;
  auto ledger = l ? javaInteger(*l, false) : std::nullopt;  // "12" too, as Jackson
  auto entry = e ? javaInteger(*e, false) : std::nullopt;
  if (!ledger || !entry) {
    *error = HttpResponse::error(412, "The body must be a message id {ledgerId, entryId}");
    return std::nullopt;
  }
  MessageIdBody out;
  out.position = storage::Position{*ledger, *entry};
  if (const boost::json::value* pi = o->if_contains("partitionIndex")) {
    if (auto n = javaInteger(*pi, true)) out.partitionIndex = static_cast<int32_t>(*n);
  }
  if (const boost::json::value* x = o->if_contains("isExcluded")) {
    out.isExcluded = javaBoolean(*x).value_or(false);
  }
  return out;
}

void withTopic(const AdminContext& ctx, const broker::TopicName& name, const Respond& respond,
               std::function<void(std::shared_ptr<broker::PersistentTopic>)> fn, bool create) {
  if (!ctx.service.namespaceExists(name.namespaceName())) {
    respond(HttpResponse::error(404, "Namespace does not exist"));
    return;
  }
  ctx.service.getOrCreateTopic(
      name, create,
      [name, respond, fn = std::move(fn)](Result<std::shared_ptr<broker::PersistentTopic>> r) {
        if (!r.isOk()) {
          StatusCode c = r.status().code();
          if (c == StatusCode::kNotFound || c == StatusCode::kNotAllowed ||
              c == StatusCode::kInvalidArgument) {
            respond(HttpResponse::error(404, "Topic not found"));
          } else {  // the storage could not say or open it (ZooKeeper, bookies, disk)
            respond(HttpResponse::error(
                500, "Failed to load topic " + name.toString() + ": " + r.status().message()));
          }
          return;
        }
        fn(*r);
      });
}

std::vector<std::string> listTopics(const broker::BrokerService& service, const std::string& ns,
                                    broker::TopicDomain domain) {
  std::set<std::string> out;
  for (auto& t : service.topicsOfNamespace(ns, domain)) out.insert(t);
  if (domain == broker::TopicDomain::kNonPersistent) return {out.begin(), out.end()};
  for (const auto& [name, partitions] :
       service.partitionedTopicsOf(ns, broker::TopicDomain::kPersistent)) {
    for (int i = 0; i < partitions; ++i) out.insert(fmt::format("{}-partition-{}", name, i));
  }
  return {out.begin(), out.end()};
}

}  // namespace magnetar::admin
