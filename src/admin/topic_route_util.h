// What the /admin/v2/persistent route files (topic_routes.cc, subscription_routes.cc,
// message_routes.cc, compaction_routes.cc) share: their path patterns, the registration of a
// topic route whose path ends in a number, and the checks and answers several routes give.
// Include only from those files (it brings short names into magnetar::admin).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

#include "admin/rest_util.h"
#include "admin/router.h"

namespace magnetar::admin {

namespace json = boost::json;
using broker::TopicName;
using storage::Position;
using TopicPtr = std::shared_ptr<broker::PersistentTopic>;
using StatusCb = std::function<void(Status)>;

// Pulsar's PersistentTopics paths: a topic, and one subscription of it.
inline const std::string kTopicPath = "/admin/v2/persistent/{tenant}/{namespace}/{topic}";
inline const std::string kSubPath = kTopicPath + "/subscription/{subscription}";

// The path's {subscription} as Pulsar's PersistentTopics reads it: the path-decoded text decoded
// once more by Codec.decode (URLDecoder: '+' a space, %XX a byte), since Pulsar's admin client
// sends Codec.encode(name) ("my sub" arrives as "my+sub"). A malformed %-escape is kept as sent.
std::string subscriptionParam(const PathParams& p);

// A function adding a group of routes; addRouteGroups adds each in the order given.
using RouteGroup = void (*)(Router&, const AdminContext*);
void addRouteGroups(Router& r, const AdminContext& ctx, std::initializer_list<RouteGroup> groups);

// Registers `method pattern` (addTopicRoute: 412 on a bad topic name first) whose path param
// `param` must be a decimal number (parseDecimal: digits only, at most 18): 412 "<what>: <text>"
// otherwise (Pulsar's answer for a bad position, timestamp, count or expiry time), else
// h(req, p, name, number, respond).
using NumberedTopicHandler = std::function<void(const HttpRequest&, const PathParams&,
                                                const TopicName&, int64_t, const Respond&)>;
void addNumberedTopicRoute(Router& r, const char* method, const std::string& pattern,
                           const char* param, const char* what, NumberedTopicHandler h);

// Registers `method pattern` (addTopicRoute) whose body is a MessageId (parseMessageIdBody: 400
// or 412 answered before h runs).
using MessageIdTopicHandler = std::function<void(
    const HttpRequest&, const PathParams&, const TopicName&, const MessageIdBody&, const Respond&)>;
void addMessageIdTopicRoute(Router& r, const char* method, const std::string& pattern,
                            MessageIdTopicHandler h);

// Answers 405 with `message` and returns true when `name` is a partitioned topic (Pulsar refuses
// these single-topic operations on one); false when the caller may go on.
bool refusedPartitioned(const AdminContext* ctx, const TopicName& name, const char* message,
                        const Respond& respond);

// Runs op(topic, sub, reply) for the path's {subscription} on each topic `name` names
// (onEachTarget: every partition of a partitioned topic, a missing one counting as kNotFound);
// answers answerStatuses(respond, "Subscription not found").
using SubscriptionOp = std::function<void(const TopicPtr&, const std::string& sub, StatusCb)>;
void onEachSubscriptionTarget(const AdminContext* ctx, const HttpRequest& req, const PathParams& p,
                              const TopicName& name, const Respond& respond, SubscriptionOp op);

// Reads the entry at pos on t's executor and answers it (messageResponse); 404 "Message not
// found" when no entry is stored there, the read's error otherwise.
void answerEntry(const TopicPtr& t, Position pos, const Respond& respond);

}  // namespace magnetar::admin
