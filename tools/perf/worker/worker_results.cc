// Worker: the end-state comparison and the result files.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <numeric>

#include "worker.h"

namespace magnetar::perf {
namespace {

using nlohmann::json;

json percentiles(const LatencyHistogram& h) {
  auto ms = [](uint64_t us) { return static_cast<double>(us) / 1000.0; };
  return json{{"p50", ms(h.valueAtPercentile(50))},
              {"p90", ms(h.valueAtPercentile(90))},
              {"p99", ms(h.valueAtPercentile(99))},
              {"p999", ms(h.valueAtPercentile(99.9))},
              {"max", ms(h.max())},
              {"mean", h.mean() / 1000.0},
              {"count", h.count()}};
}

double seconds(uint64_t from, uint64_t to) {
  return to > from ? static_cast<double>(to - from) / 1e9 : 0.0;
}

bool writeText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  return static_cast<bool>(f);
}

}  // namespace

json Worker::appResult(size_t a, std::vector<std::string>& errors) {
  auto& app = *apps_[a];
  const auto& t = app.tracker();
  const auto& produced = fleet_.produced();
  const uint64_t totalProduced = std::accumulate(produced.begin(), produced.end(), uint64_t{0});
  uint64_t due = totalProduced - state_[a].base;
  uint64_t missing = due;
  if (app.joined()) {
    missing = std::max<uint64_t>(t.missing(produced), due > t.unique() ? due - t.unique() : 0);
  }
  static const char* kRoles[] = {"consume", "transform", "verify"};
  json ja{{"name", app.name()},
          {"role", kRoles[static_cast<int>(app.role())]},
          {"join_s", app.joinSeconds()},
          {"join_started_s", seconds(measuredStartNs_, app.joinStartNs())},
          {"subscribe_s", app.joined() ? seconds(app.joinStartNs(), app.joinNs()) : 0.0},
          {"unique", t.unique()},
          {"duplicates", t.duplicates()},
          {"ordering_violations", t.violations()},
          {"invalid", t.invalidCount()},
          {"missing", missing},
          {"beyond_produced_devices", t.beyondProduced(produced)},
          {"permit_violations", app.permitViolations()},
          {"measured_delivered", app.measuredDelivered()},
          {"catch_up_s", nullptr},
          {"delivered_s", nullptr},
          {"e2e_latency_ms", percentiles(app.e2eLatencyUs())}};
  if (app.joinSeconds() > 0 && state_[a].caughtUpNs != 0) {
    ja["catch_up_s"] = seconds(app.joinStartNs(), state_[a].caughtUpNs);
  }
  if (app.targetReachedNs() != 0 && measuredStartNs_ != 0) {
    ja["delivered_s"] = seconds(measuredStartNs_, app.targetReachedNs());
  }
  if (app.role() == AppRole::kTransform) {
    ja["transactions"] = config_.transactions;
    ja["batches_committed"] = app.transformCounts().committed;
    ja["transactions_aborted"] = app.transformCounts().aborted;
    ja["batch_latency_ms"] = percentiles(app.batchLatencyUs());
  }
  if (app.role() == AppRole::kVerify) {
    // Exactly once: the output's own check replaces the generic one (duplicates fail here).
    ja["aborted_visible"] = app.outputCheck().abortedVisible();
    ja["not_derived"] = app.outputCheck().notDerived();
    for (const auto& e : app.outputCheck().errors(produced)) {
      errors.push_back(fmt::format("{}: {}", app.name(), e));
    }
    return ja;
  }
  if (t.violations() > 0) {
    errors.push_back(fmt::format("{}: {} ordering violations", app.name(), t.violations()));
  }
  if (t.invalidCount() > 0) {
    errors.push_back(fmt::format("{}: {} invalid messages", app.name(), t.invalidCount()));
  }
  if (missing > 0) errors.push_back(fmt::format("{}: {} messages missing", app.name(), missing));
  if (t.beyondProduced(produced) > 0) {
    errors.push_back(fmt::format("{}: counters beyond what was produced", app.name()));
  }
  if (app.joinSeconds() > 0 && state_[a].caughtUpNs == 0) {
    errors.push_back(fmt::format("{}: never caught up", app.name()));
  }
  return ja;
}

