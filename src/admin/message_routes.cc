// Message inspection and expiry routes of /admin/v2/persistent (peek-messages, internal-info,
// get-message-id, get-backlog-size, analyze-backlog, get-properties, expire-messages).

#include <fmt/format.h>

#include <set>

#include "admin/stats_json.h"
#include "admin/topic_route_util.h"
#include "admin/topic_routes.h"
#include "admin/topic_targets.h"
#include "broker/topic/entry_metadata.h"
#include "broker/topic/message_expiry.h"

namespace magnetar::admin {
namespace {

using broker::PersistentTopic;

// The n-th (1-based) entry after the mark-delete position that is not acknowledged (Pulsar's
// asyncGetNthEntry with IndividualDeletedEntries.Exclude); nullopt past the end.
std::optional<Position> nthUnacked(storage::ManagedLedger& ml, storage::ManagedCursor& cur,
                                   int64_t n) {
  Position lac = ml.lastConfirmedEntry();
  int64_t seen = 0;
  for (Position p = ml.nextValidPosition(cur.markDeletedPosition()); p <= lac && p.entryId >= 0;
       p = ml.nextValidPosition(p)) {
    if (cur.isAcknowledged(p)) continue;
    if (++seen == n) return p;
  }
  return std::nullopt;
}

void addPeekRoute(Router& r, const AdminContext* ctx) {
  addNumberedTopicRoute(
      r, "GET", kSubPath + "/position/{n}", "n", "Invalid message position",
      [ctx](const HttpRequest&, const PathParams& p, const TopicName& name, int64_t n,
            const Respond& respond) {
        if (refusedPartitioned(ctx, name, "Peek messages on a partitioned topic is not allowed",
                               respond)) {
          return;
        }
        int64_t nth = std::max<int64_t>(1, n);  // Pulsar treats positions below 1 as 1
        std::string sub = subscriptionParam(p);
        withTopic(*ctx, name, respond, [respond, sub, nth](const TopicPtr& t) {
          broker::Subscription* s = t->subscription(sub);
          if (!s) return respond(HttpResponse::error(404, "Subscription not found"));
          auto pos = nthUnacked(t->ledger(), s->cursor(), nth);
          if (!pos) return respond(HttpResponse::error(404, "Message not found"));
          answerEntry(t, *pos, respond);
        });
      });
}

// Pulsar's ManagedLedgerInfo (what Magnetar tracks of it: ledgers, terminated position, cursors
// with their mark-delete position and acknowledged ranges).
json::object managedLedgerInfoJson(PersistentTopic& t) {
  broker::InternalStatsSnapshot s = broker::snapshotInternalStats(t);
  auto pos = [](Position p) {
    return json::object{{"ledgerId", p.ledgerId}, {"entryId", p.entryId}};
  };
  json::array ledgers;
  for (const auto& l : s.ledgers) {
    ledgers.emplace_back(json::object{{"ledgerId", l.ledgerId},
                                      {"entries", l.entries},
                                      {"size", l.sizeBytes},
                                      {"isOffloaded", false}});
  }
  json::object cursors;
  for (const auto& c : s.cursors) {
    json::array ranges;
    for (const auto& [from, to] : c.individuallyDeleted) {
      ranges.emplace_back(json::object{{"from", pos(from)}, {"to", pos(to)}, {"offloaded", false}});
    }
    cursors[c.name] = json::object{{"markDelete", pos(c.markDeletePosition)},
                                   {"individualDeletedMessages", std::move(ranges)},
                                   {"properties", json::object{}}};
  }
  json::object o{{"ledgers", std::move(ledgers)},
                 {"cursors", std::move(cursors)},
                 {"properties", json::object{}}};
  if (t.isTerminated()) o["terminatedPosition"] = pos(s.lastConfirmedEntry);
  return o;
}

void addInternalInfoRoute(Router& r, const AdminContext* ctx) {
  addTopicRoute(r, "GET", kTopicPath + "/internal-info",
                [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
                      const Respond& respond) {
                  Result<int> n = ctx->service.partitionsOf(name, false);
                  bool partitioned = n.isOk() && *n > 0;
                  int count = partitioned ? *n : 0;
                  onEachTarget<json::value>(
                      ctx, req, name, false, json::value(nullptr), respond,
                      [](const TopicPtr& t, const std::function<void(json::value)>& reply) {
                        reply(managedLedgerInfoJson(*t));
                      },
                      [respond, name, partitioned, count](std::vector<json::value> all) {
                        if (!partitioned) return respond(jsonResponse(all.front()));
                        json::object parts;  // Pulsar: partition name -> its ManagedLedgerInfo
                        for (int i = 0; i < count; ++i) {
                          if (!all[i].is_null())
                            parts[name.partition(i).toString()] = std::move(all[i]);
                        }
                        respond(jsonResponse(parts));
                      });
                });
}

void addInspectRoutes(Router& r, const AdminContext* ctx) {
  addNumberedTopicRoute(
      r, "GET", kTopicPath + "/messageid/{timestamp}", "timestamp", "Invalid timestamp",
      [ctx](const HttpRequest&, const PathParams&, const TopicName& name, int64_t ts,
            const Respond& respond) {
        if (refusedPartitioned(ctx, name,
                               "Get message ID by timestamp on a partitioned topic is not allowed, "
                               "please try do it on specific topic partition",
                               respond)) {
          return;
        }
        withTopic(*ctx, name, respond, [ctx, respond, ts](const TopicPtr& t) {
          ctx->service.findPositionByPublishTime(
              t, static_cast<uint64_t>(ts), [t, respond](Position pos) {
                if (pos > t->ledger().lastConfirmedEntry() || pos.entryId < 0) {
                  return respond(HttpResponse::error(404, "Message ID not found"));
                }
                respond(jsonResponse(json::object{{"ledgerId", pos.ledgerId},
                                                  {"entryId", pos.entryId},
                                                  {"partitionIndex", t->name().partitionIndex()}}));
              });
        });
      });
  addMessageIdTopicRoute(
      r, "PUT", kTopicPath + "/backlogSize",
      [ctx](const HttpRequest&, const PathParams&, const TopicName& name, const MessageIdBody& id,
            const Respond& respond) {
        if (refusedPartitioned(ctx, name, "Get backlog size is not allowed on a partitioned topic.",
                               respond)) {
          return;
        }
        Position from = id.position;
        withTopic(*ctx, name, respond, [respond, from](const TopicPtr& t) {
          respond(jsonResponse(estimatedBacklogSize(t->ledger().ledgerStats(), from)));
        });
      });
  addTopicRoute(
      r, "GET", kTopicPath + "/properties",
      [ctx](const HttpRequest&, const PathParams&, const TopicName& name, const Respond& respond) {
        // The properties given when the topic was created (kept with its topic policies; a
        // partitioned topic's under its own name).
        auto answer = [ctx, name, respond] {
          auto all = ctx->service.policies().topicPolicies(name.toString());
          auto it = all.find(broker::kTopicPropertiesKey);
          if (it == all.end()) return respond(jsonResponse(json::object{}));
          boost::system::error_code ec;
          auto v = json::parse(it->second, ec);
          respond(ec ? HttpResponse::error(500, "stored properties are not JSON")
                     : jsonResponse(v));
        };
        Result<int> n = ctx->service.partitionsOf(name, false);
        if (n.isOk() && *n > 0) return answer();
        withTopic(*ctx, name, respond, [answer](const TopicPtr&) { answer(); });
      });
}

// Counts the entries and messages from `from` to the end, at most kMaxScannedEntries entries.
struct BacklogScan : std::enable_shared_from_this<BacklogScan> {
  TopicPtr topic;
  std::string sub;
  int64_t entries = 0;
  int64_t messages = 0;
  bool aborted = false;
  Respond respond;

