// Subscription and message routes of /admin/v2/persistent (see topic_routes.h).
#include <fmt/format.h>

#include <set>

#include "admin/stats_json.h"
#include "admin/topic_route_util.h"
#include "admin/topic_routes.h"
#include "admin/topic_targets.h"
#include "broker/service/server_cnx.h"
#include "protocol/frame.h"

namespace magnetar::admin {
namespace {

using broker::PersistentTopic;

// Closes every consumer of `sub` (they reconnect), as Pulsar does after a cursor reset.
void disconnectConsumers(PersistentTopic& t, const std::string& sub) {
  broker::Subscription* s = t.subscription(sub);
  if (!s || !s->dispatcher()) return;
  for (auto& c : s->dispatcher()->takeConsumers()) {
    t.removeConsumer(c.get(), sub);
    c->sink()->closeConsumerFromBroker(c->id());
  }
}

// Moves sub's cursor so that `pos` is delivered next, then disconnects its consumers.
void resetTo(const TopicPtr& t, const std::string& sub, Position pos, const StatusCb& cb) {
  broker::Subscription* s = t->subscription(sub);
  if (!s) return cb(Status::notFound("Subscription not found"));
  s->resetCursor(pos, [t, sub, cb](const Status& st) {
    if (st) disconnectConsumers(*t, sub);
    cb(st);
  });
}

void skipEntries(PersistentTopic& t, const std::string& sub, int64_t n, StatusCb cb) {
  broker::Subscription* s = t.subscription(sub);
  if (!s) return cb(Status::notFound("Subscription not found"));
  s->skipEntries(n, std::move(cb));
}

void clearBacklog(PersistentTopic& t, const std::string& sub, StatusCb cb) {
  broker::Subscription* s = t.subscription(sub);
  if (!s) return cb(Status::notFound("Subscription not found"));
  s->clearBacklog(std::move(cb));
}

// {"ledgerId", "entryId"} of a message id body, longs as Jackson reads them ("12" too); nullopt
// when v is not an object or either is missing or not a long.
std::optional<Position> ledgerEntryOf(const json::value& v) {
  const json::object* o = v.if_object();
  const json::value* l = o ? o->if_contains("ledgerId") : nullptr;
  const json::value* e = o ? o->if_contains("entryId") : nullptr;
  auto ledger = l ? javaInteger(*l, false) : std::nullopt;
  auto entry = e ? javaInteger(*e, false) : std::nullopt;
  if (!ledger || !entry) return std::nullopt;
  return Position{*ledger, *entry};
}

json::object messageIdJson(int64_t ledgerId, int64_t entryId, int32_t partition, int32_t batch) {
  json::object o{{"ledgerId", ledgerId}, {"entryId", entryId}, {"partitionIndex", partition}};
  if (batch >= 0) o["batchIndex"] = batch;
  return o;
}

// The position of the n-th message (1-based) from the start ("earliest") or end ("latest").
std::optional<Position> nthPosition(storage::ManagedLedger& ml, bool fromLatest, int64_t n) {
  int64_t total = ml.numberOfEntries();
  if (n < 1 || n > total) return std::nullopt;
  Position lac = ml.lastConfirmedEntry();
  if (fromLatest && lac.entryId - (n - 1) >= 0)
    return Position{lac.ledgerId, lac.entryId - (n - 1)};
  int64_t steps = fromLatest ? total - n : n - 1;
  Position p = ml.firstPosition();
  for (int64_t i = 0; i < steps; ++i) p = ml.nextValidPosition(p);
  return p;
}

void addSubscriptionListRoute(Router& r, const AdminContext* ctx) {
  addTopicRoute(
      r, "GET", kTopicPath + "/subscriptions",
      [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
            const Respond& respond) {
        onEachTarget<std::vector<std::string>>(
            ctx, req, name, false, {}, respond,
            [](const TopicPtr& t, const std::function<void(std::vector<std::string>)>& reply) {
              std::vector<std::string> names;
              for (const auto& [n, s] : t->subscriptions()) {
                if (s->durable()) names.push_back(n);
              }
              reply(std::move(names));
            },
            [respond](const std::vector<std::vector<std::string>>& all) {
              std::set<std::string> names;
              for (auto& v : all) names.insert(v.begin(), v.end());
              json::array a;
              for (auto& n : names) a.emplace_back(n);
              respond(jsonResponse(a));
            });
      });
}

void addSubscriptionCreateDeleteRoutes(Router& r, const AdminContext* ctx) {
  addTopicRoute(
      r, "PUT", kSubPath,
      [ctx](const HttpRequest& req, const PathParams& p, const TopicName& name,
            const Respond& respond) {
        // Pulsar: no body means MessageId.earliest; the topic is created when auto-creation is on.
        std::optional<Position> start = Position{-1, -1};
        if (!req.body.empty()) {
          HttpResponse err;
          auto v = parseJsonBody(req, &err);
          if (!v) return respond(err);
          auto at = ledgerEntryOf(*v);
          if (!at) return respond(HttpResponse::error(412, "The body must be a message id"));
          start = at->ledgerId == INT64_MAX ? std::nullopt : at;
        }
        std::string sub = subscriptionParam(p);
        Result<int> partitions = ctx->service.partitionsOf(name, false);
        bool create =
            (partitions.isOk() && *partitions > 0) || ctx->service.allowAutoTopicCreation(name);
        onEachTarget<Status>(
            ctx, req, name, create, Status::ok(), respond,
            [ctx, sub, start](const TopicPtr& t, const StatusCb& reply) {
              Status s = t->createSubscription(sub, start && start->ledgerId < 0
                                                        ? storage::InitialPosition::kEarliest
                                                        : storage::InitialPosition::kLatest);
              if (!s || !start || start->ledgerId < 0) return reply(s);
              resetTo(t, sub, ctx->service.clampSeekPosition(*t, *start), reply);
            },
            [respond](const std::vector<Status>& all) {
              Status s = combineStatuses(all);
              if (s.code() == StatusCode::kAlreadyExists) {
                return respond(HttpResponse::error(409, "Subscription already exists for topic"));
              }
              respond(s ? noContent() : errorResponse(s));
            });
      });
  addTopicRoute(r, "DELETE", kSubPath,
                [ctx](const HttpRequest& req, const PathParams& p, const TopicName& name,
                      const Respond& respond) {
                  bool force = queryFlag(req, "force");
                  onEachSubscriptionTarget(
                      ctx, req, p, name, respond,
                      [force](const TopicPtr& t, const std::string& sub, const StatusCb& reply) {
                        if (force) disconnectConsumers(*t, sub);
                        Status s = t->unsubscribe(sub, nullptr);
                        if (s.code() == StatusCode::kBusy) {
                          s = Status::busy("Subscription has active connected consumers");
                        }
                        reply(s);
                      });
                });
}

void addSkipRoutes(Router& r, const AdminContext* ctx) {
  addNumberedTopicRoute(
      r, "POST", kSubPath + "/skip/{n}", "n", "Invalid number of messages to skip",
      [ctx](const HttpRequest& req, const PathParams& p, const TopicName& name, int64_t n,
            const Respond& respond) {
        onEachSubscriptionTarget(ctx, req, p, name, respond,
                                 [n](const TopicPtr& t, const std::string& sub, StatusCb reply) {
                                   skipEntries(*t, sub, n, std::move(reply));
                                 });
      });
  addTopicRoute(r, "POST", kSubPath + "/skip_all",
                [ctx](const HttpRequest& req, const PathParams& p, const TopicName& name,
                      const Respond& respond) {
                  onEachSubscriptionTarget(
                      ctx, req, p, name, respond,
                      [](const TopicPtr& t, const std::string& sub, StatusCb reply) {
                        clearBacklog(*t, sub, std::move(reply));
                      });
                });
}

// Pulsar's set-replicated-subscription-status: the body is a JSON boolean; 204, 404 "Subscription
// not found".
void addReplicatedStatusRoute(Router& r, const AdminContext* ctx) {
  addTopicRoute(
      r, "POST", kSubPath + "/replicatedSubscriptionStatus",
      [ctx](const HttpRequest& req, const PathParams& p, const TopicName& name,
            const Respond& respond) {
        HttpResponse error;
        auto body = parseJsonBody(req, &error);
        if (!body) return respond(error);
        if (!body->is_bool()) {
          return respond(HttpResponse::error(400, "The body must be true or false"));
        }
        onEachSubscriptionTarget(
            ctx, req, p, name, respond,
            [enabled = body->as_bool()](const TopicPtr& t, const std::string& sub, StatusCb reply) {
              broker::Subscription* s = t->subscription(sub);
              if (!s) return reply(Status::notFound("Subscription not found"));
              s->setReplicated(enabled, std::move(reply));
            });
      });
}

void addResetCursorRoutes(Router& r, const AdminContext* ctx) {
  addNumberedTopicRoute(
      r, "POST", kSubPath + "/resetcursor/{timestamp}", "timestamp", "Invalid timestamp",
      [ctx](const HttpRequest& req, const PathParams& p, const TopicName& name, int64_t timestamp,
            const Respond& respond) {
        uint64_t ts = static_cast<uint64_t>(timestamp);
        onEachSubscriptionTarget(
            ctx, req, p, name, respond,
            [ctx, ts](const TopicPtr& t, const std::string& sub, const StatusCb& reply) {
              if (!t->subscription(sub)) return reply(Status::notFound(""));
              ctx->service.findPositionByPublishTime(
                  t, ts, [t, sub, reply](Position pos) { resetTo(t, sub, pos, reply); });
            });
      });
  addMessageIdTopicRoute(
      r, "POST", kSubPath + "/resetcursor",
      [ctx](const HttpRequest& req, const PathParams& p, const TopicName& name,
            const MessageIdBody& id, const Respond& respond) {
        int32_t index = id.partitionIndex;
        TopicName target = name;
        if (index >= 0 && name.partitionIndex() < 0) {
          Result<int> n = ctx->service.partitionsOf(name, false);
          if (n.isOk() && index < *n) target = name.partition(index);
        }
        onEachSubscriptionTarget(
            ctx, req, p, target, respond,
            [ctx, pos = id.position, excluded = id.isExcluded](
                const TopicPtr& t, const std::string& sub, const StatusCb& reply) {
              Position at = ctx->service.clampSeekPosition(*t, pos);
              if (excluded && at == pos) at = t->ledger().nextValidPosition(at);
              resetTo(t, sub, at, reply);
            });
      });
}

// Pulsar's truncate (PersistentTopic.truncate -> ManagedLedger.asyncTruncate): every durable
// subscription's backlog cleared, then every ledger but the current one deleted.
void truncateTopic(const TopicPtr& t, const StatusCb& reply) {
  std::vector<std::string> subs;
  for (const auto& [n, s] : t->subscriptions()) {
    if (s->durable()) subs.push_back(n);
  }
  auto left = std::make_shared<size_t>(subs.size() + 1);
  auto failed = std::make_shared<Status>();
  auto next = [t, left, failed, reply](const Status& s) {
    if (!s && failed->isOk()) *failed = s;
    if (--*left > 0) return;
    if (!failed->isOk()) return reply(*failed);
    t->ledger().asyncTruncate(reply);
  };
  for (const std::string& sub : subs) clearBacklog(*t, sub, next);
  next(Status::ok());
}

void addTruncateUnloadTerminateRoutes(Router& r, const AdminContext* ctx) {
  addTopicRoute(r, "DELETE", kTopicPath + "/truncate",
                [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
                      const Respond& respond) {
                  onEachTarget<Status>(
                      ctx, req, name, false, Status::notFound(""), respond,
                      [](const TopicPtr& t, const StatusCb& reply) { truncateTopic(t, reply); },
                      answerStatuses(respond, "Topic not found"));
                });
  addTopicRoute(r, "PUT", kTopicPath + "/unload",
                [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
                      const Respond& respond) {
                  onEachTarget<Status>(
                      ctx, req, name, false, Status::ok(), respond,
                      [ctx](const TopicPtr& t, const StatusCb& reply) {
                        // As Pulsar's unload: the topic closes (cursors written, ledger closed)
                        // and the broker forgets it; the next client or admin call reopens it
                        // on a new ledger.
                        ctx->service.unloadTopic(t, /*release=*/false, reply);
                      },
                      answerStatuses(respond, "Topic not found"));
                });
  addTopicRoute(
      r, "POST", kTopicPath + "/terminate",
      [ctx](const HttpRequest&, const PathParams&, const TopicName& name, const Respond& respond) {
        if (refusedPartitioned(ctx, name, "Termination of a partitioned topic is not allowed",
                               respond)) {
          return;
        }
        withTopic(*ctx, name, respond, [respond](const TopicPtr& t) {
          // Answered once the terminated position is stored (Pulsar's asyncTerminate).
          t->terminate([respond, t](const Status& s, Position last) {
            if (!s.isOk()) {
              return respond(HttpResponse::error(500, "Failed to terminate: " + s.message()));
            }
            respond(jsonResponse(
                messageIdJson(last.ledgerId, last.entryId, t->name().partitionIndex(), -1)));
          });
        });
      });
}

void addMessageReadRoutes(Router& r, const AdminContext* ctx) {
  addTopicRoute(
      r, "GET", kTopicPath + "/lastMessageId",
      [ctx](const HttpRequest&, const PathParams&, const TopicName& name, const Respond& respond) {
        if (refusedPartitioned(
                ctx, name, "Get Last Message Id is not allowed on a partitioned topic", respond)) {
          return;
        }
        withTopic(*ctx, name, respond, [ctx, respond](const TopicPtr& t) {
          ctx->service.lastMessageId(
              t, "", false,
              [respond](protocol::WireMessageId last, std::optional<protocol::WireMessageId>) {
                respond(jsonResponse(messageIdJson(static_cast<int64_t>(last.ledgerId),
                                                   static_cast<int64_t>(last.entryId),
                                                   last.partition, last.batchIndex)));
              });
        });
      });
  addTopicRoute(r, "GET", kTopicPath + "/examinemessage",
                [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
                      const Respond& respond) {
                  std::string initial = queryParam(req, "initialPosition").value_or("latest");
                  std::string nText = queryParam(req, "messagePosition").value_or("1");
                  auto parsed = parseDecimal(nText);
                  if ((initial != "latest" && initial != "earliest") || !parsed || *parsed == 0) {
                    return respond(HttpResponse::error(
                        412, "initialPosition must be latest or earliest, messagePosition >= 1"));
                  }
                  int64_t n = *parsed;
                  bool latest = initial == "latest";
                  withTopic(*ctx, name, respond, [respond, n, latest](const TopicPtr& t) {
                    auto pos = nthPosition(t->ledger(), latest, n);
                    if (!pos) return respond(HttpResponse::error(404, "Message not found"));
                    answerEntry(t, *pos, respond);
                  });
                });
  addTopicRoute(r, "GET", kTopicPath + "/ledger/{ledgerId}/entry/{entryId}",
                [ctx](const HttpRequest&, const PathParams& p, const TopicName& name,
                      const Respond& respond) {
                  Position pos;
                  try {
                    pos = Position{std::stoll(p.at("ledgerId")), std::stoll(p.at("entryId"))};
                  } catch (const std::exception&) {
                    return respond(HttpResponse::error(412, "Invalid message id"));
                  }
                  withTopic(*ctx, name, respond,
                            [respond, pos](const TopicPtr& t) { answerEntry(t, pos, respond); });
                });
}

}  // namespace

HttpResponse messageResponse(const storage::Entry& e) {
  proto::MessageMetadata md;
  auto payload = protocol::payloadOf(e.data);
  if (!protocol::parseMetadata(e.data, &md).isOk() || !payload.isOk()) {
    return HttpResponse::error(500, "Cannot parse the stored entry");
  }
  HttpResponse r{200, "application/octet-stream", std::string(*payload), {}};
  r.headers.emplace_back("X-Pulsar-Message-ID", positionText(e.position));
  r.headers.emplace_back("X-Pulsar-publish-time", isoTime(static_cast<int64_t>(md.publish_time())));
  r.headers.emplace_back("X-Pulsar-producer-name", md.producer_name());
  r.headers.emplace_back("X-Pulsar-sequence-id", std::to_string(md.sequence_id()));
  if (md.has_num_messages_in_batch()) {
    r.headers.emplace_back("X-Pulsar-num-batch-message",
                           std::to_string(md.num_messages_in_batch()));
    r.headers.emplace_back("X-Pulsar-batch-size", std::to_string(payload->size()));
  }
  if (md.has_compression() && md.compression() != proto::NONE) {
    // The admin client decompresses with these (Pulsar sends the payload as stored).
    r.headers.emplace_back("X-Pulsar-compression", proto::CompressionType_Name(md.compression()));
    r.headers.emplace_back("X-Pulsar-uncompressed-size", std::to_string(md.uncompressed_size()));
  }
  if (md.has_highest_sequence_id()) {
    r.headers.emplace_back("X-Pulsar-highest-sequence-id",
                           std::to_string(md.highest_sequence_id()));
  }
  if (md.has_uuid()) r.headers.emplace_back("X-Pulsar-uuid", md.uuid());
  if (md.has_num_chunks_from_msg()) {
    r.headers.emplace_back("X-Pulsar-num-chunks-from-msg",
                           std::to_string(md.num_chunks_from_msg()));
    r.headers.emplace_back("X-Pulsar-total-chunk-msg-size",
                           std::to_string(md.total_chunk_msg_size()));
    r.headers.emplace_back("X-Pulsar-chunk-id", std::to_string(md.chunk_id()));
  }
  if (md.has_partition_key()) r.headers.emplace_back("X-Pulsar-partition-key", md.partition_key());
  if (md.has_event_time()) {
    r.headers.emplace_back("X-Pulsar-event-time", isoTime(static_cast<int64_t>(md.event_time())));
  }
  for (const auto& kv : md.properties()) {
    r.headers.emplace_back("X-Pulsar-PROPERTY-" + kv.key(), kv.value());
  }
  return r;
}

void addSubscriptionRoutes(Router& router, const AdminContext& ctx) {
  addRouteGroups(router, ctx,
                 {addSubscriptionListRoute, addSubscriptionCreateDeleteRoutes, addSkipRoutes,
                  addReplicatedStatusRoute, addResetCursorRoutes, addTruncateUnloadTerminateRoutes,
                  addMessageReadRoutes});
}

}  // namespace magnetar::admin
