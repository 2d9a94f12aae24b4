// Topic compaction routes of /admin/v2/persistent (Pulsar's compact and compaction-status).

#include "admin/topic_route_util.h"
#include "admin/topic_routes.h"
#include "admin/topic_targets.h"
#include "broker/compaction/compaction.h"

namespace magnetar::admin {
namespace {

const std::string kCompactionPath = kTopicPath + "/compaction";

// Pulsar's LongRunningProcessStatus JSON.
json::object statusJson(const broker::TopicCompactor& c) {
  return json::object{{"status", broker::compactionStatusName(c.status())},
                      {"lastError", c.lastError()}};
}

}  // namespace

void addCompactionRoutes(Router& r, const AdminContext& ctx) {
  const AdminContext* c = &ctx;
  // A partitioned topic compacts each partition (Pulsar's internalTriggerCompaction).
  addTopicRoute(r, "PUT", kCompactionPath,
                [c](const HttpRequest& req, const PathParams&, const TopicName& name,
                    const Respond& respond) {
                  onEachTarget<Status>(
                      c, req, name, false, Status::ok(), respond,
                      [](const TopicPtr& t, const std::function<void(Status)>& reply) {
                        reply(t->compactor().trigger());
                      },
                      [respond](const std::vector<Status>& all) {
                        Status s = combineStatuses(all);
                        if (s.code() == StatusCode::kNotFound) {
                          return respond(HttpResponse::error(404, "Topic not found"));
                        }
                        if (s.code() == StatusCode::kBusy)
                          return respond(HttpResponse::error(409, s.message()));
                        respond(s ? noContent() : errorResponse(s));
                      });
                });
  addTopicRoute(
      r, "GET", kCompactionPath,
      [c](const HttpRequest&, const PathParams&, const TopicName& name, const Respond& respond) {
        withTopic(*c, name, respond, [respond](const TopicPtr& t) {
          respond(jsonResponse(statusJson(t->compactor())));
        });
      });
}

}  // namespace magnetar::admin
