// magnetar-admin's command plumbing: a leaf command turns its parsed options into one REST call.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace magnetar::admintool {

// One REST request. raw: print the body as is (and the X-Pulsar-* headers), not as JSON.
struct Call {
  Call() = default;
  Call(std::string m, std::string p, std::string b = "")
      : method(std::move(m)), path(std::move(p)), body(std::move(b)) {}
  std::string method = "GET";
  std::string path;
  std::string body;
  std::string contentType = "application/json";
  bool raw = false;
};

// Set by the chosen leaf command's callback; main() sends it.
struct Pending {
  std::function<Call()> build;
};

// Thrown by builders for bad option values (printed, exit 2).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "/admin/v2/persistent/t/ns/x" for "persistent://t/ns/x", "t/ns/x" or "x" (public/default).
std::string topicPath(const std::string& topic);
// "/admin/v2/namespaces/t/ns" for "t/ns".
std::string namespacePath(const std::string& ns);
// "10m" -> 600 (s, m, h, d, w suffixes; no suffix: seconds); "-1" -> -1.
int64_t parseDurationSeconds(const std::string& text);
// "10G" -> 10240 MB (K, M, G, T suffixes; no suffix: bytes); "-1" -> -1.
int64_t parseSizeMB(const std::string& text);
// "10G" -> bytes; "-1" -> -1.
int64_t parseSizeBytes(const std::string& text);
// A JSON string literal of s.
std::string jsonString(const std::string& s);

// Adds a leaf subcommand whose callback stores `build` into pending.
CLI::App* leaf(CLI::App* parent, const std::string& name, const std::string& help, Pending& pending,
               std::function<Call()> build);

void addTopicCommands(CLI::App& app, Pending& pending);
void addNamespaceCommands(CLI::App& app, Pending& pending);
void addTenantClusterBrokerCommands(CLI::App& app, Pending& pending);

}  // namespace magnetar::admintool
