#include "broker/cluster/load_data.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <initializer_list>

namespace magnetar::broker::cluster {

namespace json = boost::json;

namespace {

Result<json::object> objectAt(std::string_view text, const std::string& path, const char* what) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) {
    return Status::corruption(std::string("znode ") + path + " does not hold " + what + " JSON" +
                              (ec ? ": " + ec.message() : ""));
  }
  return std::move(v.as_object());
}

double num(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (!v) return 0;
  if (v->is_double()) return v->as_double();
  if (v->is_int64()) return static_cast<double>(v->as_int64());
  if (v->is_uint64()) return static_cast<double>(v->as_uint64());
  return 0;
}

int64_t integer(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (!v) return 0;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<int64_t>(v->as_uint64());
  if (v->is_double()) return static_cast<int64_t>(v->as_double());
  return 0;
}

std::string text(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

bool flag(const json::object& o, const char* key, bool dflt) {
  const json::value* v = o.if_contains(key);
  return v && v->is_bool() ? v->as_bool() : dflt;
}

const json::object* child(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_object() ? &v->as_object() : nullptr;
}

std::set<std::string> stringSet(const json::object& o, const char* key) {
  std::set<std::string> out;
  const json::value* v = o.if_contains(key);
  if (!v || !v->is_array()) return out;
  for (const auto& e : v->as_array()) {
    if (e.is_string()) out.emplace(e.as_string());
  }
  return out;
}

json::array array(const std::set<std::string>& s) {
  json::array a;
  for (const auto& e : s) a.emplace_back(e);
  return a;
}

json::object usageJson(const ResourceUsage& u) { return {{"usage", u.usage}, {"limit", u.limit}}; }

ResourceUsage usageFrom(const json::object& o, const char* key) {
  const json::object* u = child(o, key);
  if (!u) return {};
  return {num(*u, "usage"), num(*u, "limit")};
}

json::object statsObject(const NamespaceBundleStats& s) {
  return {{"msgRateIn", s.msgRateIn},
          {"msgThroughputIn", s.msgThroughputIn},
          {"msgRateOut", s.msgRateOut},
          {"msgThroughputOut", s.msgThroughputOut},
          {"consumerCount", s.consumerCount},
          {"producerCount", s.producerCount},
          {"topics", s.topics},
          {"cacheSize", s.cacheSize}};
}

NamespaceBundleStats statsFrom(const json::object& o) {
  NamespaceBundleStats s;
  s.msgRateIn = num(o, "msgRateIn");
  s.msgThroughputIn = num(o, "msgThroughputIn");
  s.msgRateOut = num(o, "msgRateOut");
  s.msgThroughputOut = num(o, "msgThroughputOut");
  s.consumerCount = static_cast<int32_t>(integer(o, "consumerCount"));
  s.producerCount = static_cast<int32_t>(integer(o, "producerCount"));
  s.topics = integer(o, "topics");
  s.cacheSize = integer(o, "cacheSize");
  return s;
}

json::object windowObject(const TimeAverageMessageData& t) {
  return {{"maxSamples", t.maxSamples},
          {"numSamples", t.numSamples},
          {"msgThroughputIn", t.msgThroughputIn},
          {"msgThroughputOut", t.msgThroughputOut},
          {"msgRateIn", t.msgRateIn},
          {"msgRateOut", t.msgRateOut}};
}

TimeAverageMessageData windowFrom(const json::object* o) {
  TimeAverageMessageData t;
  if (!o) return t;
  t.maxSamples = static_cast<int32_t>(integer(*o, "maxSamples"));
  t.numSamples = static_cast<int32_t>(integer(*o, "numSamples"));
  t.msgThroughputIn = num(*o, "msgThroughputIn");
  t.msgThroughputOut = num(*o, "msgThroughputOut");
  t.msgRateIn = num(*o, "msgRateIn");
  t.msgRateOut = num(*o, "msgRateOut");
  return t;
}

json::object listenersObject(const std::map<std::string, ListenerUrls>& listeners) {
  json::object o;
  for (const auto& [name, l] : listeners) {
    json::object e;
    if (!l.brokerServiceUrl.empty()) e["brokerServiceUrl"] = l.brokerServiceUrl;
    if (!l.brokerServiceUrlTls.empty()) e["brokerServiceUrlTls"] = l.brokerServiceUrlTls;
    o[name] = std::move(e);
  }
  return o;
}

std::map<std::string, ListenerUrls> listenersFrom(const json::object& o) {
  std::map<std::string, ListenerUrls> out;
  const json::object* l = child(o, "advertisedListeners");
  if (!l) return out;
  for (const auto& [name, v] : *l) {
    if (!v.is_object()) continue;
    out[std::string(name)] = {text(v.as_object(), "brokerServiceUrl"),
                              text(v.as_object(), "brokerServiceUrlTls")};
  }
  return out;
}

// Pulsar's CompareUtil.compareDoubleWithResolution.
int compareWithResolution(double a, double b, double resolution) {
  if (std::abs(a - b) <= resolution) return 0;
  return a < b ? -1 : 1;
}

int compareWindows(const TimeAverageMessageData& a, const TimeAverageMessageData& b) {
  int r = compareWithResolution(a.msgThroughputIn, b.msgThroughputIn, 1e5);
  if (r == 0) r = compareWithResolution(a.msgThroughputOut, b.msgThroughputOut, 1e5);
  if (r == 0) {
    r = compareWithResolution(a.msgRateIn + a.msgRateOut, b.msgRateIn + b.msgRateOut, 100);
  }
  return r;
}

}  // namespace

