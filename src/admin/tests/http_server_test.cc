#include "admin/http_server.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fstream>
#include <thread>

namespace magnetar::admin {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Sends `count` GET requests over one keep-alive connection and returns the responses.
std::vector<http::response<http::string_body>> get(uint16_t port,
                                                   const std::vector<std::string>& targets,
                                                   http::verb verb = http::verb::get,
                                                   std::string body = "") {
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  std::vector<http::response<http::string_body>> out;
  beast::flat_buffer buffer;
  for (const auto& t : targets) {
    http::request<http::string_body> req(verb, t, 11);
    req.set(http::field::host, "localhost");
    req.keep_alive(true);
    req.body() = body;
    req.prepare_payload();
    http::write(stream, req);
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    out.push_back(std::move(res));
  }
  return out;
}

int countThreadsNamed(const std::string& prefix) {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string comm;
    std::getline(in, comm);
    if (comm.rfind(prefix, 0) == 0) ++n;
  }
  closedir(d);
  return n;
}

std::shared_ptr<Router> testRouter() {
  auto r = std::make_shared<Router>();
  r->addSync("GET", "/hello/{name}", [](const HttpRequest& req, const PathParams& p) {
    return HttpResponse::text("hello " + p.at("name") + (req.query.empty() ? "" : "?" + req.query));
  });
  r->add("POST", "/echo", [](const HttpRequest& req, const PathParams&, Respond respond) {
    // Answer from another thread, as a broker-backed handler would.
    std::thread([body = req.body, respond] { respond(HttpResponse::json(body, 201)); }).detach();
  });
  return r;
}

TEST(HttpServer, ServesRoutesOnAFreePortWithKeepAlive) {
  HttpServer server(testRouter(), {"127.0.0.1", 0, 1, 1024});
  ASSERT_TRUE(server.start());
  ASSERT_NE(server.port(), 0);
  EXPECT_EQ(countThreadsNamed("pulsar-web"), 1);

  auto res = get(server.port(), {"/hello/world?x=1", "/nope", "/hello/again"});
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[0].result_int(), 200);
  EXPECT_EQ(res[0].body(), "hello world?x=1");
  EXPECT_EQ(res[0][http::field::content_type], "text/plain");
  EXPECT_EQ(res[1].result_int(), 404);
  EXPECT_EQ(res[1].body(), R"({"reason":"Not found: /nope"})");
  EXPECT_EQ(res[2].body(), "hello again");

  auto echo = get(server.port(), {"/echo"}, http::verb::post, R"({"a":1})");
  EXPECT_EQ(echo[0].result_int(), 201);
  EXPECT_EQ(echo[0].body(), R"({"a":1})");

  auto tooBig = get(server.port(), {"/echo"}, http::verb::post, std::string(4096, 'x'));
  EXPECT_EQ(tooBig[0].result_int(), 413);

  server.stop();
  // A joined thread can linger in /proc/self/task for a moment while the kernel reaps it.
  for (int i = 0; i < 100 && countThreadsNamed("pulsar-web") != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(countThreadsNamed("pulsar-web"), 0);
  server.stop();  // idempotent
}

TEST(HttpServer, SeveralThreadsAndBindErrors) {
  HttpServer a(testRouter(), {"127.0.0.1", 0, 3, 1024});
  ASSERT_TRUE(a.start());
  EXPECT_EQ(countThreadsNamed("pulsar-web-"), 3);
  EXPECT_EQ(get(a.port(), {"/hello/x"})[0].body(), "hello x");

  HttpServer b(testRouter(), {"127.0.0.1", a.port(), 1, 1024});
  Status s = b.start();
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find(std::to_string(a.port())), std::string::npos) << s.message();

  HttpServer c(testRouter(), {"not-an-address", 0, 1, 1024});
  EXPECT_FALSE(c.start().isOk());
}

