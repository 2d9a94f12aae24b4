// HttpServer: the broker's HTTP listener (admin REST, health; later /metrics), Boost.Beast.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "admin/router.h"
#include "admin/upgrade_hook.h"
#include "base/status.h"
#include "net/tls.h"

namespace magnetar::admin {

// HTTP requests refused by the server, each a label value of magnetar_http_bad_requests_total.
enum class HttpBadRequest {
  kMalformed,       // unparsable request line, header or chunk (400, then close)
  kHeaderTooLarge,  // header over 8 KB, Pulsar's httpMaxRequestHeaderSize default (431, close)
  kBodyTooLarge,    // body (or Content-Length) over Options::maxBodyBytes (413, close)
  kTimeout,         // a started request not complete within the request timeout (closed)
  kBadRequest,      // a route answered 400 (invalid JSON, bad parameter, ...)
  kCount
};

// Process-wide counters of refused HTTP requests; bumped on pulsar-web threads.
struct HttpServerStats {
  static inline std::array<std::atomic<uint64_t>, static_cast<size_t>(HttpBadRequest::kCount)>
      counts{};
  static void record(HttpBadRequest e) {
    counts[static_cast<size_t>(e)].fetch_add(1, std::memory_order_relaxed);
  }
  static uint64_t get(HttpBadRequest e) { return counts[static_cast<size_t>(e)].load(); }
  // The metric label value ("malformed", "header_too_large", ...).
  static const char* label(HttpBadRequest e);
};

// Where the header section at the start of `bytes` ends (the offset after its empty line), a
// line ending in LF or CRLF, as Jetty (Pulsar's HTTP server) reads lines and RFC 9112 2.2
// allows; nullopt while no empty line has come.
std::optional<size_t> headerSectionEnd(std::string_view bytes);
// `header` with a CR put before each LF that has none (Boost.Beast's parser wants CRLF).
std::string withCrlfLineEnds(std::string_view header);

// Serves HTTP/1.1 (keep-alive) on its own threads, named `pulsar-web` (numThreads == 1) or
// `pulsar-web-<i>` (`pulsar-web-tls...` for HTTPS). Each request goes to the Router; a handler's
// response may arrive from any thread. Thread: start()/stop() from one owner thread.
class HttpServer {
 public:
  // Defaults: settings.def's (setting_defaults.h) for bindAddress, webServicePort and
  // numHttpServerThreads.
  struct Options {
    std::string bindAddress{setting_defaults::bindAddress};
    uint16_t port = setting_defaults::webServicePort;  // 0 binds a free port; see port()
    int numThreads = setting_defaults::numHttpServerThreads;
    size_t maxBodyBytes = 1 << 20;  // larger request bodies get 413
    // Upgrade requests (`Connection: Upgrade`) it accepts are handed to it with the connection
    // (src/websocket's service); null, or a request it declines, goes to the Router.
    std::shared_ptr<UpgradeHook> upgrade = nullptr;
  };

  // tls: HTTPS with these certificates (webServicePortTls), else plain HTTP. A TLS handshake has
  // net::kTlsHandshakeTimeout; failures count in net::TlsErrorStats.
  HttpServer(std::shared_ptr<const Router> router, Options options,
             std::shared_ptr<net::TlsContext> tls = nullptr);
  ~HttpServer();  // stops
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts the threads. IoError naming address and port if the bind fails.
  Status start();
  // The bound port (the real one when Options::port was 0). Valid after start().
  uint16_t port() const;
  // Closes the listener and all connections, joins the threads. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace magnetar::admin
