#include "metadata/store.h"

namespace magnetar::metadata {

Status validatePath(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return Status::invalidArgument("metadata path must start with '/': '" + path + "'");
  }
  if (path == "/") return Status::ok();
  if (path.back() == '/') {
    return Status::invalidArgument("metadata path must not end with '/': '" + path + "'");
  }
  if (path.find("//") != std::string::npos) {
    return Status::invalidArgument("metadata path has an empty component: '" + path + "'");
  }
  if (path.find('\0') != std::string::npos) {
    return Status::invalidArgument("metadata path holds a NUL byte");
  }
  return Status::ok();
}

std::string parentPath(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == 0 || slash == std::string::npos) return "/";
  return path.substr(0, slash);
}

}  // namespace magnetar::metadata
