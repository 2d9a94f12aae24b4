// fuzz_http: raw HTTP request bytes -> the admin HTTP server (src/admin/http_server.cc: Beast's
// parser, the session, keep-alive), the Router, and every admin route of a real BrokerAdmin over
// a fresh in-memory BrokerService, plus the health and configuration routes the app registers.
//
// Per input: the bytes go to the server over a loopback TCP connection, the client half-closes,
// and everything the server answers is read until it closes. Invariants: the server closes the
// connection within 10 s (no handler forgets to answer), the answer is a sequence of well-formed
// HTTP responses, and no route answers 500 (a 500 means a handler threw or hit an internal error
// on client input), except the client-input 500s Pulsar itself answers (kPulsarClientInput500).
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "admin/broker_admin.h"
#include "admin/broker_routes.h"
#include "admin/http_server.h"
#include "broker/service/broker_service.h"
#include "fuzz_util.h"
#include "storage/memory_managed_ledger.h"

using namespace magnetar;
namespace http = boost::beast::http;

namespace {

int connectTo(uint16_t port) {
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (c < 0 || ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fuzz::fail("connect");
  return c;
}

// Writes the request bytes while reading the answers (a server blocked on a full socket buffer
// must not deadlock the test), half-closes, reads until the server closes.
std::string exchange(int fd, const uint8_t* p, size_t n) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool shut = false;
  for (;;) {
    if (!shut && n == 0) {
      ::shutdown(fd, SHUT_WR);
      shut = true;
    }
    pollfd pfd{fd, static_cast<short>(POLLIN | (shut ? 0 : POLLOUT)), 0};
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    if (left <= 0) fuzz::fail("the HTTP server did not close the connection within 10 s");
    if (::poll(&pfd, 1, left) <= 0) continue;
    if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[16384];
      ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (r == 0) return out;
      if (r < 0 && errno != EAGAIN && errno != EINTR) return out;  // reset: closed too
      if (r > 0) out.append(buf, static_cast<size_t>(r));
    }
    if (!shut && (pfd.revents & POLLOUT)) {
      ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        p += w;
        n -= static_cast<size_t>(w);
      } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
        n = 0;  // the server closed its side: stop sending
      }
    }
  }
}

// Reasons of the 500s Pulsar answers for bad client input, which Magnetar matches on purpose
// (tests/differential/test_http_lookup.py checks them on both): TopicDomain.getEnum's
// and TopicName.get's IllegalArgumentException in TopicLookup, Long.decode's NumberFormatException
// on a bundle boundary, PulsarServerException for an unknown listenerName.
constexpr const char* kPulsarClientInput500[] = {
    "{\"reason\":\"Invalid topic domain: ",
    "{\"reason\":\"Invalid topic name: ",
    "{\"reason\":\"For input string: ",
    "{\"reason\":\"the broker do not have ",
};

bool isPulsarClientInput500(const std::string& body) {
  for (const char* prefix : kPulsarClientInput500) {
    if (body.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// Parses the server's output as consecutive HTTP responses.
void checkResponses(const std::string& out) {
  boost::beast::flat_buffer buf;
  size_t off = 0;
  while (off < out.size()) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    parser.eager(true);
    boost::beast::error_code ec;
    size_t used = parser.put(boost::asio::buffer(out.data() + off, out.size() - off), ec);
    if (ec) fuzz::fail("the server sent a malformed HTTP response: " + ec.message());
    if (!parser.is_done()) fuzz::fail("the server sent a truncated HTTP response");
    off += used;
    int status = parser.get().result_int();
    if (getenv("MAGNETAR_FUZZ_VERBOSE")) {
      fprintf(stderr, "<- %d %s\n", status, parser.get().body().substr(0, 200).c_str());
    }
    fuzz::check(status >= 100 && status < 600, "bad status");
    if (status == 500 && !isPulsarClientInput500(parser.get().body()))
      fuzz::fail("a route answered 500: " + parser.get().body());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::quietLogs();
  broker::BrokerOptions o;
  o.bindAddress = "127.0.0.1";
  o.brokerServicePort = 0;
  o.numIOThreads = 1;
  o.managedLedgerNumWorkerThreads = 1;
  o.keepAliveIntervalSeconds = 0;
  broker::BrokerService service(o, std::make_shared<storage::MemoryManagedLedgerFactory>());
  if (!service.start().isOk()) fuzz::fail("broker start");
  auto config = std::make_shared<config::ServiceConfiguration>(4);
  {
    auto router = std::make_shared<admin::Router>();
    admin::addHealthRoute(*router, [] { return true; });
    admin::addBrokerConfigurationRoutes(*router, config);
    admin::BrokerAdmin brokerAdmin(service, config);
    brokerAdmin.addRoutes(*router);
    admin::HttpServer web(router, {"127.0.0.1", 0, 1, 64 << 10});
    if (!web.start().isOk()) fuzz::fail("http start");
    int fd = connectTo(web.port());
    std::string out = exchange(fd, data, size);
    ::close(fd);
    web.stop();
    checkResponses(out);
  }
  service.stop();
  return 0;
}