  void step(Position from) {
    auto& ml = topic->ledger();
    if (from > ml.lastConfirmedEntry() || from.entryId < 0) return finish();
    if (entries >= broker::kMaxScannedEntries) {
      aborted = true;
      return finish();
    }
    auto self = shared_from_this();
    int batch = static_cast<int>(std::min<int64_t>(1000, broker::kMaxScannedEntries - entries));
    ml.asyncReadEntries(
        from, batch, 64 << 20, [self](const Status& s, std::vector<storage::Entry> es) {
          if (!s.isOk()) return self->respond(errorResponse(s));
          if (es.empty()) return self->finish();
          broker::Subscription* sub = self->topic->subscription(self->sub);
          for (auto& e : es) {
            if (sub && sub->cursor().isAcknowledged(e.position)) continue;
            broker::EntryMetadataPeek md;
            int n =
                broker::peekEntryMetadata(e.data.view(), &md).isOk() ? md.numMessagesInBatch : 1;
            self->entries += 1;
            self->messages += std::max(1, n);
          }
          self->step(self->topic->ledger().nextValidPosition(es.back().position));
        });
  }

  void finish() {
    // No entry filters in Magnetar: every entry is accepted.
    respond(jsonResponse(json::object{{"entries", entries},
                                      {"messages", messages},
                                      {"filterRejectedEntries", 0},
                                      {"filterAcceptedEntries", entries},
                                      {"filterRescheduledEntries", 0},
                                      {"filterRejectedMessages", 0},
                                      {"filterAcceptedMessages", messages},
                                      {"filterRescheduledMessages", 0},
                                      {"aborted", aborted}}));
  }
};

void addAnalyzeBacklogRoute(Router& r, const AdminContext* ctx) {
  addTopicRoute(
      r, "POST", kSubPath + "/analyzeBacklog",
      [ctx](const HttpRequest& req, const PathParams& p, const TopicName& name,
            const Respond& respond) {
        std::optional<Position> start;
        if (!req.body.empty()) {
          HttpResponse err;
          auto id = parseMessageIdBody(req, &err);
          if (!id) return respond(err);
          start = id->position;
        }
        if (refusedPartitioned(ctx, name, "Analyze backlog on a partitioned topic is not allowed",
                               respond)) {
          return;
        }
        std::string sub = subscriptionParam(p);
        withTopic(*ctx, name, respond, [respond, sub, start](const TopicPtr& t) {
          broker::Subscription* s = t->subscription(sub);
          if (!s) return respond(HttpResponse::error(404, "Subscription not found"));
          auto scan = std::make_shared<BacklogScan>();
          scan->topic = t;
          scan->sub = sub;
          scan->respond = respond;
          scan->step(start ? *start
                           : t->ledger().nextValidPosition(s->cursor().markDeletedPosition()));
        });
      });
}

// The durable subscriptions of a topic.
std::vector<std::string> durableSubscriptions(PersistentTopic& t) {
  std::vector<std::string> out;
  for (const auto& [n, s] : t.subscriptions()) {
    if (s->durable()) out.push_back(n);
  }
  return out;
}

// Pulsar's 412 text for an {expireTimeInSeconds} that is not a number.
constexpr const char* kInvalidExpireTime = "Invalid expire time in seconds";

void addExpireRoutes(Router& r, const AdminContext* ctx) {
  addNumberedTopicRoute(r, "POST", kSubPath + "/expireMessages/{expireTimeInSeconds}",
                        "expireTimeInSeconds", kInvalidExpireTime,
                        [ctx](const HttpRequest& req, const PathParams& p, const TopicName& name,
                              int64_t seconds, const Respond& respond) {
                          onEachSubscriptionTarget(
                              ctx, req, p, name, respond,
                              [seconds](const TopicPtr& t, const std::string& sub, StatusCb reply) {
                                broker::expireByTime(t, sub, seconds, std::move(reply));
                              });
                        });
  addMessageIdTopicRoute(
      r, "POST", kSubPath + "/expireMessages",
      [ctx](const HttpRequest&, const PathParams& p, const TopicName& name, const MessageIdBody& id,
            const Respond& respond) {
        if (refusedPartitioned(ctx, name,
                               "Expire message at given position is not supported for "
                               "partitioned-topic",
                               respond)) {
          return;
        }
        std::string sub = subscriptionParam(p);
        MessageIdBody body = id;
        withTopic(*ctx, name, respond, [respond, sub, body](const TopicPtr& t) {
          Position upTo = body.position;
          if (body.isExcluded) {
            upTo = previousPosition(t->ledger().ledgerStats(), upTo);
          }
          broker::expireUpTo(t, sub, upTo, [respond](const Status& s) {
            if (s.code() == StatusCode::kNotFound) {
              return respond(HttpResponse::error(404, "Subscription not found"));
            }
            respond(s ? noContent() : errorResponse(s));
          });
        });
      });
  addNumberedTopicRoute(
      r, "POST", kTopicPath + "/all_subscription/expireMessages/{expireTimeInSeconds}",
      "expireTimeInSeconds", kInvalidExpireTime,
      [ctx](const HttpRequest& req, const PathParams&, const TopicName& name, int64_t seconds,
            const Respond& respond) {
        onEachTarget<Status>(
            ctx, req, name, false, Status::ok(), respond,
            [seconds](const TopicPtr& t, const StatusCb& reply) {
              auto subs = durableSubscriptions(*t);
              auto gather = Gather<Status>::create(
                  subs.size(),
                  [reply](const std::vector<Status>& all) { reply(combineStatuses(all)); });
              for (size_t i = 0; i < subs.size(); ++i) {
                broker::expireByTime(t, subs[i], seconds,
                                     [gather, i](const Status& s) { gather->set(i, s); });
              }
            },
            answerStatuses(respond, "Topic not found"));
      });
}

}  // namespace

int64_t estimatedBacklogSize(const std::vector<storage::LedgerStats>& ledgers, Position from) {
  int64_t total = 0;
  for (const auto& l : ledgers) {
    if (l.ledgerId > from.ledgerId) {
      total += l.sizeBytes;
    } else if (l.ledgerId == from.ledgerId && l.entries > 0) {
      int64_t remaining =
          std::clamp<int64_t>(l.entries - std::max<int64_t>(0, from.entryId), 0, l.entries);
      total += l.sizeBytes * remaining / l.entries;
    }
  }
  return total;
}

Position previousPosition(const std::vector<storage::LedgerStats>& ledgers, Position p) {
  if (p.entryId > 0) return Position{p.ledgerId, p.entryId - 1};
  Position prev{-1, -1};
  for (const auto& l : ledgers) {
    if (l.ledgerId >= p.ledgerId) break;
    if (l.entries > 0) prev = Position{l.ledgerId, l.entries - 1};
  }
  return prev;
}

void addMessageRoutes(Router& router, const AdminContext& ctx) {
  addRouteGroups(router, ctx,
                 {addPeekRoute, addInternalInfoRoute, addInspectRoutes, addAnalyzeBacklogRoute,
                  addExpireRoutes});
}

}  // namespace magnetar::admin
