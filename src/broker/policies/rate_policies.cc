#include "broker/policies/rate_policies.h"

#include <boost/json.hpp>

namespace magnetar::broker {
namespace {

namespace json = boost::json;

std::optional<json::object> objectOf(const std::string& text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.as_object());
}

template <typename T>
void readNumber(const json::object& o, const char* field, T* out) {
  const json::value* v = o.if_contains(field);
  if (!v || !v->is_number()) return;
  boost::system::error_code ec;
  T n = v->to_number<T>(ec);
  if (!ec) *out = n;
}

}  // namespace

std::optional<PublishRate> parsePublishRate(const std::string& text) {
  auto o = objectOf(text);
  if (!o) return std::nullopt;
  PublishRate r;
  readNumber(*o, "publishThrottlingRateInMsg", &r.msgs);
  readNumber(*o, "publishThrottlingRateInByte", &r.bytes);
  return r;
}

std::optional<ResourceGroupQuota> parseResourceGroupQuota(const std::string& text) {
  auto o = objectOf(text);
  if (!o) return std::nullopt;
  ResourceGroupQuota q;
  readNumber(*o, "publishRateInMsgs", &q.publishRateInMsgs);
  readNumber(*o, "publishRateInBytes", &q.publishRateInBytes);
  readNumber(*o, "dispatchRateInMsgs", &q.dispatchRateInMsgs);
  readNumber(*o, "dispatchRateInBytes", &q.dispatchRateInBytes);
  return q;
}

std::optional<DispatchRate> parseDispatchRate(const std::string& text) {
  auto o = objectOf(text);
  if (!o) return std::nullopt;
  DispatchRate r;
  readNumber(*o, "dispatchThrottlingRateInMsg", &r.msgs);
  readNumber(*o, "dispatchThrottlingRateInByte", &r.bytes);
  readNumber(*o, "ratePeriodInSecond", &r.ratePeriodInSecond);
  if (const json::value* v = o->if_contains("relativeToPublishRate"); v && v->is_bool()) {
    r.relativeToPublishRate = v->as_bool();
  }
  return r;
}

std::optional<SubscribeRate> parseSubscribeRate(const std::string& text) {
  auto o = objectOf(text);
  if (!o) return std::nullopt;
  SubscribeRate r;
  readNumber(*o, "subscribeThrottlingRatePerConsumer", &r.perConsumer);
  readNumber(*o, "ratePeriodInSecond", &r.ratePeriodInSecond);
  return r;
}

std::optional<std::string> clusterEntry(const std::string& mapJson, const std::string& cluster) {
  auto o = objectOf(mapJson);
  if (!o) return std::nullopt;
  const json::value* v = o->if_contains(cluster);
  if (!v || !v->is_object()) return std::nullopt;
  return json::serialize(*v);
}

}  // namespace magnetar::broker
