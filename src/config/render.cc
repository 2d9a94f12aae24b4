#include "config/render.h"

#include <fmt/format.h>

#include "config/setting.h"

namespace magnetar::config {
namespace {

constexpr size_t kWidth = 100;

// Wraps `text` into "# "-prefixed lines of at most kWidth columns.
void appendWrappedComment(std::string& out, std::string_view text) {
  size_t lineLen = 0;  // length of the current output line, 0 = none started
  size_t pos = 0;
  while (pos < text.size()) {
    size_t sp = text.find(' ', pos);
    std::string_view word = text.substr(pos, sp == std::string_view::npos ? sp : sp - pos);
    pos = sp == std::string_view::npos ? text.size() : sp + 1;
    if (word.empty()) continue;
    if (lineLen > 0 && lineLen + 1 + word.size() > kWidth) {
      out.push_back('\n');
      lineLen = 0;
    }
    if (lineLen == 0) {
      out.push_back('#');
      lineLen = 1;
    }
    out.push_back(' ');
    out.append(word);
    lineLen += 1 + word.size();
  }
  out.append(lineLen == 0 ? "#\n" : "\n");
}

void appendNotes(std::string& out, std::string_view notes) {
  while (!notes.empty()) {
    size_t nl = notes.find('\n');
    std::string_view l = notes.substr(0, nl);
    out += l.empty() ? "#\n" : fmt::format("# {}\n", l);
    if (nl == std::string_view::npos) break;
    notes.remove_prefix(nl + 1);
  }
}

std::string defaultText(const SettingDef& def) {
  auto v = parseValue(def, def.defaultValue, "");
  return v ? formatValue(def, *v) : def.defaultValue;
}

std::string rangeText(const SettingDef& def) {
  if (def.type == SettingType::kEnum) return fmt::format("one of {}", fmt::join(def.allowed, ", "));
  if (def.min && def.max) return fmt::format("{}..{}", *def.min, *def.max);
  if (def.min) return fmt::format(">= {}", *def.min);
  if (def.max) return fmt::format("<= {}", *def.max);
  return {};
}

std::string escapeCell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string describeType(std::string_view key) {
  const SettingDef* def = findSetting(key);
  if (def == nullptr) return {};
  std::string out(typeName(def->type));
  if (std::string r = rangeText(*def); !r.empty()) out += ", " + r;
  if (def->dynamic) out += ", dynamic";
  return out;
}

std::string renderBrokerConf() {
  std::string out;
  out +=
      "# Magnetar broker configuration: Pulsar's key names, one key=value per line.\n"
      "# Generated from src/config/settings.def by `magnetar config docs --format conf`;\n"
      "# change the registry and regenerate rather than editing this file.\n"
      "# An empty value means the built-in default. Later sources win:\n"
      "# built-in defaults < this file (--config FILE) < --set KEY=VALUE on the command line.\n"
      "# See docs/configuration.md.\n";
  std::string category;
  for (const auto& def : allSettings()) {
    if (def.category != category) {
      category = def.category;
      out += fmt::format("\n### --- {} --- ###\n", category);
    }
    out += "\n";
    std::string_view notes = settingNotes(def.name);
    if (notes.empty()) {
      appendWrappedComment(out, def.doc);
    } else {
      appendNotes(out, notes);
    }
    if (!settingEnforced(def.name)) out += "# Accepted for compatibility; not enforced yet.\n";
    out += fmt::format("# ({})\n", describeType(def.name));
    out += fmt::format("{}={}\n", def.name, defaultText(def));
  }
  return out;
}

std::string renderDocsTable() {
  std::string out;
  for (const auto& category : settingCategories()) {
    out += fmt::format("\n### {}\n\n", category);
    out += "| Key | Type | Default | Dynamic | Description |\n";
    out += "|---|---|---|---|---|\n";
    for (const auto& def : allSettings()) {
      if (def.category != category) continue;
      std::string type(typeName(def.type));
      if (std::string r = rangeText(def); !r.empty()) type += ", " + r;
      std::string dflt = defaultText(def);
      if (dflt.empty()) {
        bool optional = def.type == SettingType::kOptInt || def.type == SettingType::kThreads;
        dflt = optional ? "(unset)" : "(empty)";
      } else {
        dflt = fmt::format("`{}`", dflt);
      }
      out += fmt::format("| `{}` | {} | {} | {} | {} |\n", def.name, escapeCell(type),
                         escapeCell(dflt), def.dynamic ? "yes" : "no",
                         escapeCell(settingEnforced(def.name)
                                        ? def.doc
                                        : "**Not enforced yet.** " + def.doc));
    }
  }
  out += "\n";
  return out;
}

}  // namespace magnetar::config
