// The configuration registry: one SettingDef per broker setting, built from settings.def.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace magnetar::config {

inline constexpr bool kDynamic = true;  // may change at run time (admin API)
inline constexpr bool kStatic = false;  // read once at start-up
inline constexpr bool kEnforced = true;      // Magnetar has the behaviour
inline constexpr bool kNotEnforced = false;  // accepted and stored only

// Value type of a setting. Sizes and durations carry their unit in the key, as Pulsar's do.
enum class SettingType {
  kBool,
  kInt,   // int32
  kLong,  // int64
  kDouble,
  kString,
  kEnum,     // a string from a fixed set
  kList,     // comma-separated strings
  kOptInt,   // int32 or unset
  kThreads,  // int32 thread count; unset or 0 = sized from the available processors
};

// Stable index of each setting, in declaration order. Use with ServiceConfiguration.
enum class SettingId : int {
#define MAGNETAR_CATEGORY(title)
#define MAGNETAR_SETTING(TYPE, NAME, ...) NAME,
#include "config/settings.def"
#undef MAGNETAR_SETTING
#undef MAGNETAR_CATEGORY
  kCount
};
inline constexpr int kSettingCount = static_cast<int>(SettingId::kCount);

// One declared setting. Immutable; lives for the whole process.
struct SettingDef {
  SettingId id;
  std::string name;  // Pulsar's key, e.g. "numIOThreads"
  SettingType type;
  std::string defaultValue;   // canonical text; "" = unset (OptInt/Threads) or empty string/list
  std::optional<double> min;  // numeric bounds, inclusive
  std::optional<double> max;
  std::vector<std::string> allowed;  // kEnum only
  bool dynamic;
  bool enforced;  // kNotEnforced: accepted so Pulsar's files load, no behaviour (settingEnforced)
  std::string category;
  std::string doc;  // one line
};

// All settings in declaration order (grouped by category).
const std::vector<SettingDef>& allSettings();
// The setting named `name` (exact, case-sensitive), or nullptr.
const SettingDef* findSetting(std::string_view name);
const SettingDef& settingDef(SettingId id);
// Categories in declaration order.
const std::vector<std::string>& settingCategories();
// Extra multi-line notes for a few keys (numIOThreads, ...), or "" when there are none. Each line
// is plain text without a leading '#'.
std::string_view settingNotes(std::string_view name);
// The `enforced` field of the setting named `name` (true for an unknown name). False for keys
// Magnetar accepts so Pulsar configuration files load, but whose behaviour it does not have yet
// (TLS, authentication, backlog-quota checks, ...). The generated conf files and docs say so,
// and loading one with a non-default value warns.
bool settingEnforced(std::string_view name);
// "bool", "int", "long", "double", "string", "enum", "list", "optional int", "thread count".
std::string_view typeName(SettingType t);

// A value parsed and checked against its SettingDef. For kOptInt/kThreads an empty text gives
// number = nullopt. Text is trimmed; an empty text otherwise means the default.
struct ParsedValue {
  std::optional<int64_t> number;  // Bool (0/1), Int, Long, OptInt, Threads
  double real = 0;                // Double
  std::string text;               // String, Enum
  std::vector<std::string> list;  // List
};
// Parses `text` for `def`. On error the Status is InvalidArgument with "invalid value '<text>' for
// <key><where>: <reason>"; `where` is e.g. " at conf/broker.conf:12" or " (--set)".
Result<ParsedValue> parseValue(const SettingDef& def, std::string_view text,
                               std::string_view where);
// Canonical text of a value (as `config show` prints it): "true", "8", "0.9", "a,b".
std::string formatValue(const SettingDef& def, const ParsedValue& v);

}  // namespace magnetar::config
