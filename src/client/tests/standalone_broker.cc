#include "client/tests/standalone_broker.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#ifndef MAGNETAR_BIN_DEFAULT
#define MAGNETAR_BIN_DEFAULT "magnetar"
#endif

namespace magnetar::client::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {
bool canConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}
}  // namespace

std::string StandaloneBroker::binaryPath() {
  const char* env = ::getenv("MAGNETAR_BIN");
  return env && *env ? env : MAGNETAR_BIN_DEFAULT;
}

bool StandaloneBroker::binaryExists() { return ::access(binaryPath().c_str(), X_OK) == 0; }

StandaloneBroker::StandaloneBroker(std::vector<std::string> extraSettings)
    : extra_(std::move(extraSettings)) {
  char tmpl[] = "/tmp/magnetar-client-it-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  workdir_ = dir ? dir : "/tmp";
}

StandaloneBroker::~StandaloneBroker() {
  stop();
  if (workdir_ != "/tmp" && !::getenv("KEEP_BROKER_DIR")) {
    std::error_code ec;
    fs::remove_all(workdir_, ec);
  }
}

Status StandaloneBroker::start(int port) {
  if (running()) return Status::ok();
  std::string portsFile = workdir_ + "/ports";
  std::error_code ec;
  fs::remove(portsFile, ec);
  std::vector<std::string> args = {
      binaryPath(), "standalone",
      "--set", "brokerServicePort=" + std::to_string(port),
      "--set", "webServicePort=0",
      "--ports-file", portsFile,
      "--set", "journalDirectory=" + workdir_ + "/journal",
      "--set", "metadataStoreUrl=rocksdb:" + workdir_ + "/metadata",
  };
  for (const auto& kv : extra_) {
    args.push_back("--set");
    args.push_back(kv);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string logPath = workdir_ + "/magnetar.log";
  int logFd = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (logFd < 0) return Status::ioError("cannot open " + logPath);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(logFd);
    return Status::ioError("fork failed");
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    if (::chdir(workdir_.c_str()) != 0) ::_exit(126);
    ::dup2(logFd, 1);
    ::dup2(logFd, 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(logFd);
  pid_ = pid;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Status::internal("magnetar exited during start:\n" + logTail());
    }
    std::ifstream in(portsFile);
    std::string line;
    int brokerPort = 0;
    bool web = false;
    while (std::getline(in, line)) {
      if (line.rfind("brokerServicePort=", 0) == 0) brokerPort = std::stoi(line.substr(18));
      if (line.rfind("webServicePort=", 0) == 0) web = true;
    }
    if (brokerPort > 0 && web && canConnect(brokerPort)) {
      port_ = brokerPort;
      return Status::ok();
    }
    std::this_thread::sleep_for(50ms);
  }
  stop();
  return Status::error(StatusCode::kTimeout, "magnetar did not listen within 30 s:\n" + logTail());
}

void StandaloneBroker::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + 15s;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(20ms);
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

Status StandaloneBroker::checkAlive() {
  if (pid_ <= 0) return Status::closed("broker not started");
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return Status::ok();
  pid_ = -1;
  std::string how = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                        : "exited with " + std::to_string(WEXITSTATUS(status));
  return Status::internal("magnetar " + how + "\n" + logTail());
}

std::string StandaloneBroker::logTail(size_t lines) const {
  std::ifstream in(workdir_ + "/magnetar.log");
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(line);
    if (tail.size() > lines) tail.pop_front();
  }
  std::ostringstream out;
  for (const auto& l : tail) out << l << "\n";
  return out.str();
}

}  // namespace magnetar::client::testing
