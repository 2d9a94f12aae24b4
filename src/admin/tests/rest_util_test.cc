#include "admin/rest_util.h"

#include <gtest/gtest.h>

#include <thread>

namespace magnetar::admin {
namespace {

TEST(RestUtil, QueryParameters) {
  HttpRequest r;
  r.query = "force=true&name=a%20b&empty&x=1";
  EXPECT_EQ(queryParam(r, "name"), "a b");
  EXPECT_EQ(queryParam(r, "empty"), "");
  EXPECT_EQ(queryParam(r, "missing"), std::nullopt);
  EXPECT_TRUE(queryFlag(r, "force"));
  EXPECT_FALSE(queryFlag(r, "x2"));
  r.query = "force=false";
  EXPECT_FALSE(queryFlag(r, "force"));
}

TEST(RestUtil, HostHeader) {
  auto a = parseHostHeader("127.0.0.1:8080");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 8080);
  auto b = parseHostHeader("[::1]:9");
  EXPECT_EQ(b.host, "[::1]");
  EXPECT_EQ(b.port, 9);
  auto c = parseHostHeader("example.org");
  EXPECT_EQ(c.host, "example.org");
  EXPECT_EQ(c.port, -1);
  EXPECT_EQ(parseHostHeader("[::1]").port, -1);
}

TEST(RestUtil, StatusCodesAsPulsar) {
  EXPECT_EQ(errorResponse(Status::notFound("x")).status, 404);
  EXPECT_EQ(errorResponse(Status::alreadyExists("x")).status, 409);
  EXPECT_EQ(errorResponse(Status::busy("x")).status, 412);
  EXPECT_EQ(errorResponse(Status::invalidArgument("x")).status, 412);
  EXPECT_EQ(errorResponse(Status::ioError("x")).status, 500);
  EXPECT_EQ(errorResponse(Status::notFound("gone")).body, R"({"reason":"gone"})");
  EXPECT_EQ(noContent().status, 204);
  EXPECT_TRUE(noContent().body.empty());

  HttpRequest bad;
  bad.body = "{nope";
  HttpResponse err;
  EXPECT_FALSE(parseJsonBody(bad, &err));
  EXPECT_EQ(err.status, 400);
  bad.body = "[1, 2]";
  EXPECT_TRUE(parseJsonBody(bad, &err)->is_array());
}

TEST(RestUtil, GatherCollectsInOrderFromAnyThread) {
  std::vector<int> got;
  int calls = 0;
  auto g = Gather<int>::create(3, [&](std::vector<int> v) {
    got = std::move(v);
    ++calls;
  });
  std::thread t([g] { g->set(2, 30); });
  t.join();
  g->set(0, 10);
  EXPECT_EQ(calls, 0);
  g->set(1, 20);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(got, (std::vector<int>{10, 20, 30}));
  int empty = 0;
  Gather<int>::create(0, [&](std::vector<int> v) { empty = 1 + static_cast<int>(v.size()); });
  EXPECT_EQ(empty, 1);
}

}  // namespace
}  // namespace magnetar::admin
