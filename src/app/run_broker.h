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
// First cut (issue 2): numIOThreads threads `pulsar-io-<i>`, each running one io_context;
// accepts binary-protocol connections round-robin onto them and holds them (no protocol yet);
// the HTTP server (src/admin) answers the health and configuration routes. The broker wiring
// (src/net EventLoopGroup, src/broker, src/storage) replaces the inside of this function.
int runBroker(const BrokerOptions& options);

}  // namespace magnetar::app
