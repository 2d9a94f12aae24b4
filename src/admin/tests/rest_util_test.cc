#include "admin/rest_util.h"

#include <gtest/gtest.h>

#include <thread>

#include "admin/remote_partition.h"

namespace magnetar::admin {
namespace {

// Cluster mode's fan-out: a partitioned topic's route as the partition's own route.
TEST(RestUtil, PartitionPath) {
  EXPECT_EQ(partitionPath("/admin/v2/persistent/t/ns/x/subscription/s/skip_all", 3),
            "/admin/v2/persistent/t/ns/x-partition-3/subscription/s/skip_all");
  EXPECT_EQ(partitionPath("/admin/v2/persistent/t/ns/x/partitioned-stats", 0),
            "/admin/v2/persistent/t/ns/x-partition-0/stats");
  EXPECT_EQ(partitionPath("/admin/v2/non-persistent/t/ns/a%20b/partitioned-internalStats", 1),
            "/admin/v2/non-persistent/t/ns/a%20b-partition-1/internalStats");
  EXPECT_EQ(partitionPath("/admin/v2/persistent/t/ns/x/partitions", 2),
            "/admin/v2/persistent/t/ns/x-partition-2");
  EXPECT_EQ(partitionPath("/admin/v2/persistent/t/ns/x", 2),
            "/admin/v2/persistent/t/ns/x-partition-2");
  EXPECT_EQ(partitionPath("/admin/v2/persistent/t/ns", 2), "");
}

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
  bad.contentType = "application/json";
  bad.body = "{nope";
  HttpResponse err;
  EXPECT_FALSE(parseJsonBody(bad, &err));
  EXPECT_EQ(err.status, 400);
  bad.body = "[1, 2]";
  EXPECT_TRUE(parseJsonBody(bad, &err)->is_array());
  bad.body = R"({"limitTime": 4294967306})";
  EXPECT_FALSE(parseJsonBody(bad, &err));
  EXPECT_EQ(err.status, 400);
  EXPECT_EQ(err.body, "Numeric value (4294967306) out of range of int (-2147483648 - 2147483647)");
  bad.body = R"({"retentionTimeInMinutes" :3e9})";
  EXPECT_FALSE(parseJsonBody(bad, &err));
  EXPECT_EQ(err.body, "Numeric value (3e9) out of range of int (-2147483648 - 2147483647)");
}

TEST(RestUtil, JsonBodiesNeedTheJsonMediaType) {
  EXPECT_TRUE(isJsonMediaType("application/json"));
  EXPECT_TRUE(isJsonMediaType("Application/JSON; charset=utf-8"));
  EXPECT_TRUE(isJsonMediaType(" application/json "));
  EXPECT_FALSE(isJsonMediaType("text/json"));
  EXPECT_FALSE(isJsonMediaType("application/json-patch+json"));
  EXPECT_FALSE(isJsonMediaType("*/*"));
  EXPECT_FALSE(isJsonMediaType(""));
  EXPECT_TRUE(isJsonMediaType("TEXT/JSON", true));
  EXPECT_TRUE(isJsonMediaType("application/vnd.foo+json; q=1", true));
  EXPECT_TRUE(isJsonMediaType("application/x-json", true));
  EXPECT_FALSE(isJsonMediaType("application/JSON+Json", true));
  EXPECT_FALSE(isJsonMediaType("text/plain", true));
  EXPECT_FALSE(isJsonMediaType("*/*", true));
  HttpRequest req;
  req.body = "[1]";
  HttpResponse err;
  for (const char* type : {"", "text/plain", "application/x-www-form-urlencoded"}) {
    req.contentType = type;
    EXPECT_FALSE(parseJsonBody(req, &err)) << type;
    EXPECT_EQ(err.status, 415) << type;
  }
  req.contentType = "application/json;charset=UTF-8";
  EXPECT_TRUE(parseJsonBody(req, &err));
  req.contentType = "text/json";
  EXPECT_FALSE(parseJsonBody(req, &err));
  req.path = "/admin/v2/persistent/public/default/t/retention";
  EXPECT_TRUE(parseJsonBody(req, &err));
}

TEST(RestUtil, JavaValuesAsJacksonReadsThem) {
  namespace json = boost::json;
  EXPECT_EQ(javaInteger(json::parse("30"), true), 30);
  EXPECT_EQ(javaInteger(json::parse("\"30\""), true), 30);
  EXPECT_EQ(javaInteger(json::parse("\" -40 \""), true), -40);
  EXPECT_EQ(javaInteger(json::parse("\"+41\""), true), 41);
  EXPECT_EQ(javaInteger(json::parse("\"\""), true), 0);
  EXPECT_EQ(javaInteger(json::parse("2.9"), true), 2);
  EXPECT_EQ(javaInteger(json::parse("1e3"), false), 1000);
  EXPECT_EQ(javaInteger(json::parse("\"-2147483648\""), true), INT32_MIN);
  EXPECT_FALSE(javaInteger(json::parse("\"2147483648\""), true));
  EXPECT_EQ(javaInteger(json::parse("\"2147483648\""), false), 2147483648LL);
  EXPECT_EQ(javaInteger(json::parse("\"-9223372036854775808\""), false), INT64_MIN);
  EXPECT_FALSE(javaInteger(json::parse("\"9223372036854775808\""), false));
  // 2^63 as a float is (double)Long.MAX_VALUE: Java's (long) cast gives Long.MAX_VALUE.
  EXPECT_EQ(javaInteger(json::parse("9.223372036854775807e18"), false), INT64_MAX);
  EXPECT_EQ(javaInteger(json::parse("-9.223372036854775808e18"), false), INT64_MIN);
  EXPECT_FALSE(javaInteger(json::parse("1e19"), false));
  for (const char* bad :
       {"\"1e2\"", "\"2.5\"", "\"x\"", "true", "null", "{}", "[]", "99999999999", "1e300"}) {
    EXPECT_FALSE(javaInteger(json::parse(bad), true)) << bad;
  }
  EXPECT_EQ(javaBoolean(json::parse("true")), true);
  EXPECT_EQ(javaBoolean(json::parse("\"True\"")), true);
  EXPECT_EQ(javaBoolean(json::parse("\" TRUE\"")), true);
  EXPECT_EQ(javaBoolean(json::parse("\"false\"")), false);
  EXPECT_EQ(javaBoolean(json::parse("\"\"")), false);
  EXPECT_EQ(javaBoolean(json::parse("0")), false);
  EXPECT_EQ(javaBoolean(json::parse("2")), true);
  for (const char* bad : {"1.0", "\"yes\"", "\"tRue\"", "null", "{}"}) {
    EXPECT_FALSE(javaBoolean(json::parse(bad))) << bad;
  }
  EXPECT_EQ(javaString(json::parse("1")), "1");
  EXPECT_EQ(javaString(json::parse("1.5")), "1.5");
  EXPECT_EQ(javaString(json::parse("false")), "false");
  EXPECT_FALSE(javaString(json::parse("{}")));
  auto m = javaStringMap(json::parse(R"({"a":1,"b":"x","c":true})"));
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, (std::map<std::string, std::string>{{"a", "1"}, {"b", "x"}, {"c", "true"}}));
  EXPECT_FALSE(javaStringMap(json::parse(R"({"a":{"b":1}})")));
  EXPECT_FALSE(javaStringMap(json::parse("[]")));
  EXPECT_EQ(jacksonError("int", json::parse("true")).status, 400);
}

TEST(RestUtil, RetentionPolicyChecksAsPulsar) {
  EXPECT_EQ(retentionPolicyError(0, 0), "");
  EXPECT_EQ(retentionPolicyError(-1, -1), "");
  EXPECT_EQ(retentionPolicyError(5, -1), "");
  EXPECT_EQ(retentionPolicyError(-2, 5), "Invalid retention policy: time limit must be >= -1");
  EXPECT_EQ(retentionPolicyError(5, -2), "Invalid retention policy: size limit must be >= -1");
  EXPECT_NE(retentionPolicyError(5, 0).find("Setting a single time or size limit to 0"),
            std::string::npos);
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
