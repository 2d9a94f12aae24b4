#include "admin/router.h"

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <exception>
#include <memory>
#include <stdexcept>

namespace magnetar::admin {
namespace {

bool isParam(const std::string& seg) {
  return seg.size() > 2 && seg.front() == '{' && seg.back() == '}';
}

std::vector<std::string> splitPath(std::string_view path) {
  std::vector<std::string> out;
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view seg = path.substr(0, slash);
    if (!seg.empty()) out.emplace_back(seg);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

// The value of the path param pattern[i]. Pulsar's PersistentTopics, NonPersistentTopics and
// TopicLookup take {topic} @Encoded and decode it once with Codec.decode (its admin client sends
// Codec.encode(name): "my topic" as my+topic, "x+y" as x%2By); SchemasResource takes it
// path-decoded and decodes it once more. A malformed escape is kept as sent. The other params are
// path-decoded (JAX-RS): '+' stays.
std::string paramValue(const std::vector<std::string>& pattern, size_t i, const std::string& raw) {
  std::string decoded = percentDecode(raw);
  if (pattern[i] != "{topic}") return decoded;
  bool schemas = pattern.size() > 2 && pattern[0] == "admin" && pattern[2] == "schemas";
  const std::string& in = schemas ? decoded : raw;
  return codecDecode(in).value_or(decoded);
}

bool matches(const std::vector<std::string>& pattern, const std::vector<std::string>& path,
             PathParams* params) {
  if (pattern.size() != path.size()) return false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (isParam(pattern[i])) {
      if (params)
        (*params)[pattern[i].substr(1, pattern[i].size() - 2)] = paramValue(pattern, i, path[i]);
    } else if (pattern[i] != percentDecode(path[i])) {
      return false;
    }
  }
  return true;
}

}  // namespace

HttpResponse HttpResponse::json(std::string body, int status) {
  return HttpResponse{status, "application/json", std::move(body), {}};
}

HttpResponse HttpResponse::text(std::string body, int status) {
  return HttpResponse{status, "text/plain", std::move(body), {}};
}

HttpResponse HttpResponse::error(int status, std::string_view reason) {
  boost::json::object o;
  o["reason"] = reason;
  return json(boost::json::serialize(o), status);
}

std::string percentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::string(s);
    // Two hex digits, either case (from_chars takes no sign or 0x prefix for an unsigned).
    const char* hex = s.data() + i + 1;
    unsigned byte = 0;
    auto [end, ec] = std::from_chars(hex, hex + 2, byte, 16);
    if (ec != std::errc() || end != hex + 2) return std::string(s);
    out += static_cast<char>(byte);
    i += 2;
  }
  return out;
}

std::optional<std::string> codecDecode(std::string_view s) {
  std::string spaced(s);
  std::replace(spaced.begin(), spaced.end(), '+', ' ');  // before the escapes: %2B stays a '+'
  std::string out = percentDecode(spaced);
  if (out == spaced && spaced.find('%') != std::string::npos) return std::nullopt;
  return out;
}

void Router::add(std::string method, std::string_view pattern, Handler handler) {
  routes_.push_back(
      Route{std::move(method), splitPath(pattern), std::string(pattern), std::move(handler)});
}

void Router::addSync(std::string method, std::string_view pattern, SyncHandler handler) {
  add(std::move(method), pattern,
      [h = std::move(handler)](const HttpRequest& req, const PathParams& params,
                               const Respond& respond) { respond(h(req, params)); });
}

void Router::alias(const std::string& method, std::string_view pattern, std::string_view fromPrefix,
                   std::string_view toPrefix, const PathParams& extra) {
  std::vector<std::string> segments = splitPath(pattern);
  for (const Route& r : routes_) {
    if (r.method != method || r.segments != segments) continue;
    if (pattern.substr(0, fromPrefix.size()) != fromPrefix) break;
    std::string to = std::string(toPrefix) + std::string(pattern.substr(fromPrefix.size()));
    add(method, to,
        [h = r.handler, extra](const HttpRequest& req, const PathParams& p, Respond respond) {
          PathParams all = p;
          for (const auto& [k, v] : extra) all[k] = v;
          h(req, all, std::move(respond));
        });
    return;
  }
  throw std::logic_error("no route " + method + " " + std::string(pattern) + " to alias");
}

bool Router::moreSpecific(const Route& a, const Route& b) {
  // JAX-RS: at the first segment where one pattern has a literal and the other a parameter, the
  // literal wins (so /brokers/leaderBroker beats /brokers/{cluster}).
  for (size_t i = 0; i < a.segments.size() && i < b.segments.size(); ++i) {
    bool pa = isParam(a.segments[i]);
    bool pb = isParam(b.segments[i]);
    if (pa != pb) return !pa;
  }
  return false;
}

void Router::dispatch(const HttpRequest& request, const Respond& respond) const {
  std::vector<std::string> path = splitPath(request.path);
  bool pathMatched = false;
  const Route* best = nullptr;
  for (const Route& r : routes_) {
    if (!matches(r.segments, path, nullptr)) continue;
    pathMatched = true;
    if (r.method != request.method) continue;
    if (!best || moreSpecific(r, *best)) best = &r;
  }
  if (best) {
    PathParams params;
    matches(best->segments, path, &params);
    if (filter_) {
      if (auto denied = filter_(request, best->pattern, params)) {
        respond(std::move(*denied));
        return;
      }
    }
    try {
      if (guard_) {
        if (auto answer = guard_(request, best->pattern, params)) {
          respond(std::move(*answer));
          return;
        }
      }
      best->handler(request, params, respond);
    } catch (const std::exception& e) {
      respond(HttpResponse::error(500, std::string("Internal error: ") + e.what()));
    }
    return;
  }
  if (filter_) {
    if (auto denied = filter_(request, "", PathParams{})) {
      respond(std::move(*denied));
      return;
    }
  }
  if (pathMatched) {
    respond(
        HttpResponse::error(405, "Method " + request.method + " not allowed on " + request.path));
  } else {
    respond(HttpResponse::error(404, "Not found: " + request.path));
  }
}

}  // namespace magnetar::admin
