// HttpClient: one asynchronous HTTP/1.1 request from a broker to another broker's admin REST API
// (cluster mode's fan-out of a partitioned topic's admin call to each partition's owner, as
// Pulsar's broker does through its PulsarAdmin client). Plain http:// only; a 307/302/301
// answer is followed (the Location header) up to `maxRedirects` times, as PulsarAdmin's client
// follows Pulsar's ownership redirects.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/status.h"
#include "net/event_loop.h"

namespace magnetar::admin {

struct HttpClientRequest {
  std::string method = "GET";
  std::string url;  // http://host:port/path?query
  std::string body;
  std::string contentType;                   // sent when body is not empty
  std::optional<std::string> authorization;  // the Authorization header, when set
  int maxRedirects = 5;
  int timeoutMs = 30000;  // for the whole exchange, redirects included
};

struct HttpClientResponse {
  int status = 0;
  std::string body;
  std::string url;  // the URL that answered (after redirects)
};

// Runs the request on `loop` (its io_context does the I/O; nothing blocks) and calls done once,
// on `loop`, with the final answer (any status), or kInvalidArgument (a URL that is not
// http://host:port/..., a redirect without Location), kTimeout (timeoutMs passed), kIoError
// (resolve, connect, read or write failed; too many redirects). Thread: any.
void httpCall(net::EventLoop& loop, HttpClientRequest request,
              std::function<void(Result<HttpClientResponse>)> done);

// Splits "http://host:port/path?q" into host, port ("80" when absent) and target ("/path?q",
// "/" when empty). nullopt for another scheme or no host.
struct ParsedUrl {
  std::string host;
  std::string port;
  std::string target;
};
std::optional<ParsedUrl> parseHttpUrl(const std::string& url);

}  // namespace magnetar::admin
