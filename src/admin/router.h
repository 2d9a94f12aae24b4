// Router: maps an HTTP method + path pattern to a handler. No I/O; HttpServer feeds it.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace magnetar::admin {

// A parsed request, independent of the HTTP library.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as received: "/admin/v2/brokers/health?x=1"
  std::string path;    // target without the query
  std::string query;   // after '?', undecoded; "" when none
  std::string contentType;
  std::string body;
  std::string host = {};  // the Host header ("127.0.0.1:8080"); "" when absent
  std::optional<std::string> authorization = {};  // the Authorization header, when present
  std::string listenerName = {};    // the X-Pulsar-ListenerName header (Pulsar's lookup); "" absent
  std::string peerCommonName = {};  // verified TLS client certificate CN; "" on plain HTTP
};

struct HttpResponse {
  int status = 200;
  std::string contentType = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra response headers

  static HttpResponse json(std::string body, int status = 200);
  static HttpResponse text(std::string body, int status = 200);
  // Pulsar's error shape: {"reason": "<reason>"} with the given status.
  static HttpResponse error(int status, std::string_view reason);
};

// Values of the {name} segments of the matched pattern, percent-decoded.
using PathParams = std::map<std::string, std::string, std::less<>>;
// Sends the response; call exactly once, from any thread.
using Respond = std::function<void(HttpResponse)>;
// Handlers may answer later (e.g. after a broker thread replied) by keeping `respond`.
using Handler = std::function<void(const HttpRequest&, const PathParams&, Respond)>;
using SyncHandler = std::function<HttpResponse(const HttpRequest&, const PathParams&)>;

// Routes requests by method and path pattern. Patterns are '/'-separated segments; a segment
// "{name}" matches any one non-empty segment and captures it. Empty segments are ignored, so
// "/a/b/" matches "/a/b". Of the routes that match path and method, the most specific wins (a
// literal segment beats "{name}" at the first position where they differ, as JAX-RS chooses);
// among equally specific ones the first added.
// Thread: add() before serving; dispatch() from any thread.
class Router {
 public:
  // Runs before the handler of a matched route (pattern: the route's pattern, e.g.
  // "/admin/v2/tenants/{tenant}") and before the 404/405 answers (pattern ""): an answer stops
  // the request there (authentication and authorization answer 401/403 so).
  using Filter = std::function<std::optional<HttpResponse>(
      const HttpRequest&, const std::string& pattern, const PathParams&)>;
  void setFilter(Filter f) { filter_ = std::move(f); }
  // Runs after the filter, before the handler of a matched route (never for 404/405): an answer
  // stops the request there (cluster mode: 307 to the broker that owns the route's topic). May
  // block the calling (pulsar-web) thread.
  void setGuard(Filter g) { guard_ = std::move(g); }

  void add(std::string method, std::string_view pattern, Handler handler);
  void addSync(std::string method, std::string_view pattern, SyncHandler handler);
  // Serves `method pattern` (added before) also under `toPrefix` + the rest of pattern after
  // `fromPrefix`, with `extra` added to the captured params (Pulsar's /admin/v2/non-persistent
  // routes run the persistent ones' handlers). Throws std::logic_error when no route has exactly
  // that method and pattern (a programming error, seen at start-up).
  void alias(const std::string& method, std::string_view pattern, std::string_view fromPrefix,
             std::string_view toPrefix, const PathParams& extra);

  // Runs the matching handler; 404 {"reason":...} when no pattern matches the path, 405 when
  // the path matches but not for this method. A throwing handler gives 500.
  void dispatch(const HttpRequest& request, const Respond& respond) const;

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;  // literal, or "{name}"
    std::string pattern;
    Handler handler;
  };
  static bool moreSpecific(const Route& a, const Route& b);
  std::vector<Route> routes_;
  Filter filter_;
  Filter guard_;
};

// Decodes %XX escapes (and '+' is kept as '+'). Returns the input unchanged if malformed.
std::string percentDecode(std::string_view s);
// Pulsar's Codec.decode (java.net.URLDecoder): '+' is a space, then the %XX escapes; nullopt
// for a malformed escape (URLDecoder throws IllegalArgumentException there).
std::optional<std::string> codecDecode(std::string_view s);

}  // namespace magnetar::admin
