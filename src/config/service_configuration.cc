#include "config/service_configuration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "config/text.h"

namespace magnetar::config {
namespace {

// The automatic size of a kThreads key for n available processors.
int autoThreadCount(SettingId id, int n) {
  if (id == SettingId::numIOThreads) return defaultNumIOThreads(n);
  // A few busy bookie connections coalesce best on a few loops (docs/cluster-threads.md).
  if (id == SettingId::bookkeeperClientNumIoThreads) return std::clamp(n, 1, 4);
  return std::max(n, 1);  // Pulsar sizes its ml-worker and scheduler pools to the processors
}

}  // namespace

ServiceConfiguration::ServiceConfiguration(int availableProcessors)
    : slots_(new Slot[kSettingCount]), availableProcessors_(std::max(availableProcessors, 1)) {
  for (const auto& def : allSettings()) {
    auto v = parseValue(def, def.defaultValue, " (built-in default)");
    assert(v.isOk());  // registry_test checks every default
    if (v) store(def, *v);
  }
}

ServiceConfiguration::~ServiceConfiguration() = default;

void ServiceConfiguration::store(const SettingDef& def, const ParsedValue& v) {
  Slot& s = slots_[static_cast<size_t>(def.id)];
  switch (def.type) {
    case SettingType::kBool:
    case SettingType::kInt:
    case SettingType::kLong:
      s.number.store(v.number.value_or(0), std::memory_order_relaxed);
      break;
    case SettingType::kOptInt:
      s.number.store(v.number.value_or(kUnset), std::memory_order_relaxed);
      break;
    case SettingType::kThreads: {
      int64_t configured = v.number.value_or(0);
      s.configured.store(configured, std::memory_order_relaxed);
      s.number.store(configured > 0 ? configured : autoThreadCount(def.id, availableProcessors_),
                     std::memory_order_relaxed);
      break;
    }
    case SettingType::kDouble:
      s.real.store(v.real, std::memory_order_relaxed);
      break;
    case SettingType::kString:
    case SettingType::kEnum: {
      MutexLock l(mu_);
      s.text = v.text;
      break;
    }
    case SettingType::kList: {
      MutexLock l(mu_);
      s.list = v.list;
      break;
    }
  }
}

std::string ServiceConfiguration::textOf(const SettingDef& def) const {
  const Slot& s = slots_[static_cast<size_t>(def.id)];
  ParsedValue v;
  switch (def.type) {
    case SettingType::kBool:
    case SettingType::kInt:
    case SettingType::kLong:
    case SettingType::kThreads:
      v.number = s.number.load(std::memory_order_relaxed);
      break;
    case SettingType::kOptInt: {
      int64_t n = s.number.load(std::memory_order_relaxed);
      if (n != kUnset) v.number = n;
      break;
    }
    case SettingType::kDouble:
      v.real = s.real.load(std::memory_order_relaxed);
      break;
    case SettingType::kString:
    case SettingType::kEnum: {
      MutexLock l(mu_);
      v.text = s.text;
      break;
    }
    case SettingType::kList: {
      MutexLock l(mu_);
      v.list = s.list;
      break;
    }
  }
  return formatValue(def, v);
}

ThreadCountResolution ServiceConfiguration::ioThreads() const {
  return resolveNumIOThreads(configuredThreads(SettingId::numIOThreads), availableProcessors_);
}

std::optional<int32_t> ServiceConfiguration::configuredThreads(SettingId id) const {
  int64_t c = slots_[static_cast<size_t>(id)].configured.load(std::memory_order_relaxed);
  if (c <= 0) return std::nullopt;
  return static_cast<int32_t>(c);
}

Result<std::string> ServiceConfiguration::getString(std::string_view key) const {
  const SettingDef* def = findSetting(key);
  if (def == nullptr) return Status::notFound(fmt::format("unknown configuration key '{}'", key));
  return textOf(*def);
}

std::map<std::string, std::string> ServiceConfiguration::toStringMap() const {
  std::map<std::string, std::string> out;
  for (const auto& def : allSettings()) out.emplace(def.name, textOf(def));
  return out;
}

Status ServiceConfiguration::set(std::string_view key, std::string_view value,
                                 std::string_view where) {
  const SettingDef* def = findSetting(key);
  if (def == nullptr) {
    return Status::notFound(fmt::format("unknown configuration key '{}'{}", key, where));
  }
  auto v = parseValue(*def, value, where);
  if (!v) return v.status();
  store(*def, *v);
  return Status::ok();
}

Status ServiceConfiguration::updateDynamic(std::string_view key, std::string_view value) {
  const SettingDef* def = findSetting(key);
  if (def == nullptr) return Status::notFound(fmt::format("unknown configuration key '{}'", key));
  if (!def->dynamic) {
    return Status::notAllowed(
        fmt::format("{} cannot be changed at run time; set it in the config file", key));
  }
  auto v = parseValue(*def, value, " (dynamic update)");
  if (!v) return v.status();
  store(*def, *v);
  std::string text = formatValue(*def, *v);
  std::vector<Listener> listeners;
  {
    MutexLock l(mu_);
    listeners = listeners_;
  }
  for (const auto& cb : listeners) cb(*def, text);
  return Status::ok();
}

std::vector<std::string> ServiceConfiguration::dynamicKeys() {
  std::vector<std::string> out;
  for (const auto& def : allSettings()) {
    if (def.dynamic) out.push_back(def.name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void ServiceConfiguration::addListener(Listener l) {
  MutexLock g(mu_);
  listeners_.push_back(std::move(l));
}

}  // namespace magnetar::config
