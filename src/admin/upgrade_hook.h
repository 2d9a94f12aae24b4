// UpgradeHook: how another module (src/websocket) takes over an HTTP connection whose request
// asks for a protocol upgrade, on the web service ports, without src/admin depending on it.
#pragma once

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <string_view>

#include "admin/router.h"

namespace magnetar::admin {

// Implemented above src/admin and given to HttpServer::Options::upgrade. Thread: accepts() and
// the take*() calls run on the connection's pulsar-web strand; the hook owns the stream after.
class UpgradeHook {
 public:
  using PlainStream = boost::beast::tcp_stream;
  using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  virtual ~UpgradeHook() = default;
  // Whether the hook serves this upgrade request (e.g. a path under /ws/); false leaves it to
  // the Router.
  virtual bool accepts(const HttpRequest& request) const = 0;
  // The connection from now on, timers cleared; `request` as Beast parsed it (the handshake
  // answers it), `parsed` its fields as the Router sees them (path, query, Authorization, TLS
  // client certificate CN).
  virtual void takePlain(PlainStream stream, Request request, HttpRequest parsed) = 0;
  virtual void takeTls(TlsStream stream, Request request, HttpRequest parsed) = 0;
};

}  // namespace magnetar::admin
