// The seam between the `magnetar` command line and the broker: main() validates the
// configuration, logs the I/O thread line, then calls runBroker().
#pragma once

#include <memory>
#include <string>

#include "config/service_configuration.h"

namespace magnetar::app {

struct BrokerOptions {
  std::shared_ptr<config::ServiceConfiguration> config;  // validated, never null
  bool standalone = true;  // `magnetar standalone` (embedded storage) vs `magnetar broker`
  // When set, "brokerServicePort=N\nwebServicePort=M\n" (the bound ports) is written here once
  // both listeners accept, via a temporary file and rename (tests poll for it).
  std::string portsFile;
};

// Runs the broker until SIGTERM or SIGINT and returns the process exit code: 0 after a clean
// stop, 1 if a listener could not be opened. Logs "magnetar listening: brokerServicePort=N
// webServicePort=M" once both listen.
//
// Opens storage (src/storage), then serves the BrokerService (src/broker) on numIOThreads threads
// `pulsar-io-<i>` (src/net) and the admin REST and /metrics routes (src/admin).
int runBroker(const BrokerOptions& options);

}  // namespace magnetar::app
