// magnetar-admin: the admin REST API from a shell, shaped like Pulsar's `pulsar-admin`.
//   magnetar-admin [--admin-url http://host:8080] GROUP COMMAND [ARGS...]
//   groups: clusters, tenants, namespaces, topics, brokers (see --help of each)
// Prints the JSON answer (pretty), nothing for 204. Exit status: 0 success, 1 error answer or
// broker unreachable (the reason on stderr), 2 bad usage.
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "http_client.h"

namespace magnetar::admintool {
namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

int64_t parseNumberWithSuffix(const std::string& text, const std::string& suffixes,
                              const int64_t* factors, const char* what) {
  if (text == "-1") return -1;
  size_t end = 0;
  int64_t n = 0;
  try {
    n = std::stoll(text, &end);
  } catch (const std::exception&) {
    throw UsageError(std::string("bad ") + what + ": " + text);
  }
  if (n < 0) throw UsageError(std::string("bad ") + what + ": " + text);
  std::string rest = text.substr(end);
  if (rest.empty()) return n * factors[0];
  size_t i = rest.size() == 1 ? suffixes.find(static_cast<char>(std::toupper(rest[0])))
                              : std::string::npos;
  if (i == std::string::npos) throw UsageError(std::string("bad ") + what + ": " + text);
  return n * factors[i + 1];
}

void printResult(const Call& call, const HttpResult& r) {
  if (call.raw) {
    for (const auto& [name, value] : r.headers) {
      if (name.rfind("X-Pulsar-", 0) == 0) std::cout << name << ": " << value << "\n";
    }
    std::cout << r.body << "\n";
    return;
  }
  if (r.body.empty()) return;
  auto j = nlohmann::ordered_json::parse(r.body, nullptr, false);  // keep the broker's order
  if (j.is_discarded()) {
    std::cout << r.body << "\n";
  } else {
    std::cout << j.dump(2) << "\n";
  }
}

std::string reasonOf(const HttpResult& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("reason") && j["reason"].is_string()) {
    return j["reason"].get<std::string>();
  }
  return r.body.empty() ? "(no reason given)" : r.body;
}

}  // namespace

std::string topicPath(const std::string& topic) {
  std::string rest = topic;
  const std::string persistent = "persistent://";
  if (rest.rfind(persistent, 0) == 0) {
    rest = rest.substr(persistent.size());
  } else if (rest.find("://") != std::string::npos) {
    throw UsageError("only persistent:// topics are supported: " + topic);
  }
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t slash; (slash = rest.find('/', start)) != std::string::npos; start = slash + 1) {
    parts.push_back(rest.substr(start, slash - start));
  }
  parts.push_back(rest.substr(start));
  if (parts.size() == 1) parts = {"public", "default", parts[0]};
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() || parts[2].empty()) {
    throw UsageError("bad topic name (persistent://tenant/namespace/topic): " + topic);
  }
  return "/admin/v2/persistent/" + encodeSegment(parts[0]) + "/" + encodeSegment(parts[1]) + "/" +
         encodeSegment(parts[2]);
}

std::string namespacePath(const std::string& ns) {
  size_t slash = ns.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == ns.size() ||
      ns.find('/', slash + 1) != std::string::npos) {
    throw UsageError("bad namespace (tenant/namespace): " + ns);
  }
  return "/admin/v2/namespaces/" + encodeSegment(ns.substr(0, slash)) + "/" +
         encodeSegment(ns.substr(slash + 1));
}

int64_t parseDurationSeconds(const std::string& text) {
  static const int64_t kFactors[] = {1, 1, 60, 3600, 86400, 604800};
  return parseNumberWithSuffix(text, "SMHDW", kFactors, "duration");
}

int64_t parseSizeBytes(const std::string& text) {
  static const int64_t kFactors[] = {1, 1LL << 10, 1LL << 20, 1LL << 30, 1LL << 40};
  return parseNumberWithSuffix(text, "KMGT", kFactors, "size");
}

int64_t parseSizeMB(const std::string& text) {
  int64_t bytes = parseSizeBytes(text);
  return bytes < 0 ? -1 : bytes / (1 << 20);
}

std::string jsonString(const std::string& s) { return nlohmann::json(s).dump(); }

CLI::App* leaf(CLI::App* parent, const std::string& name, const std::string& help, Pending& pending,
               std::function<Call()> build) {
  CLI::App* c = parent->add_subcommand(name, help);
  c->callback([&pending, build = std::move(build)] { pending.build = build; });
  return c;
}

}  // namespace magnetar::admintool

int main(int argc, char** argv) {
  using namespace magnetar::admintool;
  CLI::App app{"magnetar-admin: administer a Magnetar (or Pulsar) broker over its REST API"};
  const char* envUrl = std::getenv("MAGNETAR_ADMIN_URL");
  std::string adminUrl = envUrl ? envUrl : "http://localhost:8080";
  app.add_option("--admin-url", adminUrl,
                 "Broker web service URL (default $MAGNETAR_ADMIN_URL or http://localhost:8080)");
  app.require_subcommand(1);
  Pending pending;
  addTenantClusterBrokerCommands(app, pending);
  addNamespaceCommands(app, pending);
  addTopicCommands(app, pending);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  if (!pending.build) {
    std::cerr << app.help();
    return kExitUsage;
  }
  Call call;
  try {
    call = pending.build();
  } catch (const UsageError& e) {
    std::cerr << "magnetar-admin: " << e.what() << "\n";
    return kExitUsage;
  }
  HttpClient http(adminUrl);
  if (!http.valid()) {
    std::cerr << "magnetar-admin: --admin-url must be http://host:port, got " << adminUrl << "\n";
    return kExitUsage;
  }
  HttpResult r = http.request(call.method, call.path, call.body, call.contentType);
  if (!r.ok) {
    std::cerr << "magnetar-admin: " << r.error << "\n";
    return kExitError;
  }
  if (r.status >= 300) {
    std::cerr << reasonOf(r) << "\n\nReason: HTTP " << r.status << "\n";
    return kExitError;
  }
  printResult(call, r);
  return 0;
}
