#include "base/logging.h"

#include <pthread.h>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace magnetar {

void initLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("magnetar");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%t] %v");
  spdlog::set_level(spdlog::level::from_str(level));
}

void setThreadName(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace magnetar
