#include "mqtt/state_format.h"

#include <algorithm>
#include <boost/json.hpp>

#include "broker/common/base64.h"
#include "mqtt/message_mapping.h"
#include "mqtt/topic_mapping.h"

namespace magnetar::mqtt {
namespace json = boost::json;

namespace {

Status corrupt(std::string_view what, std::string_view why) {
  return Status::corruption(std::string(what) + " record: " + std::string(why));
}

// The integer member `key` of `o` in [lo, hi]; nullopt when missing or out of range.
std::optional<int64_t> intMember(const json::object& o, std::string_view key, int64_t lo,
                                 int64_t hi) {
  const json::value* v = o.if_contains(key);
  if (!v) return std::nullopt;
  int64_t n = 0;
  if (v->is_int64()) {
    n = v->as_int64();
  } else if (v->is_uint64() && v->as_uint64() <= static_cast<uint64_t>(INT64_MAX)) {
    n = static_cast<int64_t>(v->as_uint64());
  } else {
    return std::nullopt;
  }
  if (n < lo || n > hi) return std::nullopt;
  return n;
}

const json::string* stringMember(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? &v->as_string() : nullptr;
}

Result<json::object> parseObject(std::string_view text, std::string_view what) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return corrupt(what, "not JSON: " + ec.message());
  if (!v.is_object()) return corrupt(what, "not a JSON object");
  return std::move(v.as_object());
}

Result<SubscriptionRequest> filterOf(const json::value& v) {
  if (!v.is_object()) return corrupt("session", "a filter is not an object");
  const json::object& o = v.as_object();
  const json::string* f = stringMember(o, "filter");
  auto qos = intMember(o, "qos", 0, 2);
  auto handling = intMember(o, "retainHandling", 0, 2);
  if (!f || f->empty() || !qos) return corrupt("session", "a filter lacks filter or qos 0..2");
  SubscriptionRequest r;
  r.filter = std::string(*f);
  r.qos = static_cast<uint8_t>(*qos);
  r.retainHandling = static_cast<uint8_t>(handling.value_or(0));
  const json::value* rap = o.if_contains("retainAsPublished");
  r.retainAsPublished = rap && rap->is_bool() && rap->as_bool();
  const json::value* nl = o.if_contains("noLocal");
  r.noLocal = nl && nl->is_bool() && nl->as_bool();
  return r;
}

Result<PendingWill> willOf(const json::value& v);
RetainedMessage willMessage(const Will& w);

}  // namespace

std::string storePathComponent(std::string_view s) {
  std::string out;
  for (char c : urlEncode(s)) {
    if (c == '.') {
      out += "%2E";
    } else {
      out += c;
    }
  }
  return out;
}

Result<std::string> fromStorePathComponent(std::string_view s) { return urlDecode(s); }

std::string encodeSession(const StoredSession& s) {
  json::array filters;
  for (const SubscriptionRequest& r : s.filters) {
    filters.push_back(json::object{{"filter", r.filter},
                                   {"qos", static_cast<int64_t>(r.qos)},
                                   {"noLocal", r.noLocal},
                                   {"retainAsPublished", r.retainAsPublished},
                                   {"retainHandling", static_cast<int64_t>(r.retainHandling)}});
  }
  json::object o{{"version", 1},
                 {"filters", std::move(filters)},
                 {"expirySeconds", static_cast<int64_t>(s.expirySeconds)},
                 {"disconnectedAtMs", s.disconnectedAtMs}};
  if (!s.qos2Received.empty()) {
    json::array ids;
    for (uint16_t id : s.qos2Received) ids.push_back(static_cast<int64_t>(id));
    o["qos2Received"] = std::move(ids);
  }
  if (s.will) {
    // The will's message in the retained message's form (its properties as Pulsar properties,
    // the message expiry as an absolute time), and when it is due.
    json::object w = json::parse(encodeRetained(willMessage(s.will->will))).as_object();
    w.erase("version");
    w["retain"] = s.will->will.retain;
    w["dueMs"] = s.will->dueMs;
    o["will"] = std::move(w);
  }
  return json::serialize(o);
}

Result<StoredSession> decodeSession(std::string_view text) {
  auto o = parseObject(text, "session");
  if (!o.isOk()) return o.status();
  StoredSession s;
  auto expiry = intMember(*o, "expirySeconds", 0, kSessionNeverExpires);
  auto at = intMember(*o, "disconnectedAtMs", 0, INT64_MAX);
  const json::value* filters = o->if_contains("filters");
  if (!expiry || !at || !filters || !filters->is_array()) {
    return corrupt("session", "needs filters (array), expirySeconds and disconnectedAtMs");
  }
  s.expirySeconds = static_cast<uint32_t>(*expiry);
  s.disconnectedAtMs = *at;
  for (const json::value& v : filters->as_array()) {
    auto r = filterOf(v);
    if (!r.isOk()) return r.status();
    s.filters.push_back(std::move(*r));
  }
  if (const json::value* ids = o->if_contains("qos2Received")) {
    if (!ids->is_array()) return corrupt("session", "qos2Received is not an array");
    for (const json::value& v : ids->as_array()) {
      const auto* n = v.if_int64();
      if (!n || *n < 1 || *n > 65535)
        return corrupt("session", "a qos2Received id not in 1..65535");
      s.qos2Received.push_back(static_cast<uint16_t>(*n));
    }
  }
  if (const json::value* w = o->if_contains("will")) {
    auto will = willOf(*w);
    if (!will.isOk()) return will.status();
    s.will = std::move(*will);
  }
  return s;
}

