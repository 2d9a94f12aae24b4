// Logging: spdlog behind one name. Use MLOG_INFO("...{}", x) etc.
#pragma once

#include <spdlog/spdlog.h>

#define MLOG_TRACE(...) SPDLOG_TRACE(__VA_ARGS__)
#define MLOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define MLOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define MLOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define MLOG_ERROR(...) ::spdlog::error(__VA_ARGS__)

namespace magnetar {
// Sets up the default logger: stderr, pattern with thread name. level: trace|debug|info|warn|error.
void initLogging(const std::string& level);
// Names the calling thread (Linux comm, max 15 chars): "pulsar-io-0", "ml-worker-1", ...
void setThreadName(const std::string& name);
}  // namespace magnetar
