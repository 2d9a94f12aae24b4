// magnetar-perf-worker: the load generator of the perf framework. The launcher (tools/perf,
// `magnetar-perf run`) writes the resolved scenario as JSON and starts this process; see
// docs/perf.md.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "worker.h"

int main(int argc, char** argv) {
  CLI::App cli{"magnetar-perf-worker: IoT telemetry load generator (see docs/perf.md)"};
  std::string configPath, outputDir, serviceUrl;
  cli.add_option("--config", configPath, "resolved scenario (JSON)")->required();
  cli.add_option("--output", outputDir, "directory for worker-result.json and .hgrm files")
      ->required();
  cli.add_option("--service-url", serviceUrl, "overrides serviceUrl of the config");
  CLI11_PARSE(cli, argc, argv);

  std::ifstream in(configPath);
  if (!in) {
    std::cerr << "magnetar-perf-worker: cannot read " << configPath << "\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto config = magnetar::perf::WorkloadConfig::fromJson(text.str());
  if (!config) {
    std::cerr << "magnetar-perf-worker: " << config.status().toString() << "\n";
    return 2;
  }
  if (!serviceUrl.empty()) config->serviceUrl = serviceUrl;
  std::error_code ec;
  std::filesystem::create_directories(outputDir, ec);
  magnetar::perf::Worker worker(*config, outputDir);
  return worker.run();
}