bool sessionExpired(const StoredSession& s, int64_t nowMs) {
  if (s.disconnectedAtMs == 0 || s.expirySeconds == kSessionNeverExpires) return false;
  return nowMs >= s.disconnectedAtMs + static_cast<int64_t>(s.expirySeconds) * 1000;
}

RetainedMessage retainedOf(const Publish& p, int64_t nowSeconds) {
  RetainedMessage r;
  r.topic = p.topic;
  r.qos = std::min<uint8_t>(p.qos, 2);
  r.payload = p.payload;
  proto::MessageMetadata md;
  toPulsarProperties(p, nowSeconds, &md);
  for (const auto& kv : md.properties()) r.pulsarProperties.emplace_back(kv.key(), kv.value());
  return r;
}

std::string encodeRetained(const RetainedMessage& r) {
  json::array props;
  for (const auto& [k, v] : r.pulsarProperties) props.push_back(json::array{k, v});
  json::object o{{"version", 1},
                 {"topic", r.topic},
                 {"qos", static_cast<int64_t>(r.qos)},
                 {"payload", broker::base64Encode(r.payload)},
                 {"properties", std::move(props)}};
  return json::serialize(o);
}

Result<RetainedMessage> decodeRetained(std::string_view text) {
  auto o = parseObject(text, "retained message");
  if (!o.isOk()) return o.status();
  const json::string* topic = stringMember(*o, "topic");
  const json::string* payload = stringMember(*o, "payload");
  auto qos = intMember(*o, "qos", 0, 2);
  const json::value* props = o->if_contains("properties");
  if (!topic || topic->empty() || !payload || !qos || (props && !props->is_array())) {
    return corrupt("retained message", "needs topic, qos 0..2, payload and properties (array)");
  }
  RetainedMessage r;
  r.topic = std::string(*topic);
  r.qos = static_cast<uint8_t>(*qos);
  auto bytes = broker::base64Decode(std::string(*payload));
  if (!bytes) return corrupt("retained message", "payload is not base64");
  r.payload = std::move(*bytes);
  if (props) {
    for (const json::value& kv : props->as_array()) {
      const json::array* a = kv.if_array();
      if (!a || a->size() != 2 || !(*a)[0].is_string() || !(*a)[1].is_string()) {
        return corrupt("retained message", "a property is not [key, value]");
      }
      r.pulsarProperties.emplace_back(std::string((*a)[0].as_string()),
                                      std::string((*a)[1].as_string()));
    }
  }
  return r;
}

namespace {

// A will's message as a retained message record holds it (the delay interval left out).
RetainedMessage willMessage(const Will& w) {
  Publish p;
  p.topic = w.topic;
  p.qos = w.qos;
  p.payload = w.payload;
  p.properties = w.properties;
  p.properties.ints.erase(PropertyId::kWillDelayInterval);
  // Absolute expiry from the record's epoch 0: a will's expiry interval stays an interval.
  return retainedOf(p, 0);
}

Result<PendingWill> willOf(const json::value& v) {
  if (!v.is_object()) return corrupt("session", "will is not an object");
  const json::object& o = v.as_object();
  auto due = intMember(o, "dueMs", 0, INT64_MAX);
  const json::value* retain = o.if_contains("retain");
  if (!due || !retain || !retain->is_bool()) {
    return corrupt("session", "will needs dueMs and retain (bool)");
  }
  auto m = decodeRetained(json::serialize(o));
  if (!m.isOk()) return corrupt("session", "will: " + m.status().message());
  PendingWill w;
  w.dueMs = *due;
  w.will.topic = std::move(m->topic);
  w.will.qos = m->qos;
  w.will.retain = retain->as_bool();
  w.will.payload = std::move(m->payload);
  // Read back at "now" 0, the epoch the record was written against: the interval itself.
  if (!propertiesFromPulsar(m->pulsarProperties, 0, &w.will.properties)) {
    return corrupt("session", "will: its properties do not map back");
  }
  return w;
}

}  // namespace

uint8_t resolveTopicAlias(Publish* p, uint16_t maximum, std::map<uint16_t, std::string>* aliases,
                          std::string* why) {
  auto alias = p->properties.num(PropertyId::kTopicAlias);
  if (!alias) return reason::kSuccess;
  if (*alias == 0 || *alias > maximum) {
    *why = "topic alias " + std::to_string(*alias) + " is not in 1.." + std::to_string(maximum) +
           " (the Topic Alias Maximum)";
    return reason::kTopicAliasInvalid;
  }
  const auto key = static_cast<uint16_t>(*alias);
  if (!p->topic.empty()) {
    (*aliases)[key] = p->topic;
  } else {
    auto it = aliases->find(key);
    if (it == aliases->end()) {
      *why = "topic alias " + std::to_string(key) + " has no topic name yet";
      return reason::kProtocolError;
    }
    p->topic = it->second;
  }
  // Not passed on: an alias is the connection's, not the message's (3.3.2.3.4).
  p->properties.ints.erase(PropertyId::kTopicAlias);
  return reason::kSuccess;
}

bool sendsRetained(uint8_t retainHandling, bool subscriptionExisted) {
  return retainHandling == 0 || (retainHandling == 1 && !subscriptionExisted);
}

uint32_t willDelaySeconds(const Will& w, bool persistentSession, uint32_t sessionExpirySeconds) {
  const uint32_t delay = w.properties.num(PropertyId::kWillDelayInterval).value_or(0);
  if (!persistentSession) return 0;
  return std::min(delay, sessionExpirySeconds);
}

}  // namespace magnetar::mqtt
