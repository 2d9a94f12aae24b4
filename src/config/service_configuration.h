// ServiceConfiguration: the effective broker settings with one typed accessor per key.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "config/cpu.h"
#include "config/setting.h"

namespace magnetar::config {

// C++ type an accessor returns for each SettingType.
// clang-format off
template <SettingType T> struct AccessorType;
template <> struct AccessorType<SettingType::kBool> { using type = bool; };
template <> struct AccessorType<SettingType::kInt> { using type = int32_t; };
template <> struct AccessorType<SettingType::kLong> { using type = int64_t; };
template <> struct AccessorType<SettingType::kDouble> { using type = double; };
template <> struct AccessorType<SettingType::kString> { using type = std::string; };
template <> struct AccessorType<SettingType::kEnum> { using type = std::string; };
template <> struct AccessorType<SettingType::kList> { using type = std::vector<std::string>; };
template <> struct AccessorType<SettingType::kOptInt> { using type = std::optional<int32_t>; };
template <> struct AccessorType<SettingType::kThreads> { using type = int32_t; };
// clang-format on

// The effective configuration (defaults < file < --set), created by loadConfiguration() and then
// shared (std::shared_ptr) with every module. Accessors are named after the keys:
// `cfg.numIOThreads()` (resolved count), `cfg.dispatcherMaxReadBatchSize()`, `cfg.clusterName()`.
// Numeric and bool reads are one relaxed atomic load (fine on hot paths); string and list reads
// copy under a mutex (read them once, at start-up).
// Thread-safety: accessors and updateDynamic() from any thread; set() only before sharing.
class ServiceConfiguration {
 public:
  // Built-in defaults; thread counts sized for `availableProcessors` (>= 1).
  explicit ServiceConfiguration(int availableProcessors);
  ~ServiceConfiguration();
  ServiceConfiguration(const ServiceConfiguration&) = delete;
  ServiceConfiguration& operator=(const ServiceConfiguration&) = delete;

  // One typed accessor per setting, generated from settings.def.
#define MAGNETAR_CATEGORY(title)
#define MAGNETAR_SETTING(TYPE, NAME, ...)                 \
  AccessorType<SettingType::k##TYPE>::type NAME() const { \
    return get<SettingType::k##TYPE>(SettingId::NAME);    \
  }
#include "config/settings.def"
#undef MAGNETAR_SETTING
#undef MAGNETAR_CATEGORY

  // The processor count thread-count defaults were computed for.
  int availableProcessors() const { return availableProcessors_; }
  // numIOThreads with the reason: "8, the default for 16 available processors" / "12, configured".
  ThreadCountResolution ioThreads() const;
  // The explicitly configured value of a kThreads key, or nullopt when unset/0 (auto).
  std::optional<int32_t> configuredThreads(SettingId id) const;

  // Effective value of `key` as text (kThreads: the resolved count; unset kOptInt: "").
  // NotFound for an unknown key.
  Result<std::string> getString(std::string_view key) const;
  // Every setting as key -> text, sorted by key (`config show`, REST configuration/runtime).
  std::map<std::string, std::string> toStringMap() const;

  // Sets any key from text (empty text = the default). `where` names the source for errors, e.g.
  // " at conf/broker.conf:12" or " (--set)". NotFound for an unknown key, InvalidArgument for a
  // bad value. REQUIRES: not yet shared with other threads.
  Status set(std::string_view key, std::string_view value, std::string_view where);

  // Changes a dynamic key at run time (admin API). Validates like set(); NotAllowed for a key
  // that is not dynamic. Thread-safe; listeners run on the calling thread after the change.
  Status updateDynamic(std::string_view key, std::string_view value);
  // Names of the dynamic keys, sorted.
  static std::vector<std::string> dynamicKeys();
  // Called after each successful updateDynamic() with the key and its new canonical text.
  using Listener = std::function<void(const SettingDef& def, const std::string& value)>;
  void addListener(Listener l);

 private:
  static constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();  // unset kOptInt
  struct Slot {
    std::atomic<int64_t> number{0};      // bool, ints; kThreads: the resolved count
    std::atomic<int64_t> configured{0};  // kThreads: configured value, 0 = auto
    std::atomic<double> real{0};
    // Guarded by the registry's mu_ (a nested struct: the analysis cannot name it).
    std::string text;
    std::vector<std::string> list;
  };

  template <SettingType T>
  typename AccessorType<T>::type get(SettingId id) const {
    const Slot& s = slots_[static_cast<size_t>(id)];
    if constexpr (T == SettingType::kBool) {
      return s.number.load(std::memory_order_relaxed) != 0;
    } else if constexpr (T == SettingType::kInt || T == SettingType::kThreads) {
      return static_cast<int32_t>(s.number.load(std::memory_order_relaxed));
    } else if constexpr (T == SettingType::kLong) {
      return s.number.load(std::memory_order_relaxed);
    } else if constexpr (T == SettingType::kOptInt) {
      int64_t v = s.number.load(std::memory_order_relaxed);
      return v == kUnset ? std::nullopt : std::optional<int32_t>(static_cast<int32_t>(v));
    } else if constexpr (T == SettingType::kDouble) {
      return s.real.load(std::memory_order_relaxed);
    } else if constexpr (T == SettingType::kList) {
      MutexLock l(mu_);
      return s.list;
    } else {
      MutexLock l(mu_);
      return s.text;
    }
  }

  void store(const SettingDef& def, const ParsedValue& v);
  std::string textOf(const SettingDef& def) const;

  std::unique_ptr<Slot[]> slots_;
  int availableProcessors_;
  mutable Mutex mu_;
  std::vector<Listener> listeners_ GUARDED_BY(mu_);
};

}  // namespace magnetar::config
