#include "admin/broker_admin.h"

#include <algorithm>
#include <boost/asio/steady_timer.hpp>

#include "admin/auth_filter.h"
#include "admin/broker_info_routes.h"
#include "admin/broker_routes.h"
#include "admin/io_saturation.h"
#include "admin/metrics.h"
#include "admin/namespace_routes.h"
#include "admin/placement_routes.h"
#include "admin/rest_util.h"
#include "admin/schema_routes.h"
#include "admin/thread_cpu.h"
#include "admin/topic_policy_routes.h"
#include "admin/topic_routes.h"
#include "admin/transaction_routes.h"
#include "base/logging.h"
#include "broker/cluster/load_report.h"
#include "net/event_loop.h"

namespace magnetar::admin {
namespace {

using Backlogs = std::vector<std::pair<std::string, int64_t>>;

}  // namespace

struct BrokerAdmin::Impl : std::enable_shared_from_this<Impl> {
  Impl(broker::BrokerService& service, std::shared_ptr<config::ServiceConfiguration> config,
       const Options& o)
      : rates(service.rates()),
        ctx{service, std::move(config), rates, nullptr, o.loadManager},
        options(o),
        timer(loop.context()),
        detector({o.ioBusyThreshold, std::chrono::nanoseconds(o.window).count()}) {}

  void start() {
    mayBlockLoop.start();
    ctx.mayBlock = &mayBlockLoop;
    loop.start();
    loop.execute([this] {
      prevTickNs = lastCheckNs = monotonicNowNs();
      checkCpu = scrapeCpu = takeThreadCpuSnapshot();
      scheduleTick();
    });
  }

  void stop() {
    loop.execute([this] { timer.cancel(); });
    loop.stop();
    mayBlockLoop.stop();
  }

  // pulsar-stats thread from here on.
  void scheduleTick() {
    timer.expires_after(options.rateInterval);
    timer.async_wait([this](boost::system::error_code ec) {
      if (!ec) tick();
    });
  }

  void tick() {
    int64_t now = monotonicNowNs();
    auto topics = ctx.service.topics();
    std::vector<std::string> names;
    names.reserve(topics.size());
    for (const auto& t : topics) names.push_back(t->name().toString());
    std::sort(names.begin(), names.end());
    rates.retainOnly(names);
    int64_t prev = prevTickNs;
    for (const auto& t : topics) {
      auto r = rates.of(t->name().toString());
      t->executor().execute([t, r, now, prev] { r->update(*t, now, prev); });
    }
    prevTickNs = now;
    if (now - lastCheckNs >= std::chrono::nanoseconds(options.checkInterval).count()) {
      lastCheckNs = now;
      checkSaturation(topics, now);
    }
    scheduleTick();
  }

  // Samples the busiest pulsar-io thread and every backlog for the IoSaturationDetector.
  void checkSaturation(const std::vector<std::shared_ptr<broker::PersistentTopic>>& topics,
                       int64_t now) {
    ThreadCpuSnapshot cpu = takeThreadCpuSnapshot();
    std::string busiest;
    double busiestUtil = 0;
    for (const auto& [name, u] : threadUtilization(checkCpu, cpu)) {
      if (name.rfind("pulsar-io", 0) == 0 && u >= busiestUtil) {
        busiest = name;
        busiestUtil = u;
      }
    }
    checkCpu = std::move(cpu);
    auto self = shared_from_this();
    auto gather = Gather<Backlogs>::create(
        topics.size(), [self, now, busiest, busiestUtil](std::vector<Backlogs> all) {
          self->loop.execute([self, now, busiest, busiestUtil, all = std::move(all)] {
            std::map<std::string, int64_t> backlogs;
            for (const auto& v : all) backlogs.insert(v.begin(), v.end());
            if (auto w = self->detector.addSample(now, busiest, busiestUtil, backlogs)) {
              MLOG_WARN("{}", *w);
            }
          });
        });
    for (size_t i = 0; i < topics.size(); ++i) {
      const auto& t = topics[i];
      t->executor().execute([t, gather, i] {
        Backlogs b;
        for (const auto& [name, sub] : t->subscriptions()) {
          b.emplace_back(t->name().toString() + "/" + name, sub->msgBacklog());
        }
        gather->set(i, std::move(b));
      });
    }
  }

  // GET /metrics: snapshots from every topic executor, rendered on pulsar-stats.
  void collectMetrics(const Respond& respond) {
    auto topics = ctx.service.topics();
    auto self = shared_from_this();
    auto gather = Gather<broker::TopicSnapshot>::create(
        topics.size(), [self, respond](std::vector<broker::TopicSnapshot> snaps) {
          self->loop.execute(
              [self, respond, snaps = std::move(snaps)] { respond(self->renderMetrics(snaps)); });
        });
    for (size_t i = 0; i < topics.size(); ++i) {
      auto t = topics[i];
      auto r = rates.find(t->name().toString());
      t->executor().execute(
          [t, r, gather, i] { gather->set(i, broker::snapshotTopic(*t, r.get())); });
    }
  }