TEST(HttpServer, PassesTheHostHeaderAndSendsExtraHeaders) {
  auto r = std::make_shared<Router>();
  r->addSync("GET", "/host", [](const HttpRequest& req, const PathParams&) {
    HttpResponse resp{200, "application/octet-stream", "raw", {}};
    resp.headers.emplace_back("X-Pulsar-Message-ID", "1:2");
    resp.headers.emplace_back("X-Seen-Host", req.host);
    return resp;
  });
  r->addSync("DELETE", "/gone",
             [](const HttpRequest&, const PathParams&) { return HttpResponse{204, "", "", {}}; });
  HttpServer server(r, {"127.0.0.1", 0, 1, 1024});
  ASSERT_TRUE(server.start());
  auto res = get(server.port(), {"/host"});
  EXPECT_EQ(res[0]["X-Pulsar-Message-ID"], "1:2");
  EXPECT_EQ(res[0]["X-Seen-Host"], "localhost");
  EXPECT_EQ(res[0][http::field::content_type], "application/octet-stream");
  auto gone = get(server.port(), {"/gone"}, http::verb::delete_);
  EXPECT_EQ(gone[0].result_int(), 204);
  EXPECT_EQ(gone[0].body(), "");
  EXPECT_EQ(gone[0].count(http::field::content_type), 0u);
}

// Sends `raw` on a new connection, reads until the server closes; the bytes received.
std::string exchangeRaw(uint16_t port, const std::string& raw) {
  asio::io_context ioc;
  tcp::socket sock(ioc);
  sock.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  asio::write(sock, asio::buffer(raw));
  std::string out;
  beast::error_code ec;
  char buf[4096];
  while (!ec) out.append(buf, sock.read_some(asio::buffer(buf), ec));
  return out;
}

size_t countOf(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t i = s.find(part); i != std::string::npos; i = s.find(part, i + 1)) ++n;
  return n;
}

TEST(HttpServer, HeaderSectionEndsWithAnEmptyLineOfLfOrCrlf) {
  EXPECT_EQ(headerSectionEnd("GET / HTTP/1.1\r\nHost: x\r\n\r\nbody"), 27u);
  EXPECT_EQ(headerSectionEnd("GET / HTTP/1.1\nHost: x\n\nbody"), 24u);
  EXPECT_EQ(headerSectionEnd("GET / HTTP/1.1\r\nHost: x\r\n\nbody"), 26u);
  EXPECT_EQ(headerSectionEnd("GET / HTTP/1.1\nHost: x\n\r\nbody"), 25u);
  EXPECT_EQ(headerSectionEnd("GET / HTTP/1.1\r\nHost: x\r\n"), std::nullopt);
  EXPECT_EQ(headerSectionEnd("GET / HTTP/1.1\r\nHost: x\r\n\r"), std::nullopt);
  EXPECT_EQ(withCrlfLineEnds("a\nb\r\nc\r\r\n\n"), "a\r\nb\r\nc\r\r\n\r\n");
}

// Jetty (Pulsar's HTTP server) takes a bare LF as a line end in the request line and header
// (tests/differential/test_http_line_ends.py); a bare CR stays a 400 on both.
TEST(HttpServer, BareLfLineEndsAreAccepted) {
  HttpServer server(testRouter(), {"127.0.0.1", 0, 1, 1024});
  ASSERT_TRUE(server.start());
  std::string got = exchangeRaw(server.port(),
                                "GET /hello/lf HTTP/1.1\nHost: x\n\n"
                                "POST /echo HTTP/1.1\nHost: x\nContent-Length: 5\r\n\nab\ncd"
                                "GET /hello/crlf HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\n");
  EXPECT_EQ(countOf(got, "HTTP/1.1 200 OK\r\n"), 2u) << got;
  EXPECT_EQ(countOf(got, "HTTP/1.1 201 Created\r\n"), 1u) << got;
  EXPECT_NE(got.find("hello lf"), std::string::npos);
  EXPECT_NE(got.find("ab\ncd"), std::string::npos);  // the body is not touched
  EXPECT_NE(got.find("hello crlf"), std::string::npos);
  got = exchangeRaw(server.port(), "GET /hello/cr HTTP/1.1\rHost: x\r\n\r\n");
  EXPECT_EQ(got.rfind("HTTP/1.1 400 ", 0), 0u) << got;
  // An obsolete line folding is refused (Jetty), with CRLF or LF.
  for (const char* fold : {"\r\n ", "\r\n\t", "\n "}) {
    got = exchangeRaw(server.port(), std::string("GET /hello/fold HTTP/1.1\r\nHost: x\r\nX-A: a") +
                                         fold + "b\r\n\r\n");
    EXPECT_EQ(got.rfind("HTTP/1.1 400 ", 0), 0u) << got;
  }
  server.stop();
}

}  // namespace
}  // namespace magnetar::admin
