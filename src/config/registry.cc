#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <limits>
#include <unordered_map>

#include "config/setting.h"
#include "config/text.h"

namespace magnetar::config {
namespace {

std::optional<double> parseBound(std::string_view s) {
  if (s.empty()) return std::nullopt;
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::vector<SettingDef> buildSettings() {
  std::vector<SettingDef> out;
  std::string category;
#define MAGNETAR_CATEGORY(title) category = title;
#define MAGNETAR_SETTING(TYPE, NAME, DEF, MIN, MAX, ALLOWED, DYN, ENFORCED, DOC)               \
  out.push_back(SettingDef{SettingId::NAME, #NAME, SettingType::k##TYPE, DEF, parseBound(MIN), \
                           parseBound(MAX), splitTrimmed(ALLOWED, '|'), DYN, ENFORCED, category, \
                           DOC});
#include "config/settings.def"
#undef MAGNETAR_SETTING
#undef MAGNETAR_CATEGORY
  return out;
}

// Long-form notes: rendered above the key in broker.conf and in docs/configuration.md.
const std::unordered_map<std::string_view, std::string_view>& notesTable() {
  static const std::unordered_map<std::string_view, std::string_view> kNotes = {
      {"numIOThreads",
       "Number of pulsar-io event loops. Each connection is pinned to one loop for its life;\n"
       "its reads, frame decoding and writes run there.\n"
       "Empty or 0: min(2n, max(8, n/2)) for n available processors. n is read once at start-up:\n"
       "the CPUs this process may run on (sched_getaffinity), limited by a cgroup CPU quota\n"
       "(cpu.max or cpu.cfs_quota_us/cpu.cfs_period_us, rounded up); the command-line option\n"
       "--available-processors N overrides n, like the JVM's -XX:ActiveProcessorCount.\n"
       "\n"
       "  available processors      1   2   4   8  16  32  64  128\n"
       "  old Pulsar default (2n)   2   4   8  16  32  64 128  256\n"
       "  default here              2   4   8   8   8  16  32   64\n"
       "\n"
       "Symptom of too few I/O threads: the busiest pulsar-io thread stays busy (near 100% of a\n"
       "core in `top -H`) and consumers' backlogs grow. Then set numIOThreads higher; an explicit\n"
       "value always wins. maxMessagePublishBufferSizeInMB is divided between the I/O threads.\n"
       "The HTTP server (numHttpServerThreads), the ml-workers (managedLedgerNumWorkerThreads)\n"
       "and storage reads (numReadWorkerThreads) have their own thread counts."},
      {"maxMessagePublishBufferSizeInMB",
       "Memory for messages received but not yet persisted, in MiB. Each pulsar-io thread gets\n"
       "an equal share (total / numIOThreads); a thread over its share stops reading from its\n"
       "connections and resumes below half of it. Fewer threads means a larger share each; the\n"
       "total is unchanged. -1 or 0 disables the limit.\n"
       "Pulsar's default is half of the JVM's direct memory: 2048 with its stock\n"
       "-XX:MaxDirectMemorySize=4g. Magnetar uses that 2048 as a fixed default."},
      {"managedLedgerCacheSizeMB",
       "Entry cache for tailing consumers, in MiB, shared by all topics. Pulsar's default is a\n"
       "fifth of the JVM's direct memory: 819 with its stock -XX:MaxDirectMemorySize=4g.\n"
       "Magnetar uses that 819 as a fixed default. 0 disables the cache."},
      {"journalSyncData",
       "true: a publish is acknowledged after the journal write is fsync'd (BookKeeper's\n"
       "default). false: after it is written to the OS; a machine crash may lose acknowledged\n"
       "messages, a process crash does not. conf/standalone.conf sets false, as Pulsar "
       "standalone."},
  };
  return kNotes;
}

Status badValue(const SettingDef& def, std::string_view text, std::string_view where,
                std::string_view reason) {
  return Status::invalidArgument(
      fmt::format("invalid value '{}' for {}{}: {}", text, def.name, where, reason));
}

Result<int64_t> parseInteger(const SettingDef& def, std::string_view t, std::string_view where) {
  std::string_view digits = t;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec == std::errc::result_out_of_range) return badValue(def, t, where, "out of range");
  if (ec != std::errc() || p != digits.data() + digits.size() || digits.empty()) {
    return badValue(def, t, where, "not an integer");
  }
  bool is32 = def.type != SettingType::kLong;
  if (is32 &&
      (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())) {
    return badValue(def, t, where, "out of range for a 32-bit integer");
  }
  return v;
}

Status checkBounds(const SettingDef& def, std::string_view t, std::string_view where, double v) {
  if (def.min && v < *def.min) {
    return badValue(def, t, where, fmt::format("below the minimum {}", *def.min));
  }
  if (def.max && v > *def.max) {
    return badValue(def, t, where, fmt::format("above the maximum {}", *def.max));
  }
  return Status::ok();
}

}  // namespace

const std::vector<SettingDef>& allSettings() {
  static const std::vector<SettingDef> kAll = buildSettings();
  return kAll;
}

const SettingDef* findSetting(std::string_view name) {
  static const auto kIndex = [] {
    std::unordered_map<std::string_view, const SettingDef*> m;
    for (const auto& d : allSettings()) m.emplace(d.name, &d);
    return m;
  }();
  auto it = kIndex.find(name);
  return it == kIndex.end() ? nullptr : it->second;
}

const SettingDef& settingDef(SettingId id) { return allSettings()[static_cast<size_t>(id)]; }

const std::vector<std::string>& settingCategories() {
  static const std::vector<std::string> kCats = [] {
    std::vector<std::string> c;
    for (const auto& d : allSettings()) {
      if (c.empty() || c.back() != d.category) c.push_back(d.category);
    }
    return c;
  }();
  return kCats;
}

std::string_view settingNotes(std::string_view name) {
  auto it = notesTable().find(name);
  return it == notesTable().end() ? std::string_view() : it->second;
}

bool settingEnforced(std::string_view name) {
  const SettingDef* def = findSetting(name);
  return !def || def->enforced;
}

std::string_view typeName(SettingType t) {
  // Indexed by SettingType.
  static constexpr std::string_view kNames[] = {
      "bool", "int", "long", "double", "string", "enum", "list", "optional int", "thread count"};
  static_assert(std::size(kNames) == static_cast<size_t>(SettingType::kThreads) + 1,
                "a SettingType without a name");
  auto i = static_cast<size_t>(t);
  return i < std::size(kNames) ? kNames[i] : "?";
}

Result<ParsedValue> parseValue(const SettingDef& def, std::string_view text,
                               std::string_view where) {
  std::string_view t = trim(text);
  ParsedValue out;
  if (t.empty()) {
    // An empty value means the default; the defaults themselves are checked by a unit test.
    if (def.defaultValue.empty()) return out;
    return parseValue(def, def.defaultValue, where);
  }
  switch (def.type) {
    case SettingType::kBool: {
      if (equalsIgnoreCase(t, "true")) {
        out.number = 1;
      } else if (equalsIgnoreCase(t, "false")) {
        out.number = 0;
      } else {
        return badValue(def, t, where, "expected true or false");
      }
      return out;
    }
    case SettingType::kInt:
    case SettingType::kLong:
    case SettingType::kOptInt:
    case SettingType::kThreads: {
      auto v = parseInteger(def, t, where);
      if (!v) return v.status();
      if (Status s = checkBounds(def, t, where, static_cast<double>(*v)); !s) return s;
      out.number = *v;
      return out;
    }
    case SettingType::kDouble: {
      double v = 0;
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (ec != std::errc() || p != t.data() + t.size() || !std::isfinite(v)) {
        return badValue(def, t, where, "not a number");
      }
      if (Status s = checkBounds(def, t, where, v); !s) return s;
      out.real = v;
      return out;
    }
    case SettingType::kEnum: {
      if (std::find(def.allowed.begin(), def.allowed.end(), t) == def.allowed.end()) {
        return badValue(def, t, where,
                        fmt::format("expected one of {}", fmt::join(def.allowed, ", ")));
      }
      out.text = std::string(t);
      return out;
    }
    case SettingType::kString:
      out.text = std::string(t);
      return out;
    case SettingType::kList:
      out.list = splitTrimmed(t, ',');
      return out;
  }
  return badValue(def, t, where, "unknown type");
}

std::string formatValue(const SettingDef& def, const ParsedValue& v) {
  switch (def.type) {
    case SettingType::kBool:
      return v.number.value_or(0) != 0 ? "true" : "false";
    case SettingType::kInt:
    case SettingType::kLong:
    case SettingType::kOptInt:
    case SettingType::kThreads:
      return v.number ? std::to_string(*v.number) : std::string();
    case SettingType::kDouble:
      return formatDouble(v.real);
    case SettingType::kString:
    case SettingType::kEnum:
      return v.text;
    case SettingType::kList:
      return fmt::format("{}", fmt::join(v.list, ","));
  }
  return {};
}

}  // namespace magnetar::config
