// MQTT topic names and filters, and how they map to Pulsar topics (MoP's default mapping:
// streamnative/mop PulsarTopicUtils). No I/O, no broker dependency. Thread: stateless.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace magnetar::mqtt {

// Java's URLEncoder.encode(s, UTF-8), which MoP applies to the MQTT topic: A-Z a-z 0-9 and
// ".-*_" stay, a space becomes '+', every other byte %XX (upper-case hex). "a/b c" -> "a%2Fb+c".
std::string urlEncode(std::string_view s);
// Java's URLDecoder.decode: '+' -> space, %XX -> the byte. kInvalidArgument on a bad escape.
Result<std::string> urlDecode(std::string_view s);

// The Pulsar topic an MQTT topic name is published to, as MoP's getPulsarTopicName:
// "persistent://t/n/rest" or "non-persistent://t/n/rest" names a topic directly (rest URL-encoded);
// anything else becomes {domain}://{tenant}/{ns}/{urlEncode(topic)}. domain: "persistent" or
// "non-persistent" (MoP's defaultTopicDomain). kInvalidArgument for a direct name with fewer
// than three parts.
Result<std::string> pulsarTopicName(std::string_view mqttTopic, std::string_view tenant,
                                    std::string_view ns, std::string_view domain);

// A topic filter is valid (MQTT 3.1.1/5 section 4.7): not empty, '#' only as the whole last
// level, '+' only as a whole level.
bool validTopicFilter(std::string_view filter);
// The filter has a '+' or '#' (MoP's isRegexFilter).
bool isWildcardFilter(std::string_view filter);
// Whether the MQTT topic name matches the filter (section 4.7: "+" one level, "#" this level
// and every one below, so "a/#" matches "a"; a topic starting with '$' is not matched by a
// filter starting with a wildcard).
bool topicMatches(std::string_view filter, std::string_view topic);

// A shared subscription's filter (MQTT 5 4.8.2): "$share/{group}/{filter}".
struct SharedFilter {
  std::string group;   // the ShareName: the Pulsar Shared subscription's name (MoP's mapping)
  std::string filter;  // the topic filter the group subscribes to
};
// nullopt when `f` is not a shared subscription (no "$share/" prefix); kInvalidArgument when it
// is one but malformed (MQTT-4.8.2-1/-2: an empty ShareName, one with '+' or '#', no '/' and
// topic filter after it, or an invalid topic filter).
Result<std::optional<SharedFilter>> parseSharedFilter(std::string_view f);
// The topic filter that selects topics: a shared subscription's inner filter, else `f` itself.
std::string_view selectingFilter(std::string_view f);

}  // namespace magnetar::mqtt
