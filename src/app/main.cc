// magnetar: the broker binary. Subcommands: standalone, broker, config show, config docs,
// tokens, bookkeeper.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "app/bookkeeper_cli.h"
#include "app/cluster_cli.h"
#include "app/run_broker.h"
#include "app/tokens_cli.h"
#include "base/logging.h"
#include "config/loader.h"
#include "config/render.h"

namespace magnetar::app {
namespace {

// Exit codes: 0 ok, 1 runtime failure (e.g. a port in use), 2 bad configuration or usage.
constexpr int kExitConfigError = 2;

struct CommonOptions {
  std::string configFile;
  int availableProcessors = 0;  // 0 = detect
  std::vector<std::string> sets;
};

void addCommonOptions(CLI::App* cmd, CommonOptions& o) {
  cmd->add_option("--config,-c", o.configFile, "Config file (Pulsar's key=value format)");
  cmd->add_option("--available-processors", o.availableProcessors,
                  "Processors to size thread pools for, instead of the detected count "
                  "(like the JVM's -XX:ActiveProcessorCount)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--set", o.sets, "Override a setting: --set KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
}

config::LoadOptions toLoadOptions(const CommonOptions& o) {
  return config::LoadOptions{o.configFile, o.sets, o.availableProcessors};
}

int configShow(const CommonOptions& o) {
  auto loaded = config::loadConfiguration(toLoadOptions(o));
  if (!loaded) {
    std::cerr << "magnetar: " << loaded.status().message() << "\n";
    return kExitConfigError;
  }
  for (const auto& w : loaded->warnings) std::cerr << "magnetar: warning: " << w << "\n";
  for (const auto& [key, value] : loaded->config->toStringMap()) {
    std::cout << key << "=" << value << "\n";
  }
  return 0;
}

int configDocs(const std::string& format) {
  if (format == "markdown") {
    std::cout << config::renderDocsTable();
  } else {
    std::cout << config::renderBrokerConf();
  }
  return 0;
}

int serve(CommonOptions o, bool standalone, const std::string& portsFile) {
  if (o.configFile.empty()) {
    // Without --config: conf/standalone.conf or conf/broker.conf under the working directory,
    // when present; otherwise the built-in defaults.
    std::string fallback = standalone ? "conf/standalone.conf" : "conf/broker.conf";
    std::error_code ec;
    if (std::filesystem::exists(fallback, ec)) o.configFile = fallback;
  }
  auto loaded = config::loadConfiguration(toLoadOptions(o));
  if (!loaded) {
    MLOG_ERROR("Invalid configuration: {}", loaded.status().message());
    return kExitConfigError;
  }
  for (const auto& w : loaded->warnings) MLOG_WARN("{}", w);
  MLOG_INFO("Configuration: {}", o.configFile.empty() ? "built-in defaults" : o.configFile);
  auto io = loaded->config->ioThreads();
  MLOG_INFO("Running {} I/O threads (pulsar-io): {}", io.value, io.reason);
  return runBroker(BrokerOptions{loaded->config, standalone, portsFile});
}

int run(int argc, char** argv) {
  CLI::App app{"Magnetar: a message broker that speaks the Apache Pulsar protocol", "magnetar"};
  app.require_subcommand(1);
  app.fallthrough();  // --log-level also after the subcommand
  std::string logLevel = "info";
  app.add_option("--log-level", logLevel, "trace, debug, info, warn or error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));

  CommonOptions standaloneOpts, brokerOpts, showOpts;
  std::string portsFile;
  auto* standalone =
      app.add_subcommand("standalone", "Run a standalone broker with embedded storage");
  addCommonOptions(standalone, standaloneOpts);
  standalone->add_option("--ports-file", portsFile, "Write the bound ports here once listening");
  auto* broker = app.add_subcommand("broker", "Run a broker");
  addCommonOptions(broker, brokerOpts);
  broker->add_option("--ports-file", portsFile, "Write the bound ports here once listening");

  auto* configCmd = app.add_subcommand("config", "Inspect the configuration registry");
  configCmd->require_subcommand(1);
  auto* show = configCmd->add_subcommand(
      "show", "Print the effective configuration, key=value sorted by key");
  addCommonOptions(show, showOpts);
  std::string docsFormat = "conf";
  auto* docs = configCmd->add_subcommand(
      "docs", "Print conf/broker.conf (--format conf) or the docs table (--format markdown)");
  docs->add_option("--format", docsFormat, "conf or markdown")
      ->check(CLI::IsMember({"conf", "markdown"}));

  auto runTokens = addTokensCommand(app);
  auto runBookKeeper = addBookKeeperCommand(app);
  auto runInitCluster = addInitializeClusterMetadataCommand(app);
  auto runInitTxn = addInitializeTransactionCoordinatorMetadataCommand(app);

  // Pulsar's tool spells some options "-sk", "-pk": CLI11 takes them as "--sk", "--pk".
  std::vector<std::string> args(argv + 1, argv + argc);
  for (auto& a : args) {
    if (a == "-sk" || a == "-pk" || a == "-hs" || a == "-md" || a == "-cms" || a == "-uw" ||
        a == "-tw" || a == "-ub" || a == "-tb" || a == "-bn" || a == "-cs") {
      a.insert(0, "-");
    }
  }
  rewriteBookKeeperShellFlags(args);
  std::reverse(args.begin(), args.end());  // CLI11 takes the vector form reversed
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitConfigError;
  }

  if (int code = runTokens(); code >= 0) return code;
  if (int code = runInitCluster(); code >= 0) return code;
  if (int code = runInitTxn(); code >= 0) return code;
  if (show->parsed()) return configShow(showOpts);
  if (docs->parsed()) return configDocs(docsFormat);
  initLogging(logLevel);
  if (int code = runBookKeeper(); code >= 0) return code;
  if (standalone->parsed()) return serve(standaloneOpts, true, portsFile);
  if (broker->parsed()) return serve(brokerOpts, false, portsFile);
  return kExitConfigError;
}

}  // namespace
}  // namespace magnetar::app

int main(int argc, char** argv) {
  // A peer that closed its socket must cost that connection a write error (EPIPE), never the
  // process: broker sockets are written from many threads with writev, which has no
  // MSG_NOSIGNAL.
  std::signal(SIGPIPE, SIG_IGN);
  return magnetar::app::run(argc, argv);
}
