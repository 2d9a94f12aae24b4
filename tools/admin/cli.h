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

// Adds leaves to `parent` whose requests are built from one shared Opts, each taking the required
// positional argument `argName` into (*opts).*arg (a namespace, a topic).
template <typename Opts>
struct OptsLeaves {
  CLI::App* parent;
  Pending& pending;
  std::shared_ptr<Opts> opts;
  std::string Opts::*arg;
  const char* argName;
  const char* argHelp;
  std::string (*path)(const std::string&);  // the REST path of the argument (namespacePath)

  // A leaf whose request is build(*opts).
  CLI::App* operator()(const std::string& name, const std::string& help,
                       std::function<Call(const Opts&)> build) const {
    CLI::App* c = leaf(parent, name, help, pending, [o = opts, build] { return build(*o); });
    c->add_option(argName, (*opts).*arg, argHelp)->required();
    return c;
  }
  // A leaf whose request is `method path(argument) + suffix`, without a body.
  CLI::App* call(const std::string& name, const std::string& help, const char* method,
                 const char* suffix) const {
    return (*this)(name, help, [a = arg, p = path, method, suffix](const Opts& x) {
      return Call{method, p(x.*a) + suffix};
    });
  }
};

// pulsar-admin's DispatchRate options, kept as given and checked by dispatchRateBody.
struct DispatchRateOpts {
  std::string msg = "-1", bytes = "-1", period = "1";  // pulsar-admin's defaults
  bool relative = false;
};
// Adds --msg-dispatch-rate, --byte-dispatch-rate, --dispatch-rate-period (and, with relative,
// --relative-to-publish-rate) to c.
void addDispatchRateOptions(CLI::App* c, DispatchRateOpts& o, bool relative);
// Pulsar's DispatchRateImpl JSON; UsageError for a rate below -1 or not a whole number, or a
// period below 1 s.
std::string dispatchRateBody(const DispatchRateOpts& o);

void addClusterCommands(CLI::App& app, Pending& pending);
void addTopicCommands(CLI::App& app, Pending& pending);
void addNamespaceCommands(CLI::App& app, Pending& pending);
void addTenantClusterBrokerCommands(CLI::App& app, Pending& pending);

}  // namespace magnetar::admintool
