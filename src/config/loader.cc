#include "config/loader.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "config/text.h"

namespace magnetar::config {

std::vector<ConfigLine> parseConfigText(std::string_view text, std::string_view fileName,
                                        std::vector<std::string>* warnings) {
  std::vector<ConfigLine> out;
  int lineNo = 0;
  while (!text.empty()) {
    ++lineNo;
    size_t nl = text.find('\n');
    std::string_view raw = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      if (warnings) {
        warnings->push_back(
            fmt::format("{}:{}: ignored line without '=': '{}'", fileName, lineNo, line));
      }
      continue;
    }
    out.push_back(ConfigLine{std::string(trim(line.substr(0, eq))),
                             std::string(trim(line.substr(eq + 1))), lineNo});
  }
  return out;
}

namespace {

Status applyFile(ServiceConfiguration& cfg, const std::string& path,
                 std::vector<std::string>& warnings) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::ioError(fmt::format("config file '{}' is a directory", path));
  }
  std::ifstream in(path);
  if (!in) return Status::ioError(fmt::format("cannot read config file '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  std::unordered_map<std::string, int> seen;
  for (const ConfigLine& l : parseConfigText(text, path, &warnings)) {
    if (findSetting(l.key) == nullptr) {
      warnings.push_back(fmt::format("{}:{}: unknown key '{}' (ignored)", path, l.line, l.key));
      continue;
    }
    auto [it, inserted] = seen.emplace(l.key, l.line);
    if (!inserted) {
      warnings.push_back(fmt::format("{}:{}: '{}' repeats line {}; the last value wins", path,
                                     l.line, l.key, it->second));
      it->second = l.line;
    }
    Status s = cfg.set(l.key, l.value, fmt::format(" at {}:{}", path, l.line));
    if (!s) return s;
  }
  return Status::ok();
}

Status applyOverride(ServiceConfiguration& cfg, std::string_view kv) {
  size_t eq = kv.find('=');
  if (eq == std::string_view::npos || trim(kv.substr(0, eq)).empty()) {
    return Status::invalidArgument(fmt::format("--set expects KEY=VALUE, got '{}'", kv));
  }
  std::string_view key = trim(kv.substr(0, eq));
  // An unknown key on the command line is a typo the user can fix now: an error, not a warning.
  return cfg.set(key, kv.substr(eq + 1), " (--set)");
}

}  // namespace

Result<LoadedConfiguration> loadConfiguration(const LoadOptions& options) {
  int n = options.availableProcessors > 0 ? options.availableProcessors : availableProcessors();
  LoadedConfiguration out;
  out.config = std::make_shared<ServiceConfiguration>(n);
  if (!options.configFile.empty()) {
    if (Status s = applyFile(*out.config, options.configFile, out.warnings); !s) return s;
  }
  for (const auto& kv : options.overrides) {
    if (Status s = applyOverride(*out.config, kv); !s) return s;
  }
  // A key Magnetar accepts but does not act on yet, set to something else than its default.
  const ServiceConfiguration defaults(n);
  for (const auto& def : allSettings()) {
    if (settingEnforced(def.name)) continue;
    auto value = out.config->getString(def.name);
    auto dflt = defaults.getString(def.name);
    if (value.isOk() && dflt.isOk() && *value != *dflt) {
      out.warnings.push_back(fmt::format(
          "'{}' is accepted for compatibility but not enforced yet (set to '{}')", def.name,
          *value));
    }
  }
  return out;
}

}  // namespace magnetar::config