double ResourceUsage::percentUsage() const {
  float proportion = 0;
  if (limit > 0) proportion = static_cast<float>(usage) / static_cast<float>(limit);
  return static_cast<double>(proportion * 100);
}

void LocalBrokerData::update(const SystemResourceUsage& u, BundleStatsMap stats) {
  usage = u;
  msgRateIn = msgRateOut = msgThroughputIn = msgThroughputOut = 0;
  numTopics = 0;
  numBundles = numConsumers = numProducers = 0;
  for (auto it = bundles.begin(); it != bundles.end();) {
    if (stats.count(*it) == 0) {
      lastBundleLosses.insert(*it);
      it = bundles.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [bundle, s] : stats) {
    if (bundles.insert(bundle).second) lastBundleGains.insert(bundle);
    msgThroughputIn += s.msgThroughputIn;
    msgThroughputOut += s.msgThroughputOut;
    msgRateIn += s.msgRateIn;
    msgRateOut += s.msgRateOut;
    numTopics += s.topics;
    ++numBundles;
    numConsumers += s.consumerCount;
    numProducers += s.producerCount;
  }
  lastStats = std::move(stats);
}

void LocalBrokerData::cleanDeltas() {
  lastBundleGains.clear();
  lastBundleLosses.clear();
}

double LocalBrokerData::maxResourceUsage() const {
  return std::max({usage.cpu.percentUsage(), usage.memory.percentUsage(),
                   usage.directMemory.percentUsage(), usage.bandwidthIn.percentUsage(),
                   usage.bandwidthOut.percentUsage()}) /
         100;
}

double LocalBrokerData::maxResourceUsageWithWeight(double cpuW, double directMemoryW,
                                                   double bandwidthInW,
                                                   double bandwidthOutW) const {
  return std::max({usage.cpu.percentUsage() * cpuW,
                   usage.directMemory.percentUsage() * directMemoryW,
                   usage.bandwidthIn.percentUsage() * bandwidthInW,
                   usage.bandwidthOut.percentUsage() * bandwidthOutW}) /
         100;
}

bool LocalBrokerData::operator==(const LocalBrokerData& o) const {
  return toJson(*this) == toJson(o) && urls.brokerId == o.urls.brokerId;
}

void TimeAverageMessageData::update(const NamespaceBundleStats& s) {
  numSamples = std::min(numSamples + 1, maxSamples);
  if (numSamples <= 0) return;  // maxSamples 0: nothing to average
  auto next = [this](double mean, double sample) {
    return ((numSamples - 1) * mean + sample) / numSamples;
  };
  msgThroughputIn = next(msgThroughputIn, s.msgThroughputIn);
  msgThroughputOut = next(msgThroughputOut, s.msgThroughputOut);
  msgRateIn = next(msgRateIn, s.msgRateIn);
  msgRateOut = next(msgRateOut, s.msgRateOut);
}

NamespaceBundleStats defaultBundleStats() {
  NamespaceBundleStats s;
  s.msgRateIn = s.msgRateOut = kDefaultMessageRate;
  s.msgThroughputIn = s.msgThroughputOut = kDefaultMessageThroughput;
  return s;
}

BundleData BundleData::withDefaults(const NamespaceBundleStats& defaults) {
  BundleData d;
  for (auto [w, n] : {std::pair{&d.shortTermData, kNumShortSamples},
                      std::pair{&d.longTermData, kNumLongSamples}}) {
    w->maxSamples = n;
    w->msgThroughputIn = defaults.msgThroughputIn;
    w->msgThroughputOut = defaults.msgThroughputOut;
    w->msgRateIn = defaults.msgRateIn;
    w->msgRateOut = defaults.msgRateOut;
  }
  return d;
}

void BundleData::update(const NamespaceBundleStats& sample) {
  shortTermData.update(sample);
  longTermData.update(sample);
  topics = static_cast<int32_t>(sample.topics);
}

int BundleData::compare(const BundleData& other) const {
  int r = compareWindows(shortTermData, other.shortTermData);
  return r != 0 ? r : compareWindows(longTermData, other.longTermData);
}

void TimeAverageBrokerData::reset(const std::set<std::string>& bundles,
                                  const std::map<std::string, BundleData>& data,
                                  const NamespaceBundleStats& defaults) {
  *this = TimeAverageBrokerData{};
  for (const auto& b : bundles) {
    auto it = data.find(b);
    TimeAverageMessageData shortTerm, longTerm;
    if (it == data.end()) {
      for (auto* w : {&shortTerm, &longTerm}) {
        w->msgThroughputIn = defaults.msgThroughputIn;
        w->msgThroughputOut = defaults.msgThroughputOut;
        w->msgRateIn = defaults.msgRateIn;
        w->msgRateOut = defaults.msgRateOut;
      }
    } else {
      shortTerm = it->second.shortTermData;
      longTerm = it->second.longTermData;
    }
    shortTermMsgThroughputIn += shortTerm.msgThroughputIn;
    shortTermMsgThroughputOut += shortTerm.msgThroughputOut;
    shortTermMsgRateIn += shortTerm.msgRateIn;
    shortTermMsgRateOut += shortTerm.msgRateOut;
    longTermMsgThroughputIn += longTerm.msgThroughputIn;
    longTermMsgThroughputOut += longTerm.msgThroughputOut;
    longTermMsgRateIn += longTerm.msgRateIn;
    longTermMsgRateOut += longTerm.msgRateOut;
  }
}

std::string toJson(const NamespaceBundleStats& s) { return json::serialize(statsObject(s)); }

std::string toJson(const LocalBrokerData& d) {
  json::object o;
  o["webServiceUrl"] = d.urls.webServiceUrl;
  if (!d.urls.webServiceUrlTls.empty()) o["webServiceUrlTls"] = d.urls.webServiceUrlTls;
  o["pulsarServiceUrl"] = d.urls.pulsarServiceUrl;
  if (!d.urls.pulsarServiceUrlTls.empty()) o["pulsarServiceUrlTls"] = d.urls.pulsarServiceUrlTls;
  o["persistentTopicsEnabled"] = d.persistentTopicsEnabled;
  o["nonPersistentTopicsEnabled"] = d.nonPersistentTopicsEnabled;
  o["cpu"] = usageJson(d.usage.cpu);
  o["memory"] = usageJson(d.usage.memory);
  o["directMemory"] = usageJson(d.usage.directMemory);
  o["bandwidthIn"] = usageJson(d.usage.bandwidthIn);
  o["bandwidthOut"] = usageJson(d.usage.bandwidthOut);
  o["msgThroughputIn"] = d.msgThroughputIn;
  o["msgThroughputOut"] = d.msgThroughputOut;
  o["msgRateIn"] = d.msgRateIn;
  o["msgRateOut"] = d.msgRateOut;
  o["lastUpdate"] = d.lastUpdate;
  json::object stats;
  for (const auto& [b, s] : d.lastStats) stats[b] = statsObject(s);
  o["lastStats"] = std::move(stats);
  o["numTopics"] = d.numTopics;
  o["numBundles"] = d.numBundles;
  o["numConsumers"] = d.numConsumers;
  o["numProducers"] = d.numProducers;
  o["bundles"] = array(d.bundles);
  o["lastBundleGains"] = array(d.lastBundleGains);
  o["lastBundleLosses"] = array(d.lastBundleLosses);
  if (!d.brokerVersionString.empty()) o["brokerVersionString"] = d.brokerVersionString;
  json::object protocols;
  for (const auto& [k, v] : d.protocols) protocols[k] = v;
  o["protocols"] = std::move(protocols);
  o["advertisedListeners"] = listenersObject(d.urls.listeners);
  if (!d.loadManagerClassName.empty()) o["loadManagerClassName"] = d.loadManagerClassName;
  o["startTimestamp"] = d.startTimestamp;
  o["maxResourceUsage"] = d.maxResourceUsage();
  o["loadReportType"] = "LocalBrokerData";
  return json::serialize(o);
}

Result<LocalBrokerData> parseLoadReport(std::string_view jsonText, const std::string& path) {
  auto parsed = objectAt(jsonText, path, "LocalBrokerData");
  if (!parsed.isOk()) return parsed.status();
  const json::object& o = *parsed;
  LocalBrokerData d;
  d.urls.webServiceUrl = text(o, "webServiceUrl");
  d.urls.webServiceUrlTls = text(o, "webServiceUrlTls");
  d.urls.pulsarServiceUrl = text(o, "pulsarServiceUrl");
  d.urls.pulsarServiceUrlTls = text(o, "pulsarServiceUrlTls");
  if (d.urls.pulsarServiceUrl.empty() && d.urls.pulsarServiceUrlTls.empty()) {
    return Status::corruption("znode " + path + ": LocalBrokerData without pulsarServiceUrl");
  }
  d.urls.listeners = listenersFrom(o);
  d.persistentTopicsEnabled = flag(o, "persistentTopicsEnabled", true);
  d.nonPersistentTopicsEnabled = flag(o, "nonPersistentTopicsEnabled", true);
  d.usage = {usageFrom(o, "cpu"), usageFrom(o, "memory"), usageFrom(o, "directMemory"),
             usageFrom(o, "bandwidthIn"), usageFrom(o, "bandwidthOut")};
  d.msgThroughputIn = num(o, "msgThroughputIn");
  d.msgThroughputOut = num(o, "msgThroughputOut");
  d.msgRateIn = num(o, "msgRateIn");
  d.msgRateOut = num(o, "msgRateOut");
  d.lastUpdate = integer(o, "lastUpdate");
  if (const json::object* stats = child(o, "lastStats")) {
    for (const auto& [b, v] : *stats) {
      if (v.is_object()) d.lastStats[std::string(b)] = statsFrom(v.as_object());
    }
  }
  d.numTopics = integer(o, "numTopics");
  d.numBundles = static_cast<int32_t>(integer(o, "numBundles"));
  d.numConsumers = static_cast<int32_t>(integer(o, "numConsumers"));
  d.numProducers = static_cast<int32_t>(integer(o, "numProducers"));
  d.bundles = stringSet(o, "bundles");
  d.lastBundleGains = stringSet(o, "lastBundleGains");
  d.lastBundleLosses = stringSet(o, "lastBundleLosses");
  d.brokerVersionString = text(o, "brokerVersionString");
  if (const json::object* p = child(o, "protocols")) {
    for (const auto& [k, v] : *p) {
      if (v.is_string()) d.protocols[std::string(k)] = std::string(v.as_string());
    }
  }
  d.loadManagerClassName = text(o, "loadManagerClassName");
  d.startTimestamp = integer(o, "startTimestamp");
  return d;
}

std::string toJson(const BundleData& d) {
  return json::serialize(json::object{{"shortTermData", windowObject(d.shortTermData)},
                                      {"longTermData", windowObject(d.longTermData)},
                                      {"topics", d.topics}});
}

Result<BundleData> parseBundleData(std::string_view jsonText, const std::string& path) {
  auto o = objectAt(jsonText, path, "BundleData");
  if (!o.isOk()) return o.status();
  BundleData d;
  d.shortTermData = windowFrom(child(*o, "shortTermData"));
  d.longTermData = windowFrom(child(*o, "longTermData"));
  d.topics = static_cast<int32_t>(integer(*o, "topics"));
  return d;
}

std::string toJson(const TimeAverageBrokerData& d) {
  return json::serialize(json::object{{"shortTermMsgThroughputIn", d.shortTermMsgThroughputIn},
                                      {"shortTermMsgThroughputOut", d.shortTermMsgThroughputOut},
                                      {"shortTermMsgRateIn", d.shortTermMsgRateIn},
                                      {"shortTermMsgRateOut", d.shortTermMsgRateOut},
                                      {"longTermMsgThroughputIn", d.longTermMsgThroughputIn},
                                      {"longTermMsgThroughputOut", d.longTermMsgThroughputOut},
                                      {"longTermMsgRateIn", d.longTermMsgRateIn},
                                      {"longTermMsgRateOut", d.longTermMsgRateOut}});
}

Result<TimeAverageBrokerData> parseTimeAverageBrokerData(std::string_view jsonText,
                                                         const std::string& path) {
  auto o = objectAt(jsonText, path, "TimeAverageBrokerData");
  if (!o.isOk()) return o.status();
  TimeAverageBrokerData d;
  d.shortTermMsgThroughputIn = num(*o, "shortTermMsgThroughputIn");
  d.shortTermMsgThroughputOut = num(*o, "shortTermMsgThroughputOut");
  d.shortTermMsgRateIn = num(*o, "shortTermMsgRateIn");
  d.shortTermMsgRateOut = num(*o, "shortTermMsgRateOut");
  d.longTermMsgThroughputIn = num(*o, "longTermMsgThroughputIn");
  d.longTermMsgThroughputOut = num(*o, "longTermMsgThroughputOut");
  d.longTermMsgRateIn = num(*o, "longTermMsgRateIn");
  d.longTermMsgRateOut = num(*o, "longTermMsgRateOut");
  return d;
}

}  // namespace magnetar::broker::cluster
