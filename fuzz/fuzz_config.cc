// fuzz_config: the config file parser and loader (src/config) on arbitrary file contents.
// Invariants: parseConfigText gives trimmed, non-multi-line keys/values with increasing line
// numbers; loadConfiguration either fails with a Status or yields a configuration whose full
// text form (toStringMap) loads again to the same map (each value reads back as itself).
#include <cstdint>
#include <string>
#include <string_view>

#include "config/loader.h"
#include "fuzz_util.h"

using namespace magnetar;

namespace {

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

void checkLines(std::string_view text) {
  std::vector<std::string> warnings;
  auto lines = config::parseConfigText(text, "fuzz.conf", &warnings);
  int last = 0;
  for (const auto& l : lines) {
    fuzz::check(l.line > last, "line numbers must increase");
    last = l.line;
    fuzz::check(l.key.find('\n') == std::string::npos && l.value.find('\n') == std::string::npos,
                "key/value spans lines");
    fuzz::check(l.key.find('=') == std::string::npos, "key contains '='");
    for (const std::string* s : {&l.key, &l.value}) {
      fuzz::check(s->empty() || (!isSpace(s->front()) && !isSpace(s->back())), "untrimmed: " + *s);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::quietLogs();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  checkLines(text);

  static fuzz::TempDir dir;
  std::string path = dir.path() + "/fuzz.conf";
  fuzz::writeFile(path, text);
  config::LoadOptions opts;
  opts.configFile = path;
  opts.availableProcessors = 4;  // fixed: thread-count defaults must not depend on the machine
  auto loaded = config::loadConfiguration(opts);
  if (!loaded.isOk()) {
    fuzz::check(!loaded.status().message().empty(), "error without a message");
    return 0;
  }
  const auto& cfg = *loaded->config;
  (void)cfg.ioThreads();
  auto first = cfg.toStringMap();

  // Round trip: the effective configuration written out as a file loads to the same values.
  std::string again;
  for (const auto& [k, v] : first) again += k + "=" + v + "\n";
  fuzz::writeFile(path, again);
  auto reloaded = config::loadConfiguration(opts);
  if (!reloaded.isOk()) fuzz::fail("effective config does not load: " + reloaded.status().toString());
  auto second = reloaded->config->toStringMap();
  for (const auto& [k, v] : first) {
    auto it = second.find(k);
    fuzz::check(it != second.end() && it->second == v,
                "round trip changed " + k + ": '" + v + "' -> '" +
                    (it == second.end() ? std::string("<missing>") : it->second) + "'");
  }
  return 0;
}