json Worker::results() {
  json r;
  const uint64_t measured = fleet_.published() - publishedBefore_;
  const uint64_t producersDone = fleet_.phaseDoneNs();
  std::vector<std::string> errors;
  {
    // Joiner threads are joined by now; errors_ is stable.
    errors = errors_;
  }
  if (fleet_.sendErrors() > 0) {
    errors.push_back(
        fmt::format("{} sends failed, first: {}", fleet_.sendErrors(), fleet_.firstSendError()));
  }
  if (measuredStartNs_ == 0) errors.push_back("the measured phase did not start");

  LatencyHistogram e2eAll;
  json apps = json::array();
  LatencyHistogram batches;
  TransformCounts counts;
  for (size_t a = 0; a < apps_.size(); ++a) {
    // With transform, end to end is the publish of an input to the read of its output.
    if (!config_.transform || apps_[a]->role() == AppRole::kVerify) {
      e2eAll.add(apps_[a]->e2eLatencyUs());
    }
    if (apps_[a]->role() == AppRole::kTransform) {
      batches.add(apps_[a]->batchLatencyUs());
      counts.committed += apps_[a]->transformCounts().committed;
      counts.aborted += apps_[a]->transformCounts().aborted;
    }
    apps.push_back(appResult(a, errors));
  }
  if (config_.transform) {
    r["transform"] = {
        {"transactions", config_.transactions},       {"batch", config_.txnBatch},
        {"abort_fraction", config_.txnAbortFraction}, {"batches_committed", counts.committed},
        {"transactions_aborted", counts.aborted},     {"batch_latency_ms", percentiles(batches)}};
  }

  double publishS = seconds(measuredStartNs_, producersDone);
  double deliverS = seconds(measuredStartNs_, measuredEndNs_);
  double cpu = cpuEnd_ - cpuStart_;
  r["valid"] = errors.empty();
  r["errors"] = errors;
  r["connect_s"] = fleet_.connectSeconds();
  r["warmup_messages"] = warmupMessages_;
  r["measured_messages"] = measured;
  r["total_published"] = fleet_.published();
  r["measured_start_ns"] = measuredStartNs_;
  r["producers_done_ns"] = producersDone;
  r["measured_end_ns"] = measuredEndNs_;
  r["publish_s"] = publishS;
  r["deliver_s"] = deliverS;
  r["published_msgs_per_s"] = publishS > 0 ? measured / publishS : 0.0;
  r["delivered_msgs_per_s"] = deliverS > 0 ? measured / deliverS : 0.0;
  r["drain_s"] = seconds(producersDone, measuredEndNs_);
  r["send_errors"] = fleet_.sendErrors();
  r["dedup_receipts"] = fleet_.dedupReceipts();
  if (config_.receiptTimeline) {
    r["receipt_timeline_bucket_ms"] = GatewayFleet::kTimelineBucketMs;
    r["receipt_timeline"] = fleet_.receiptTimeline();
  }
  r["loadgen_cpu_s"] = cpu;
  r["loadgen_cpu_s_per_million"] = measured > 0 ? cpu / measured * 1e6 : 0.0;
  r["publish_latency_ms"] = percentiles(fleet_.publishLatencyUs());
  r["e2e_latency_ms"] = percentiles(e2eAll);
  r["applications"] = apps;
  r["timeseries"] = series_;

  // Histogram files (the launcher links them from the report).
  writeText(outputDir_ + "/publish.hgrm", fleet_.publishLatencyUs().percentileDistribution(1000));
  writeText(outputDir_ + "/e2e.hgrm", e2eAll.percentileDistribution(1000));
  for (auto& app : apps_) {
    writeText(outputDir_ + "/e2e-" + app->name() + ".hgrm",
              app->e2eLatencyUs().percentileDistribution(1000));
  }
  return r;
}

void Worker::writeFiles(const json& r) {
  std::string v = "# application pod device expected counter\n";
  for (auto& app : apps_) {
    for (const auto& s : app->tracker().samples()) {
      v += fmt::format("{} {} {} {} {}\n", app->name(), s.where, s.device, s.expected, s.counter);
    }
    for (const auto& s : app->invalidSamples()) v += fmt::format("{} invalid {}\n", app->name(), s);
  }
  writeText(outputDir_ + "/violations.txt", v);
  writeText(outputDir_ + "/worker-result.json", r.dump(2) + "\n");
}

}  // namespace magnetar::perf
