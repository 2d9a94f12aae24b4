// Loading the configuration: built-in defaults < config file < --set KEY=VALUE.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "config/service_configuration.h"

namespace magnetar::config {

// One `key=value` line of a config file.
struct ConfigLine {
  std::string key;
  std::string value;  // trimmed; may be empty (= the default)
  int line = 0;       // 1-based
};

// Parses Pulsar's config format: `key=value` per line, split at the first '='; key and value
// trimmed; blank lines and lines whose first non-blank character is '#' are skipped ('#' later
// on a line is part of the value, as in Java properties). A line without '=' is skipped with a
// warning "<file>:<line>: ...". Unknown keys are kept: loadConfiguration() warns about them.
std::vector<ConfigLine> parseConfigText(std::string_view text, std::string_view fileName,
                                        std::vector<std::string>* warnings);

struct LoadOptions {
  std::string configFile;              // "" = built-in defaults only
  std::vector<std::string> overrides;  // "KEY=VALUE" from --set, applied in order after the file
  int availableProcessors = 0;         // 0 = detect with availableProcessors()
};

struct LoadedConfiguration {
  std::shared_ptr<ServiceConfiguration> config;
  // Things worth logging that did not stop the load: "conf/broker.conf:7: unknown key 'foo'
  // (ignored)", duplicates, lines without '='. The caller logs them.
  std::vector<std::string> warnings;
};

// Builds the effective configuration. Errors (InvalidArgument/NotFound/IoError): an unreadable
// file, a bad value ("invalid value 'abc' for numIOThreads at conf/x.conf:3: not an integer"), a
// malformed or unknown key in --set.
Result<LoadedConfiguration> loadConfiguration(const LoadOptions& options);

}  // namespace magnetar::config
