// /admin/v3/transactions routes and the pulsar_txn_* metrics (transaction_routes.h).

#include "admin/transaction_routes.h"

#include <charconv>

#include "admin/stats_json.h"
#include "admin/topic_route_util.h"
#include "broker/topic/pending_ack_handle.h"
#include "broker/topic/stats.h"
#include "broker/topic/subscription.h"
#include "broker/topic/topic.h"
#include "broker/transaction/coordinator_registry.h"

namespace magnetar::admin {
namespace {

using broker::CoordinatorStats;
using broker::TxnID;
using broker::TxnMeta;

const std::string kBase = "/admin/v3/transactions";
const std::string kTopicSuffix = "/{tenant}/{namespace}/{topic}";

// Pulsar's checkTransactionCoordinatorEnabled answer.
HttpResponse disabled() {
  return HttpResponse::error(
      503, "This Broker is not configured with transactionCoordinatorEnabled=true.");
}

std::optional<uint64_t> parseNumber(const std::string& s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// The {mostSigBits}/{leastSigBits} path params; nullopt when not numbers (JAX-RS answers 404).
std::optional<TxnID> txnFromParams(const PathParams& p) {
  auto most = parseNumber(p.at("mostSigBits"));
  auto least = parseNumber(p.at("leastSigBits"));
  if (!most || !least) return std::nullopt;
  return TxnID{*most, *least};
}

json::object coordinatorStatsJson(const CoordinatorStats& s) {
  return json::object{{"state", s.state},
                      {"leastSigBits", s.sequenceId},
                      {"lowWaterMark", s.lowWaterMark},
                      {"ongoingTxnSize", s.active},
                      {"recoverStartTime", s.recoverStartTimeMs},
                      {"recoverEndTime", s.recoverEndTimeMs}};
}

json::object inBufferJson(const broker::TransactionInBufferStats& s) {
  json::object o;
  if (s.startPosition) o["startPosition"] = *s.startPosition;
  o["aborted"] = s.aborted;
  return o;
}

// Pulsar's TransactionInPendingAckStats: the cumulative ack position when txn holds it. (Pulsar's
// admin JSON leaves null fields out, here and in every answer of this file.)
json::object inPendingAckJson(const broker::PendingAckStats& s, const TxnID& txn) {
  json::object o;
  if (s.cumulativeTxn == txn.toString()) o["cumulativeAckPosition"] = s.cumulativeAckPosition;
  return o;
}

json::object txnBufferJson(const broker::TransactionBufferStats& s, bool lowWaterMarks) {
  json::object o{{"state", s.state},
                 {"maxReadPosition", s.maxReadPosition},
                 {"lastSnapshotTimestamps", s.lastSnapshotTimestamps},
                 {"ongoingTxnSize", s.ongoingTxnSize},
                 {"recoverStartTime", s.recoverStartTime},
                 {"recoverEndTime", s.recoverEndTime},
                 {"totalAbortedTransactions", s.totalAbortedTransactions},
                 {"snapshotType", s.snapshotType}};
  if (lowWaterMarks) {
    json::object m;
    for (const auto& [tc, lwm] : s.lowWaterMarks) m[std::to_string(tc)] = lwm;
    o["lowWaterMarks"] = std::move(m);
  }
  return o;
}

// Runs fn on the ready coordinator tcId's executor; 503/404 answered here.
void withCoordinator(
    const AdminContext& ctx, uint64_t tcId, const Respond& respond,
    std::function<void(const std::shared_ptr<broker::TransactionCoordinator>&)> fn) {
  broker::CoordinatorRegistry* reg = ctx.service.transactionCoordinators();
  if (!reg) return respond(disabled());
  auto tc = reg->get(tcId);
  if (!tc) {
    return respond(HttpResponse::error(
        404, "Transaction coordinator not found! coordinator id : " + std::to_string(tcId)));
  }
  tc->executor()->execute([tc, fn = std::move(fn)] { fn(tc); });
}

// A loaded-or-stored topic's state read on its executor; {} when it cannot be opened.
void readTopic(const AdminContext& ctx, const std::string& topic,
               std::function<json::value(broker::PersistentTopic&)> read,
               std::function<void(json::value)> done) {
  auto name = broker::TopicName::parse(topic);
  if (!name.isOk()) return done(nullptr);
  ctx.service.getOrCreateTopic(
      *name, false, [read = std::move(read), done = std::move(done)](Result<TopicPtr> r) {
        done(r.isOk() ? read(**r) : json::value(json::object{}));
      });
}

json::value pendingAckOf(broker::PersistentTopic& t, const std::string& sub, const TxnID& txn) {
  broker::Subscription* s = t.subscription(sub);
  if (!s || !s->pendingAck()) return json::object{};
  return inPendingAckJson(s->pendingAck()->stats(), txn);
}

// Pulsar's TransactionMetadata of m: the coordinator's fields, then each produced partition's
// in-buffer stats and each acked subscription's in-pending-ack stats from their topics.
void metadataJson(const AdminContext& ctx, const TxnMeta& m,
                  std::function<void(json::object)> done) {
  json::object base{{"txnId", m.id.toString()},
                    {"status", proto::TxnStatus_Name(m.status)},
                    {"openTimestamp", m.startTimeMs},
                    {"timeoutAt", m.timeoutMs},
                    {"producedPartitions", json::object{}},
                    {"ackedPartitions", json::object{}}};
  if (!m.owner.empty()) base["owner"] = m.owner;
  struct Part {
    std::string topic, sub;  // sub empty: a produced partition
  };
  std::vector<Part> parts;
  for (const auto& p : m.producedPartitions) parts.push_back({p, ""});
  for (const auto& s : m.ackedPartitions) parts.push_back({s.topic, s.subscription});
  auto gather = Gather<json::value>::create(
      parts.size(), [parts, base, done = std::move(done)](std::vector<json::value> all) mutable {
        for (size_t i = 0; i < parts.size(); ++i) {
          if (parts[i].sub.empty()) {
            base["producedPartitions"].as_object()[parts[i].topic] = std::move(all[i]);
          } else {
            json::value& t = base["ackedPartitions"].as_object()[parts[i].topic];
            if (!t.is_object()) t = json::object{};
            t.as_object()[parts[i].sub] = std::move(all[i]);
          }
        }
        done(std::move(base));
      });
  const TxnID txn = m.id;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string sub = parts[i].sub;
    readTopic(
        ctx, parts[i].topic,
        [txn, sub](broker::PersistentTopic& t) -> json::value {
          if (sub.empty()) return inBufferJson(t.transactionBuffer().txnStats(txn));
          return pendingAckOf(t, sub, txn);
        },
        [gather, i](json::value v) { gather->set(i, std::move(v)); });
  }
}

void addCoordinatorStats(Router& r, const AdminContext* c) {
  r.add("GET", kBase + "/coordinatorStats",
        [c](const HttpRequest& req, const PathParams&, const Respond& respond) {
          broker::CoordinatorRegistry* reg = c->service.transactionCoordinators();
          if (!reg) return respond(disabled());
          if (auto id = queryParam(req, "coordinatorId")) {
            auto tcId = parseNumber(*id);
            if (!tcId) return respond(HttpResponse::error(404, "Not Found"));
            return withCoordinator(*c, *tcId, respond, [respond](const auto& tc) {
              respond(jsonResponse(coordinatorStatsJson(tc->stats())));
            });
          }
          auto all = reg->stats();
          if (all.empty())
            return respond(HttpResponse::error(404, "Transaction coordinator not found"));
          json::object out;
          for (const auto& s : all) out[std::to_string(s.coordinatorId)] = coordinatorStatsJson(s);
          respond(jsonResponse(out));
        });
}

void addTransactionMetadata(Router& r, const AdminContext* c) {
  r.add("GET", kBase + "/transactionMetadata/{mostSigBits}/{leastSigBits}",
        [c](const HttpRequest&, const PathParams& p, const Respond& respond) {
          auto txn = txnFromParams(p);
          if (!txn) return respond(HttpResponse::error(404, "Not Found"));
          withCoordinator(*c, txn->mostBits, respond, [c, txn = *txn, respond](const auto& tc) {
            const TxnMeta* m = tc->find(txn);
            if (!m) {
              return respond(HttpResponse::error(
                  404, "The transaction with this txdID `" + txn.toString() + "`not found "));
            }
            metadataJson(*c, *m, [respond](const json::object& o) { respond(jsonResponse(o)); });
          });
        });
}

// The slow transactions of the given coordinators, merged into one {"(m,l)": metadata} map.
void slowOf(const AdminContext* c, std::vector<std::shared_ptr<broker::TransactionCoordinator>> tcs,
            uint64_t timeout, const Respond& respond) {
  auto perTc = Gather<std::vector<TxnMeta>>::create(
      tcs.size(), [c, respond](std::vector<std::vector<TxnMeta>> all) {
        std::vector<TxnMeta> metas;
        for (auto& v : all) metas.insert(metas.end(), v.begin(), v.end());
        auto each =
            Gather<json::object>::create(metas.size(), [respond](std::vector<json::object> objs) {
              json::object out;
              for (auto& o : objs) out[o.at("txnId").as_string()] = std::move(o);
              respond(jsonResponse(out));
            });
        for (size_t i = 0; i < metas.size(); ++i) {
          metadataJson(*c, metas[i], [each, i](json::object o) { each->set(i, std::move(o)); });
        }
      });
  for (size_t i = 0; i < tcs.size(); ++i) {
    auto tc = tcs[i];
    tc->executor()->execute([tc, timeout, perTc, i] {
      std::vector<TxnMeta> slow;
      for (const auto& [id, m] : tc->transactions()) {
        if (m.timeoutMs > timeout) slow.push_back(m);
      }
      perTc->set(i, std::move(slow));
    });
  }
}

void addSlowTransactions(Router& r, const AdminContext* c) {
  r.add("GET", kBase + "/slowTransactions/{timeout}",
        [c](const HttpRequest& req, const PathParams& p, const Respond& respond) {
          broker::CoordinatorRegistry* reg = c->service.transactionCoordinators();
          if (!reg) return respond(disabled());
          auto timeout = parseNumber(p.at("timeout"));
          if (!timeout) return respond(HttpResponse::error(404, "Not Found"));
          std::vector<std::shared_ptr<broker::TransactionCoordinator>> tcs;
          if (auto id = queryParam(req, "coordinatorId")) {
            auto tcId = parseNumber(*id);
            auto tc = tcId ? reg->get(*tcId) : nullptr;
            if (!tc) {
              return respond(HttpResponse::error(
                  404, "Transaction coordinator not found! coordinator id : " + *id));
            }
            tcs.push_back(tc);
          } else {
            for (const auto& s : reg->stats()) {
              if (auto tc = reg->get(s.coordinatorId)) tcs.push_back(tc);
            }
          }
          slowOf(c, std::move(tcs), *timeout, respond);
        });
}

// A topic route of /admin/v3/transactions: 503 when transactions are off (unless
// anyBroker: Pulsar's transactionBufferInternalStats does not check), then the topic, 404
// "Topic not found {topic}" without it (Pulsar's getExistingPersistentTopicAsync).
void addTxnTopicRoute(Router& r, const AdminContext* c, const std::string& path,
                      const std::function<void(const HttpRequest&, const PathParams&,
                                               const TopicPtr&, const Respond&)>& fn,
                      bool anyBroker = false) {
  addTopicRoute(r, "GET", kBase + path,
                [c, fn, anyBroker](const HttpRequest& req, const PathParams& p,
                                   const TopicName& name, const Respond& respond) {
                  if (!anyBroker && !c->service.transactionCoordinators()) {
                    return respond(disabled());
                  }
                  Respond named = [respond, topic = name.toString()](HttpResponse res) {
                    static const std::string kPlain =
                        HttpResponse::error(404, "Topic not found").body;
                    if (res.status == 404 && res.body == kPlain) {
                      res = HttpResponse::error(404, "Topic not found " + topic);
                    }
                    respond(std::move(res));
                  };
                  withTopic(*c, name, named,
                            [fn, req, p, named](const TopicPtr& t) { fn(req, p, t, named); });
                });
}

// Runs fn with the {subName} subscription's pending-ack handle; 404 without it.
void withPendingAck(const TopicPtr& t, const PathParams& p, const Respond& respond,
                    const std::function<void(const broker::PendingAckHandle&)>& fn) {
  broker::Subscription* s = t->subscription(p.at("subName"));
  if (!s) return respond(HttpResponse::error(404, "Subscription not found"));
  if (!s->pendingAck())
    return respond(HttpResponse::error(503, "This Broker is not enable transaction"));
  fn(*s->pendingAck());
}

void addTopicStatsRoutes(Router& r, const AdminContext* c) {
  addTxnTopicRoute(
      r, c, "/transactionBufferStats" + kTopicSuffix,
      [](const HttpRequest& req, const PathParams&, const TopicPtr& t, const Respond& respond) {
        bool lwm = queryFlag(req, "lowWaterMarks");
        respond(jsonResponse(txnBufferJson(t->transactionBuffer().stats(lwm), lwm)));
      });
  addTxnTopicRoute(
      r, c, "/transactionInBufferStats" + kTopicSuffix + "/{mostSigBits}/{leastSigBits}",
      [](const HttpRequest&, const PathParams& p, const TopicPtr& t, const Respond& respond) {
        auto txn = txnFromParams(p);
        if (!txn) return respond(HttpResponse::error(404, "Not Found"));
        respond(jsonResponse(inBufferJson(t->transactionBuffer().txnStats(*txn))));
      });
  addTxnTopicRoute(
      r, c, "/pendingAckStats" + kTopicSuffix + "/{subName}",
      [](const HttpRequest&, const PathParams& p, const TopicPtr& t, const Respond& respond) {
        withPendingAck(t, p, respond, [&](const broker::PendingAckHandle& h) {
          broker::PendingAckStats s = h.stats();
          respond(jsonResponse(
              json::object{{"state", s.state}, {"ongoingTxnSize", s.ongoingTxnCount}}));
        });
      });
  addTxnTopicRoute(
      r, c,
      "/transactionInPendingAckStats" + kTopicSuffix + "/{subName}/{mostSigBits}/{leastSigBits}",
      [](const HttpRequest&, const PathParams& p, const TopicPtr& t, const Respond& respond) {
        auto txn = txnFromParams(p);
        if (!txn) return respond(HttpResponse::error(404, "Not Found"));
        withPendingAck(t, p, respond, [&](const broker::PendingAckHandle& h) {
          respond(jsonResponse(inPendingAckJson(h.stats(), *txn)));
        });
      });
}

// Pulsar's TransactionLogStats / SnapshotInternalStats: a ledger's name and internal stats
// (asTopic: a topic's, PersistentTopicInternalStats, as Pulsar's snapshot topic is one).
json::object ledgerStatsJson(storage::ManagedLedger& ml, uint64_t entriesAdded,
                             bool asTopic = false) {
  broker::InternalStatsSnapshot s = broker::snapshotLedgerInternalStats(ml, entriesAdded);
  return json::object{
      {"managedLedgerName", ml.name()},
      {"managedLedgerInternalStats", asTopic ? internalStatsJson(s) : ledgerInternalStatsJson(s)}};
}

void addInternalStatsRoutes(Router& r, const AdminContext* c) {
  r.add(
      "GET", kBase + "/coordinatorInternalStats/{coordinatorId}",
      [c](const HttpRequest&, const PathParams& p, const Respond& respond) {
        if (!c->service.transactionCoordinators()) return respond(disabled());
        auto tcId = parseNumber(p.at("coordinatorId"));
        if (!tcId) return respond(HttpResponse::error(404, "Not Found"));
        withCoordinator(*c, *tcId, respond, [respond](const auto& tc) {
          respond(jsonResponse(json::object{
              {"transactionLogStats",
               ledgerStatsJson(tc->logLedger(), static_cast<uint64_t>(tc->stats().appendCount))}}));
        });
      });
  // The snapshot lives in the topic's own ledger (its pulsar.txn-buffer cursor's properties),
  // not in Pulsar's __transaction_buffer_snapshot topic: that ledger is the one described.
  addTxnTopicRoute(
      r, c, "/transactionBufferInternalStats" + kTopicSuffix,
      [](const HttpRequest&, const PathParams&, const TopicPtr& t, const Respond& respond) {
        if (!t->transactionBuffer().enabled()) {
          return respond(
              HttpResponse::error(404, "Transaction buffer Snapshot for the topic does not exist"));
        }
        respond(jsonResponse(
            json::object{{"snapshotType", "Single"},
                         {"singleSnapshotSystemTopicInternalStats",
                          ledgerStatsJson(t->ledger(), t->stats().entriesAddedCounter, true)}}));
      },
      true);
  addTxnTopicRoute(
      r, c, "/pendingAckInternalStats" + kTopicSuffix + "/{subName}",
      [](const HttpRequest&, const PathParams& p, const TopicPtr& t, const Respond& respond) {
        broker::Subscription* s = t->subscription(p.at("subName"));
        if (!s) {
          return respond(HttpResponse::error(
              404, t->name().toString() + " not found subscription : " + p.at("subName")));
        }
        const broker::PendingAckHandle* h = s->pendingAck();
        if (!h || !h->log()) {
          return respond(HttpResponse::error(503, "Pending ack have not init success!"));
        }
        respond(jsonResponse(
            json::object{{"pendingAckLogStats", ledgerStatsJson(*h->log(), h->logAppends())}}));
      });
}

// The assign topic's partition count (0: none).
int coordinatorCount(const AdminContext& ctx) {
  auto all = ctx.service.partitionedTopicsOf("pulsar/system");
  auto it = all.find(broker::kTransactionCoordinatorAssign);
  return it == all.end() ? 0 : it->second;
}

// Pulsar's internalListCoordinators: [{"id", "brokerServiceUrl"}] of each assign partition's
// owner (a lookup of it; standalone: this broker).
void addListCoordinators(Router& r, const AdminContext* c) {
  r.add("GET", kBase + "/coordinators",
        [c](const HttpRequest& req, const PathParams&, const Respond& respond) {
          if (!c->service.transactionCoordinators()) return respond(disabled());
          const int n = coordinatorCount(*c);
          auto* ownership = c->service.topicOwnership();
          auto urls = Gather<std::string>::create(n, [respond](std::vector<std::string> all) {
            json::array out;
            for (size_t i = 0; i < all.size(); ++i) {
              out.push_back(json::object{{"id", i}, {"brokerServiceUrl", all[i]}});
            }
            respond(jsonResponse(out));
          });
          const std::string local = standaloneBrokerUrl(*c, req);
          for (int i = 0; i < n; ++i) {
            if (!ownership) {
              urls->set(i, local);
              continue;
            }
            auto part = TopicName::parse(std::string(broker::kTransactionCoordinatorAssign) +
                                         "-partition-" + std::to_string(i));
            ownership->lookup(*part, false, "", &c->service.ioLoops().next(),
                              [urls, i](const broker::LookupAnswer& a) { urls->set(i, a.url); });
          }
        });
}

// Pulsar's internalScaleTransactionCoordinators: POST transactionCoordinator/replicas with an
// int body; 406 unless it is more than the assign topic's partitions now; 204.
void addScaleCoordinators(Router& r, const AdminContext* c) {
  r.add("POST", kBase + "/transactionCoordinator/replicas",
        [c](const HttpRequest& req, const PathParams&, const Respond& respond) {
          if (!c->service.transactionCoordinators()) return respond(disabled());
          HttpResponse error;
          auto v = parseJsonBody(req, &error);
          if (!v) return respond(std::move(error));
          auto replicas = javaInteger(*v, true);
          if (!replicas) return respond(jacksonError("int", *v));
          if (*replicas <= coordinatorCount(*c)) {
            return respond(HttpResponse::error(
                406,
                "Number of transaction coordinators should be more than the current number of "
                "transaction coordinator"));
          }
          auto assign = TopicName::parse(broker::kTransactionCoordinatorAssign);
          Status s = c->service.updatePartitions(*assign, static_cast<int>(*replicas));
          respond(s ? noContent() : errorResponse(s));
        });
}

}  // namespace

void addTransactionRoutes(Router& router, const AdminContext& ctx) {
  for (auto add :
       {addListCoordinators, addCoordinatorStats, addTransactionMetadata, addSlowTransactions,
        addTopicStatsRoutes, addInternalStatsRoutes, addScaleCoordinators}) {
    add(router, &ctx);
  }
}

void writeTransactionMetrics(PrometheusWriter& w, const std::string& cluster,
                             const std::vector<CoordinatorStats>& coordinators) {
  if (coordinators.empty()) return;
  struct Counter {
    const char* name;
    const char* help;
    int64_t CoordinatorStats::*field;
  };
  static const Counter kCounters[] = {
      {"pulsar_txn_active_count", "Ongoing transactions", &CoordinatorStats::active},
      {"pulsar_txn_committed_total", "Committed transactions", &CoordinatorStats::committed},
      {"pulsar_txn_aborted_total", "Aborted transactions", &CoordinatorStats::aborted},
      {"pulsar_txn_created_total", "Created transactions", &CoordinatorStats::created},
      {"pulsar_txn_timeout_total", "Timed-out transactions", &CoordinatorStats::timedOut},
      {"pulsar_txn_append_log_total", "Transaction log appends", &CoordinatorStats::appendCount},
  };
  for (const Counter& k : kCounters) w.family(k.name, MetricType::kGauge, k.help);
  const auto& bounds = CoordinatorStats::kExecutionBucketsMs;
  auto bucketName = [&](size_t i) {
    return "pulsar_txn_execution_latency_le_" +
           (i < bounds.size() ? std::to_string(bounds[i]) : std::string("overflow"));
  };
  for (size_t i = 0; i <= bounds.size(); ++i) {
    w.family(bucketName(i), MetricType::kGauge,
             "Transactions ended within this many ms of opening");
  }
  for (const CoordinatorStats& s : coordinators) {
    const Labels labels{{"cluster", cluster}, {"coordinator_id", std::to_string(s.coordinatorId)}};
    for (const Counter& k : kCounters) w.sample(k.name, labels, static_cast<double>(s.*k.field));
    for (size_t i = 0; i <= bounds.size(); ++i) {
      w.sample(bucketName(i), labels, static_cast<double>(s.executionLatencyBuckets[i]));
    }
  }
}

}  // namespace magnetar::admin
