// A blocking HTTP/1.1 client for magnetar-admin (Boost.Beast): one request per call.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace magnetar::admintool {

struct HttpResult {
  bool ok = false;  // false: could not connect/send/receive (error holds why)
  // e.g. "cannot connect to http://127.0.0.1:8080: Connection refused" (the step, the system's
  // message); steps: "cannot resolve HOST", "cannot connect to URL", "no answer from URL".
  std::string error;
  int status = 0;
  std::string contentType;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// Thread: one caller.
class HttpClient {
 public:
  // baseUrl: "http://host:port" (a trailing '/' is ignored). valid() is false for other schemes.
  explicit HttpClient(const std::string& baseUrl);
  bool valid() const { return !host_.empty(); }
  const std::string& baseUrl() const { return base_; }

  // Sends method target (e.g. "/admin/v2/clusters") with an optional body; 30 s timeout.
  HttpResult request(const std::string& method, const std::string& target,
                     const std::string& body = "",
                     const std::string& contentType = "application/json");

 private:
  std::string base_;
  std::string host_;
  std::string port_;
};

// Percent-encodes one path segment (RFC 3986 unreserved characters stay).
std::string encodeSegment(const std::string& s);

}  // namespace magnetar::admintool
