#include "broker/common/listeners.h"

#include <sstream>

namespace magnetar::broker {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

}  // namespace

Result<AdvertisedListeners> parseAdvertisedListeners(const std::string& value,
                                                     const std::string& internalListenerName) {
  AdvertisedListeners out;
  std::string first;
  std::stringstream in(value);
  std::string item;
  while (std::getline(in, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    size_t colon = item.find(':');
    std::string name = colon == std::string::npos ? "" : trim(item.substr(0, colon));
    std::string url = colon == std::string::npos ? "" : trim(item.substr(colon + 1));
    if (name.empty() || url.empty()) {
      return Status::invalidArgument("advertisedListeners: '" + item +
                                     "' is not listener_name:url");
    }
    AdvertisedListener& l = out.byName[name];
    if (first.empty()) first = name;
    std::string* slot = nullptr;
    if (url.rfind("pulsar://", 0) == 0) {
      slot = &l.brokerServiceUrl;
    } else if (url.rfind("pulsar+ssl://", 0) == 0) {
      slot = &l.brokerServiceUrlTls;
    } else {
      return Status::invalidArgument("advertisedListeners: '" + url +
                                     "' is neither pulsar:// nor pulsar+ssl://");
    }
    if (!slot->empty()) {
      return Status::invalidArgument(
          "advertisedListeners: there are redundant configs for the "
          "listener `" +
          name + "`");
    }
    std::string hostPort = url.substr(url.find("://") + 3);
    size_t portSep = hostPort.rfind(':');
    if (portSep == std::string::npos || portSep == 0 || portSep + 1 == hostPort.size() ||
        hostPort.find_first_not_of("0123456789", portSep + 1) != std::string::npos) {
      return Status::invalidArgument("advertisedListeners: '" + url + "' has no host:port");
    }
    *slot = url;
  }
  if (out.byName.empty()) {
    if (!internalListenerName.empty()) {
      return Status::invalidArgument("internalListenerName '" + internalListenerName +
                                     "' is set but advertisedListeners is empty");
    }
    return out;
  }
  out.internalListenerName = internalListenerName.empty() ? first : internalListenerName;
  if (!out.byName.count(out.internalListenerName)) {
    return Status::invalidArgument(
        "the `advertisedListeners` configuration does not contain the `internalListenerName` "
        "entry '" +
        out.internalListenerName + "'");
  }
  return out;
}

}  // namespace magnetar::broker
