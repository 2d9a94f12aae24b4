#include "admin/topic_route_util.h"

#include <utility>
#include <vector>

#include "admin/topic_routes.h"
#include "admin/topic_targets.h"

namespace magnetar::admin {

std::string subscriptionParam(const PathParams& p) {
  const std::string& s = p.at("subscription");
  return codecDecode(s).value_or(s);
}

void addRouteGroups(Router& r, const AdminContext& ctx, std::initializer_list<RouteGroup> groups) {
  for (RouteGroup add : groups) add(r, &ctx);
}

void addNumberedTopicRoute(Router& r, const char* method, const std::string& pattern,
                           const char* param, const char* what, NumberedTopicHandler h) {
  addTopicRoute(r, method, pattern,
                [param, what, h = std::move(h)](const HttpRequest& req, const PathParams& p,
                                                const TopicName& name, const Respond& respond) {
                  const std::string& text = p.at(param);
                  auto n = parseDecimal(text);
                  if (!n) return respond(HttpResponse::error(412, std::string(what) + ": " + text));
                  h(req, p, name, *n, respond);
                });
}

void addMessageIdTopicRoute(Router& r, const char* method, const std::string& pattern,
                            MessageIdTopicHandler h) {
  addTopicRoute(r, method, pattern,
                [h = std::move(h)](const HttpRequest& req, const PathParams& p,
                                   const TopicName& name, const Respond& respond) {
                  HttpResponse err;
                  auto id = parseMessageIdBody(req, &err);
                  if (!id) return respond(err);
                  h(req, p, name, *id, respond);
                });
}

bool refusedPartitioned(const AdminContext* ctx, const TopicName& name, const char* message,
                        const Respond& respond) {
  Result<int> n = ctx->service.partitionsOf(name, false);
  if (n.isOk() && *n > 0) {
    respond(HttpResponse::error(405, message));
    return true;
  }
  return false;
}

void onEachSubscriptionTarget(const AdminContext* ctx, const HttpRequest& req, const PathParams& p,
                              const TopicName& name, const Respond& respond, SubscriptionOp op) {
  onEachTarget<Status>(
      ctx, req, name, false, Status::notFound(""), respond,
      [sub = subscriptionParam(p), op = std::move(op)](const TopicPtr& t, StatusCb reply) {
        op(t, sub, std::move(reply));
      },
      answerStatuses(respond, "Subscription not found"));
}

void answerEntry(const TopicPtr& t, Position pos, const Respond& respond) {
  t->ledger().asyncReadEntries(pos, 1, 1,
                               [t, pos, respond](const Status& s, std::vector<storage::Entry> es) {
                                 if (!s.isOk()) return respond(errorResponse(s));
                                 if (es.empty() || es.front().position != pos) {
                                   return respond(HttpResponse::error(404, "Message not found"));
                                 }
                                 respond(messageResponse(es.front()));
                               });
}

}  // namespace magnetar::admin
