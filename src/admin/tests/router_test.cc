#include "admin/router.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "admin/broker_routes.h"

namespace magnetar::admin {
namespace {

HttpResponse call(const Router& r, const std::string& method, const std::string& path) {
  HttpRequest req;
  req.method = method;
  req.target = path;
  req.path = path.substr(0, path.find('?'));
  HttpResponse out;
  int calls = 0;
  r.dispatch(req, [&](HttpResponse resp) {
    out = std::move(resp);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  return out;
}

std::string reasonOf(const HttpResponse& r) {
  return std::string(boost::json::parse(r.body).as_object().at("reason").as_string());
}

TEST(Router, LiteralSegmentBeatsParameterWhateverTheOrder) {
  Router r;
  r.addSync("GET", "/admin/v2/brokers/{cluster}", [](const HttpRequest&, const PathParams& p) {
    return HttpResponse::text(p.at("cluster"));
  });
  r.addSync("GET", "/admin/v2/brokers/leaderBroker",
            [](const HttpRequest&, const PathParams&) { return HttpResponse::text("leader"); });
  r.addSync("GET", "/admin/v2/x/{a}/lit", [](const HttpRequest&, const PathParams&) {
    return HttpResponse::text("param-first");
  });
  r.addSync("GET", "/admin/v2/x/lit/{b}", [](const HttpRequest&, const PathParams&) {
    return HttpResponse::text("literal-first");
  });
  EXPECT_EQ(call(r, "GET", "/admin/v2/brokers/leaderBroker").body, "leader");
  EXPECT_EQ(call(r, "GET", "/admin/v2/brokers/standalone").body, "standalone");
  EXPECT_EQ(call(r, "GET", "/admin/v2/x/lit/lit").body, "literal-first");
  EXPECT_EQ(call(r, "GET", "/admin/v2/x/other/lit").body, "param-first");
}

TEST(Router, MatchesLiteralsAndCapturesParams) {
  Router r;
  r.addSync(
      "GET", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/stats",
      [](const HttpRequest&, const PathParams& p) {
        return HttpResponse::text(p.at("tenant") + "|" + p.at("namespace") + "|" + p.at("topic"));
      });
  r.addSync("GET", "/admin/v2/brokers/health",
            [](const HttpRequest&, const PathParams&) { return HttpResponse::text("ok"); });

  auto stats = call(r, "GET", "/admin/v2/persistent/public/default/my%2Dtopic/stats");
  EXPECT_EQ(stats.status, 200);
  EXPECT_EQ(stats.body, "public|default|my-topic");
  EXPECT_EQ(call(r, "GET", "/admin/v2/brokers/health/").body, "ok");
  EXPECT_EQ(call(r, "GET", "/admin/v2/brokers/health?x=1").body, "ok");
}

TEST(Router, NotFoundAndMethodNotAllowedUsePulsarErrorShape) {
  Router r;
  r.addSync("GET", "/a/b",
            [](const HttpRequest&, const PathParams&) { return HttpResponse::text("x"); });
  auto missing = call(r, "GET", "/a/c");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.contentType, "application/json");
  EXPECT_EQ(reasonOf(missing), "Not found: /a/c");
  EXPECT_EQ(call(r, "GET", "/a/b/c").status, 404);

  auto wrongMethod = call(r, "DELETE", "/a/b");
  EXPECT_EQ(wrongMethod.status, 405);
  EXPECT_NE(reasonOf(wrongMethod).find("DELETE"), std::string::npos);
}

TEST(Router, FirstMatchWinsAndThrowingHandlerGives500) {
  Router r;
  r.addSync("GET", "/x/fixed",
            [](const HttpRequest&, const PathParams&) { return HttpResponse::text("fixed"); });
  r.addSync("GET", "/x/{any}", [](const HttpRequest&, const PathParams&) -> HttpResponse {
    throw std::runtime_error("boom");
  });
  EXPECT_EQ(call(r, "GET", "/x/fixed").body, "fixed");
  auto failed = call(r, "GET", "/x/other");
  EXPECT_EQ(failed.status, 500);
  EXPECT_NE(reasonOf(failed).find("boom"), std::string::npos);
}

TEST(Router, AsyncHandlerMayRespondLater) {
  Router r;
  Respond saved;
  r.add("GET", "/later", [&](const HttpRequest&, const PathParams&, Respond respond) {
    saved = std::move(respond);
  });
  HttpRequest req{"GET", "/later", "/later", "", "", ""};
  std::optional<HttpResponse> got;
  r.dispatch(req, [&](HttpResponse resp) { got = std::move(resp); });
  EXPECT_FALSE(got.has_value());
  saved(HttpResponse::text("done"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->body, "done");
}

TEST(PercentDecode, DecodesAndKeepsMalformedInput) {
  EXPECT_EQ(percentDecode("a%20b%2Fc"), "a b/c");
  EXPECT_EQ(percentDecode("bad%2"), "bad%2");
  EXPECT_EQ(percentDecode("bad%zz"), "bad%zz");
  EXPECT_EQ(percentDecode("x%2f%7E"), "x/~");
  EXPECT_EQ(percentDecode("%2f%+1"), "%2f%+1");  // no sign taken as a hex digit
  EXPECT_EQ(percentDecode("%-1"), "%-1");
}

TEST(CodecDecode, DecodesPlusAsSpaceAndRefusesMalformedInput) {
  EXPECT_EQ(codecDecode("my+topic"), "my topic");
  EXPECT_EQ(codecDecode("x%2By"), "x+y");
  EXPECT_EQ(codecDecode("a%2Fb"), "a/b");
  EXPECT_EQ(codecDecode("plain"), "plain");
  EXPECT_EQ(codecDecode("bad%zz"), std::nullopt);
  EXPECT_EQ(codecDecode("bad%2"), std::nullopt);
}

// {topic} as Pulsar's resources read it: the raw segment decoded once (PersistentTopics,
// TopicLookup), the path-decoded one decoded once more (SchemasResource).
TEST(Router, TopicParamIsDecodedAsPulsarResourcesDo) {
  Router r;
  auto echo = [](const HttpRequest&, const PathParams& p) {
    return HttpResponse::text(p.at("tenant") + "|" + p.at("topic"));
  };
  r.addSync("GET", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/stats", echo);
  r.addSync("GET", "/admin/v2/schemas/{tenant}/{namespace}/{topic}/schema", echo);
  EXPECT_EQ(call(r, "GET", "/admin/v2/persistent/a+b/ns/my+topic/stats").body, "a+b|my topic");
  EXPECT_EQ(call(r, "GET", "/admin/v2/persistent/t/ns/x%2By/stats").body, "t|x+y");
  EXPECT_EQ(call(r, "GET", "/admin/v2/persistent/t/ns/x%252By/stats").body, "t|x%2By");
  EXPECT_EQ(call(r, "GET", "/admin/v2/persistent/t/ns/bad%zz/stats").body, "t|bad%zz");
  EXPECT_EQ(call(r, "GET", "/admin/v2/schemas/t/ns/my+topic/schema").body, "t|my topic");
  EXPECT_EQ(call(r, "GET", "/admin/v2/schemas/t/ns/x%2By/schema").body, "t|x y");
  EXPECT_EQ(call(r, "GET", "/admin/v2/schemas/t/ns/x%252By/schema").body, "t|x+y");
}

TEST(BrokerRoutes, RuntimeConfigurationAndDynamicNames) {
  auto cfg = std::make_shared<config::ServiceConfiguration>(16);
  ASSERT_TRUE(cfg->set("clusterName", "c1", ""));
  Router r;
  addBrokerConfigurationRoutes(r, cfg);
  bool ready = false;
  addHealthRoute(r, [&] { return ready; });

  auto runtime = call(r, "GET", "/admin/v2/brokers/configuration/runtime");
  ASSERT_EQ(runtime.status, 200);
  auto obj = boost::json::parse(runtime.body).as_object();
  EXPECT_EQ(obj.size(), config::allSettings().size());
  EXPECT_EQ(obj.at("numIOThreads").as_string(), "8");
  EXPECT_EQ(obj.at("clusterName").as_string(), "c1");
  EXPECT_EQ(obj.at("brokerServicePort").as_string(), "6650");

  auto names =
      boost::json::parse(call(r, "GET", "/admin/v2/brokers/configuration").body).as_array();
  EXPECT_EQ(names.size(), config::ServiceConfiguration::dynamicKeys().size());

  EXPECT_EQ(call(r, "GET", "/admin/v2/brokers/health").status, 503);
  ready = true;
  auto health = call(r, "GET", "/admin/v2/brokers/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok");
  EXPECT_EQ(health.contentType, "text/plain");
}

}  // namespace
}  // namespace magnetar::admin
