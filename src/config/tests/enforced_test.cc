// Every setting is either read by the broker or declared kNotEnforced in settings.def, never
// neither and never both. "Read" means its accessor is called (`.name()` or `->name()`), or it
// is bound to an option struct's field (`MAGNETAR_BIND(name, ...)` or `MAGNETAR_BIND_AS(name,
// ...)`, src/app/option_bindings.cc), in a source file under src/ outside src/config, src/client
// and the tests (MAGNETAR_SOURCE_DIR).
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/setting.h"

namespace magnetar::config {
namespace {

namespace fs = std::filesystem;

// The broker's sources: src/**/*.{h,cc} without src/config, src/client and tests directories.
std::vector<std::string> brokerSources() {
  std::vector<std::string> out;
  const fs::path root = fs::path(MAGNETAR_SOURCE_DIR) / "src";
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    if (it->is_directory()) {
      if (name == "tests" || (p.parent_path() == root && (name == "config" || name == "client"))) {
        it.disable_recursion_pending();
      }
      continue;
    }
    if (p.extension() != ".h" && p.extension() != ".cc") continue;
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    out.push_back(ss.str());
  }
  return out;
}

// The first argument of each MAGNETAR_BIND( / MAGNETAR_BIND_AS( in `text`.
std::set<std::string> boundKeys(const std::vector<std::string>& sources) {
  std::set<std::string> keys;
  const std::string macro = "MAGNETAR_BIND";
  for (const auto& text : sources) {
    for (size_t at = text.find(macro); at != std::string::npos; at = text.find(macro, at + 1)) {
      size_t i = at + macro.size();
      if (text.compare(i, 3, "_AS") == 0) i += 3;
      if (i >= text.size() || text[i] != '(') continue;
      ++i;
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      size_t end = i;
      while (end < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) {
        ++end;
      }
      keys.insert(text.substr(i, end - i));
    }
  }
  return keys;
}

bool accessorCalled(const std::vector<std::string>& sources, const std::set<std::string>& bound,
                    const std::string& key) {
  if (bound.count(key)) return true;
  const std::string dot = "." + key + "()";
  const std::string arrow = "->" + key + "()";
  for (const auto& text : sources) {
    if (text.find(dot) != std::string::npos || text.find(arrow) != std::string::npos) return true;
  }
  return false;
}

TEST(Enforced, EverySettingIsReadOrMarkedNotEnforced) {
  const auto sources = brokerSources();
  ASSERT_GT(sources.size(), 50u) << "sources not found under " << MAGNETAR_SOURCE_DIR;
  const auto bound = boundKeys(sources);
  ASSERT_TRUE(bound.count("journalSyncData")) << "no MAGNETAR_BIND(journalSyncData, ...) found";
  for (const auto& def : allSettings()) {
    const bool read = accessorCalled(sources, bound, def.name);
    if (def.enforced) {
      EXPECT_TRUE(read) << def.name
                        << " is kEnforced in settings.def but no broker code calls its accessor; "
                           "implement it or mark it kNotEnforced";
    } else {
      EXPECT_FALSE(read) << def.name
                         << " is kNotEnforced in settings.def but broker code reads it; mark it "
                            "kEnforced";
    }
  }
}

TEST(Enforced, TheFieldIsWhatSettingEnforcedAnswers) {
  EXPECT_TRUE(findSetting("loadBalancerEnabled")->enforced);
  EXPECT_FALSE(findSetting("maxTenants")->enforced);
  EXPECT_FALSE(settingEnforced("maxTenants"));
  EXPECT_TRUE(settingEnforced("dispatcherMaxReadBatchSize"));
}

}  // namespace
}  // namespace magnetar::config
