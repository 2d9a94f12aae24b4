#include "http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/system/system_error.hpp>
#include <cctype>
#include <chrono>

namespace magnetar::admintool {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

HttpClient::HttpClient(const std::string& baseUrl) {
  std::string url = baseUrl;
  while (!url.empty() && url.back() == '/') url.pop_back();
  base_ = url;
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return;
  std::string hostPort = url.substr(scheme.size());
  if (hostPort.find('/') != std::string::npos) hostPort.resize(hostPort.find('/'));
  size_t colon = hostPort.rfind(':');
  size_t bracket = hostPort.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    host_ = hostPort.substr(0, colon);
    port_ = hostPort.substr(colon + 1);
  } else {
    host_ = hostPort;
    port_ = "80";
  }
  if (host_.size() > 2 && host_.front() == '[' && host_.back() == ']') {
    host_ = host_.substr(1, host_.size() - 2);
  }
}

HttpResult HttpClient::request(const std::string& method, const std::string& target,
                               const std::string& body, const std::string& contentType) {
  HttpResult out;
  std::string step = "cannot resolve " + host_;  // what failed, for the error
  try {
    asio::io_context ioc;
    asio::ip::tcp::resolver resolver(ioc);
    beast::tcp_stream stream(ioc);
    stream.expires_after(std::chrono::seconds(30));
    auto endpoints = resolver.resolve(host_, port_);
    step = "cannot connect to " + base_;
    stream.connect(endpoints);
    step = "no answer from " + base_;
    http::request<http::string_body> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, base_.substr(base_.find("//") + 2));
    req.set(http::field::user_agent, "magnetar-admin");
    req.set(http::field::accept, "application/json");
    if (!body.empty()) {
      req.set(http::field::content_type, contentType);
      req.body() = body;
    }
    req.prepare_payload();
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(256 << 20);
    http::read(stream, buffer, parser);
    auto& res = parser.get();
    out.status = static_cast<int>(res.result_int());
    out.contentType = std::string(res[http::field::content_type]);
    for (const auto& f : res) {
      out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    out.body = std::move(res.body());
    out.ok = true;
    beast::error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  } catch (const boost::system::system_error& e) {
    // The message alone: what() also names Boost's source file and function.
    out.error = step + ": " + e.code().message();
  } catch (const std::exception& e) {
    out.error = step + ": " + e.what();
  }
  return out;
}

std::string encodeSegment(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace magnetar::admintool
