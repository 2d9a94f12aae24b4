// Advertised listeners (Pulsar's advertisedListeners / internalListenerName): the addresses a
// broker gives clients per listener name, chosen by LOOKUP's advertised_listener_name.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_COMMON)
#error "broker/common is not below this broker part (src/broker/README.md)"
#endif

#include <map>
#include <string>

#include "base/status.h"

namespace magnetar::broker {

struct AdvertisedListener {
  std::string brokerServiceUrl;     // pulsar://host:port, "" when the listener has none
  std::string brokerServiceUrlTls;  // pulsar+ssl://host:port, "" when none
};

struct AdvertisedListeners {
  std::map<std::string, AdvertisedListener> byName;
  std::string internalListenerName;  // "" when byName is empty
};

// Parses `advertisedListeners` ("internal:pulsar://10.0.0.1:6650,external:pulsar://h:6650,
// external:pulsar+ssl://h:6651") with Pulsar's rules (MultipleListenerValidator): each entry is
// name:url with a pulsar:// or pulsar+ssl:// url, at most one of each per name, and
// `internalListenerName` must be one of the names (empty: the first one listed). An empty value
// means no listeners. Errors: kInvalidArgument with the offending entry.
Result<AdvertisedListeners> parseAdvertisedListeners(const std::string& value,
                                                     const std::string& internalListenerName);

}  // namespace magnetar::broker
