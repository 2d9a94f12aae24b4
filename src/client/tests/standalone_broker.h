// StandaloneBroker: runs `magnetar standalone` as a child process on free ports in a temporary
// working directory, for the client integration tests.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace magnetar::client::testing {

// Thread: one test thread.
class StandaloneBroker {
 public:
  // The broker binary: $MAGNETAR_BIN, else the build tree's (MAGNETAR_BIN_DEFAULT).
  static std::string binaryPath();
  static bool binaryExists();

  explicit StandaloneBroker(std::vector<std::string> extraSettings = {});
  ~StandaloneBroker();  // stop() and remove the working directory

  // Starts the broker (brokerServicePort = port, 0 = any free one) and waits up to 30 s until it
  // listens. The working directory (and so the data) survives stop()/start().
  Status start(int port = 0);
  // SIGTERM, then SIGKILL after 15 s.
  void stop();
  bool running() const { return pid_ > 0; }
  // OK while the process runs; otherwise how it ended (exit code or signal) and its log tail.
  Status checkAlive();

  int port() const { return port_; }
  std::string serviceUrl() const { return "pulsar://127.0.0.1:" + std::to_string(port_); }
  // Last lines of the broker's log.
  std::string logTail(size_t lines = 60) const;

 private:
  std::vector<std::string> extra_;
  std::string workdir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace magnetar::client::testing