  HttpResponse renderMetrics(const std::vector<broker::TopicSnapshot>& topics) {
    const config::ServiceConfiguration& cfg = *ctx.config;
    const MetricsOptions o{.cluster = cfg.clusterName(),
                           .topicLevel = cfg.exposeTopicLevelMetricsInPrometheus(),
                           .consumerLevel = cfg.exposeConsumerLevelMetricsInPrometheus(),
                           .producerLevel = cfg.exposeProducerLevelMetricsInPrometheus()};
    PrometheusWriter w;
    w.family("pulsar_active_connections", MetricType::kGauge, "Open client connections");
    w.sample("pulsar_active_connections", {{"cluster", o.cluster}},
             static_cast<double>(ctx.service.activeConnections()));
    writeTopicMetrics(w, topics, o);
    ThreadCpuSnapshot cpu = takeThreadCpuSnapshot();
    writeThreadCpuMetrics(w, threadUtilization(scrapeCpu, cpu));
    scrapeCpu = std::move(cpu);
    writeLoopMetrics(w, "pulsar-io", ctx.service.ioLoops());
    writeLoopMetrics(w, "ml-worker", ctx.service.mlWorkers());
    writePublishThrottleMetrics(w, ctx.service);
    if (options.storageStats) writeStorageMetrics(w, o.cluster, options.storageStats());
    if (options.loadManager) {
      writeLoadBalancingMetrics(w, o.cluster, ctx.service.options().advertisedAddress,
                                options.loadManager->hostUsage());
      writeBalanceMetrics(w, o.cluster, options.loadManager->balanceCounters());
    }
    writeProtocolErrorMetrics(w);
    const auto& mqttListeners = cfg.mqttListeners();
    if (std::any_of(mqttListeners.begin(), mqttListeners.end(),
                    [](const auto& l) { return !l.empty(); })) {
      writeMqttMetrics(w, o.cluster);
    }
    if (auto* tcs = ctx.service.transactionCoordinators()) {
      writeTransactionMetrics(w, o.cluster, tcs->stats());
    }
    return HttpResponse{200, kPrometheusContentType, w.render(), {}};
  }

  broker::RateRegistry& rates;  // the broker's
  AdminContext ctx;
  Options options;
  net::EventLoop loop{"pulsar-stats"};
  net::EventLoop mayBlockLoop{"pulsar-web-async", net::EventLoop::Kind::kMayBlock};
  boost::asio::steady_timer timer;
  IoSaturationDetector detector;
  // pulsar-stats thread only.
  int64_t prevTickNs = 0;
  int64_t lastCheckNs = 0;
  ThreadCpuSnapshot checkCpu;
  ThreadCpuSnapshot scrapeCpu;
};

BrokerAdmin::BrokerAdmin(broker::BrokerService& service,
                         std::shared_ptr<config::ServiceConfiguration> config,
                         const Options& options)
    : impl_(std::make_shared<Impl>(service, std::move(config), options)) {
  impl_->start();
}

BrokerAdmin::~BrokerAdmin() { impl_->stop(); }

PlacementStores BrokerAdmin::placementStores() {
  PlacementStores st;
  st.config = impl_->options.configStore;
  st.local = impl_->options.localStore;
  broker::cluster::NamespaceService* nsp = impl_->options.namespaceService;
  broker::BrokerService* svc = &impl_->ctx.service;
  if (nsp) {
    st.activeBrokers = [nsp, svc](std::function<void(Result<std::vector<std::string>>)> cb) {
      nsp->activeBrokers(&svc->ioLoops().next(), std::move(cb));
    };
    st.unloadNamespace = [nsp, svc](const std::string& ns, std::function<void(Status)> cb) {
      nsp->unloadNamespace(ns, &svc->ioLoops().next(), std::move(cb));
    };
  } else {
    auto cfg = impl_->ctx.config;
    st.activeBrokers = [cfg](const std::function<void(Result<std::vector<std::string>>)>& cb) {
      cb(std::vector<std::string>{cfg->advertisedAddress() + ":" +
                                  std::to_string(cfg->webServicePort())});
    };
  }
  return st;
}

void BrokerAdmin::addRoutes(Router& router) {
  addNamespaceRoutes(router, impl_->ctx);
  addTopicRoutes(router, impl_->ctx);
  addSubscriptionRoutes(router, impl_->ctx);
  addMessageRoutes(router, impl_->ctx);
  addCompactionRoutes(router, impl_->ctx);
  addBrokerInfoRoutes(router, impl_->ctx);
  addBrokerStatsRoutes(router, impl_->ctx);
  addTopicPolicyRoutes(router, impl_->ctx);
  addNamespacePolicyRoutes(router, impl_->ctx);
  addSchemaRoutes(router, impl_->ctx);
  addTransactionRoutes(router, impl_->ctx);
  addNonPersistentAliases(router);
  addDynamicConfigurationRoutes(router, impl_->ctx.config);
  addBundleSplitRoutes(router, &impl_->ctx, impl_->options.namespaceService);
  if (impl_->options.configStore && impl_->options.localStore) {
    addPlacementPolicyRoutes(router, impl_->ctx, placementStores());
  }
  std::weak_ptr<Impl> weak = impl_;
  router.add("GET", "/metrics",
             [weak](const HttpRequest&, const PathParams&, const Respond& respond) {
               auto impl = weak.lock();
               if (!impl) return respond(HttpResponse::error(503, "Broker is stopping"));
               impl->loop.execute([impl, respond] { impl->collectMetrics(respond); });
             });
  addBrokersListRoute(router, impl_->ctx.config);
  installAuthFilter(router, impl_->ctx);
}

}  // namespace magnetar::admin
