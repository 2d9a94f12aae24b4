#include "worker.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

namespace magnetar::perf {
namespace {

using nlohmann::json;
constexpr uint64_t kSecond = 1000000000ull;

double processCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

double toSeconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

std::mutex gErrorsMu;  // guards Worker::errors_ against the joiner threads

}  // namespace

Worker::Worker(WorkloadConfig config, std::string outputDir)
    : config_(std::move(config)), outputDir_(std::move(outputDir)), fleet_(config_) {
  const AppRole role = config_.transform ? AppRole::kTransform : AppRole::kConsume;
  for (uint32_t a = 0; a < config_.applications; ++a) {
    apps_.push_back(std::make_unique<Application>(config_, a, role));
  }
  for (uint32_t a = 0; config_.transform && a < config_.applications; ++a) {
    verifierConfigs_.push_back(std::make_unique<WorkloadConfig>(config_.verifierOf(a)));
    apps_.push_back(std::make_unique<Application>(*verifierConfigs_.back(), a, AppRole::kVerify));
  }
  state_.resize(apps_.size());
  lastE2e_.resize(apps_.size());
}

Worker::~Worker() {
  for (auto& t : joiners_) {
    if (t.joinable()) t.join();
  }
}

void Worker::emit(json event) {
  event["t_ns"] = monotonicNs();
  std::string line = event.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

bool Worker::allReached() const {
  for (const auto& app : apps_) {
    if (!app->joined() || !app->reachedTarget()) return false;
  }
  return true;
}

void Worker::setTargets() {
  uint64_t published = fleet_.published();
  for (size_t a = 0; a < apps_.size(); ++a) {
    apps_[a]->clearTargetReached();
    apps_[a]->setTarget(published - state_[a].base);
  }
}

bool Worker::waitPhase(bool measuring) {
  uint64_t lastProgress = 0, lastChange = monotonicNs();
  bool targetsSet = false;
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const uint64_t now = monotonicNs();
    const bool producersDone = fleet_.phaseDone();
    if (producersDone && !targetsSet) {
      setTargets();  // every send has its result: the cumulative count is final
      targetsSet = true;
    }
    if (measuring) {
      checkCatchUp(now);
      if (now - lastSampleNs_ >= kSecond) sample(now);
    }
    bool done = targetsSet;
    bool waitingForJoin = false;
    for (const auto& app : apps_) {
      if (!app->joined()) {
        waitingForJoin = measuring;
        if (!measuring) continue;  // late applications join in the measured phase
        done = false;
      } else if (!app->reachedTarget()) {
        done = false;
      }
    }
    if (done) return true;
    {
      std::lock_guard<std::mutex> lock(gErrorsMu);
      for (const auto& app : apps_) {
        std::string f = app->failure();
        if (!f.empty()) errors_.push_back(app->name() + ": " + f);
      }
      if (!errors_.empty()) return false;
    }
    uint64_t progress = fleet_.published() + fleet_.sendErrors();
    for (const auto& app : apps_) progress += app->tracker().unique() + app->tracker().duplicates();
    if (progress != lastProgress) {
      lastProgress = progress;
      lastChange = now;
    }
    bool idleByDesign = producersDone && waitingForJoin;
    for (const auto& app : apps_) {
      if (app->joined() && !app->reachedTarget()) idleByDesign = false;
    }
    if (!idleByDesign && now - lastChange > static_cast<uint64_t>(config_.stallSeconds * 1e9)) {
      std::lock_guard<std::mutex> lock(gErrorsMu);
      std::string who;
      for (const auto& app : apps_) {
        if (app->joined() && !app->reachedTarget()) {
          who += fmt::format(" {}: {} unique of {} due;", app->name(), app->tracker().unique(),
                             fleet_.published());
        }
      }
      errors_.push_back(fmt::format("stalled: no progress for {:.0f} s (producers {}done;{})",
                                    config_.stallSeconds, producersDone ? "" : "not ", who));
      return false;
    }
    if (now - startNs_ > static_cast<uint64_t>(config_.timeoutSeconds * 1e9)) {
      std::lock_guard<std::mutex> lock(gErrorsMu);
      errors_.push_back(fmt::format("timeout: run exceeded {:.0f} s", config_.timeoutSeconds));
      return false;
    }
  }
}

// An application reads at the tail once every message published more than catchUpLagMs ago has
// been delivered to it (its unique count reaches the receipts counted at now - lag).
void Worker::checkCatchUp(uint64_t now) {
  const auto lag = static_cast<uint64_t>(config_.catchUpLagMs * 1e6);
  publishedHistory_.emplace_back(now, fleet_.published());
  while (publishedHistory_.size() > 2 && publishedHistory_[1].first + lag <= now) {
    publishedHistory_.pop_front();
  }
  // Receipts counted at or before now - lag (the oldest sample when the phase is younger).
  uint64_t publishedThen = publishedHistory_.front().second;
  for (size_t a = 0; a < apps_.size(); ++a) {
    auto& app = *apps_[a];
    if (app.joinSeconds() <= 0 || !app.joined() || state_[a].caughtUpNs != 0) continue;
    uint64_t dueThen = publishedThen > state_[a].base ? publishedThen - state_[a].base : 0;
    bool atTail = app.tracker().unique() >= dueThen;
    if (atTail || (fleet_.phaseDone() && app.reachedTarget())) {
      state_[a].caughtUpNs = now;
      emit({{"event", "caught_up"},
            {"application", app.name()},
            {"catch_up_s", toSeconds(now - app.joinStartNs())}});
    }
  }
}

void Worker::sample(uint64_t now) {
  lastSampleNs_ = now;
  auto pub = fleet_.publishLatencyUs().snapshot();
  auto pubInterval = pub.minus(lastPublish_);
  lastPublish_ = std::move(pub);
  json row{{"t", toSeconds(now - measuredStartNs_)},
           {"published", fleet_.published() - publishedBefore_},
           {"publish_p50_ms", pubInterval.valueAtPercentile(50) / 1000.0},
           {"publish_p99_ms", pubInterval.valueAtPercentile(99) / 1000.0}};
  json apps = json::object();
  for (size_t a = 0; a < apps_.size(); ++a) {
    auto& app = *apps_[a];
    auto e2e = app.e2eLatencyUs().snapshot();
    auto e2eInterval = e2e.minus(lastE2e_[a]);
    lastE2e_[a] = std::move(e2e);
    uint64_t due = fleet_.published() - state_[a].base;
    uint64_t unique = app.tracker().unique();
    apps[app.name()] = {{"delivered", app.measuredDelivered()},
                        {"backlog", due > unique ? due - unique : 0},
                        {"e2e_p50_ms", e2eInterval.valueAtPercentile(50) / 1000.0},
                        {"e2e_p99_ms", e2eInterval.valueAtPercentile(99) / 1000.0}};
  }
  row["applications"] = apps;
  series_.push_back(row);
  json progress = row;
  progress["event"] = "progress";
  emit(progress);
}

int Worker::run() {
  startNs_ = monotonicNs();
  Status s = fleet_.connect();
  if (!s.isOk()) {
    std::cerr << "magnetar-perf-worker: connect: " << s.toString() << "\n";
    return 2;
  }
  for (auto& app : apps_) {
    if (app->joinSeconds() > 0) continue;
    s = app->join();
    if (!s.isOk()) {
      std::cerr << "magnetar-perf-worker: " << s.toString() << "\n";
      return 2;
    }
  }
  emit({{"event", "connected"}, {"connect_s", fleet_.connectSeconds()}});

  bool ok = true;
  for (uint32_t r = 0; r < config_.warmupRounds && ok; ++r) {
    if (config_.warmupSeconds > 0) {
      fleet_.startPhase(0, true, config_.warmupSeconds);
      std::this_thread::sleep_for(std::chrono::duration<double>(config_.warmupSeconds));
      fleet_.stopIssuing();
    } else {
      fleet_.startPhase(config_.warmupMessages, true);
    }
    ok = waitPhase(false);
    emit({{"event", "warmup_done"}, {"round", r}, {"published", fleet_.published()}});
  }
  warmupMessages_ = fleet_.published();

  if (ok) {
    for (size_t a = 0; a < apps_.size(); ++a) {
      if (apps_[a]->joinSeconds() <= 0) continue;
      state_[a].base = fleet_.published();
      s = apps_[a]->createSubscriptions(fleet_.produced());
      if (!s.isOk()) {
        errors_.push_back("late subscription: " + s.toString());
        ok = false;
      }
    }
  }
  if (ok) {
    publishedBefore_ = fleet_.published();
    lastPublish_ = fleet_.publishLatencyUs().snapshot();
    for (size_t a = 0; a < apps_.size(); ++a) lastE2e_[a] = apps_[a]->e2eLatencyUs().snapshot();
    for (auto& app : apps_) app->setTarget(UINT64_MAX);
    cpuStart_ = processCpuSeconds();
    measuredStartNs_ = lastSampleNs_ = monotonicNs();
    fleet_.startTimeline(measuredStartNs_);
    emit({{"event", "measured_start"}, {"measured_start_ns", measuredStartNs_}});
    for (auto& app : apps_) {
      if (app->joinSeconds() <= 0) continue;
      Application* raw = app.get();
      uint64_t at = measuredStartNs_ + static_cast<uint64_t>(raw->joinSeconds() * 1e9);
      joiners_.emplace_back([this, raw, at] {
        uint64_t now = monotonicNs();
        if (at > now) std::this_thread::sleep_for(std::chrono::nanoseconds(at - now));
        Status js = raw->join();
        if (!js.isOk()) {
          std::lock_guard<std::mutex> lock(gErrorsMu);
          errors_.push_back("join: " + js.toString());
          return;
        }
        emit({{"event", "joined"},
              {"application", raw->name()},
              {"join_s", toSeconds(raw->joinStartNs() - measuredStartNs_)},
              {"subscribe_s", toSeconds(raw->joinNs() - raw->joinStartNs())}});
      });
    }
    fleet_.startPhase(config_.measuredMessages, false);
    ok = waitPhase(true);
    // The measured phase ends when the slowest application got its last message.
    measuredEndNs_ = monotonicNs();
    if (ok) {
      measuredEndNs_ = 0;
      for (const auto& app : apps_) {
        measuredEndNs_ = std::max(measuredEndNs_, app->targetReachedNs());
      }
    }
    cpuEnd_ = processCpuSeconds();
    sample(monotonicNs());
    emit({{"event", "measured_end"}, {"measured_end_ns", measuredEndNs_}});
  }
  for (auto& t : joiners_) {
    if (t.joinable()) t.join();
  }
  // Let the last acks go out, then stop consuming before the end-state comparison.
  for (auto& app : apps_) app->close();
  fleet_.close();
  json r = results();
  writeFiles(r);
  emit({{"event", "done"}, {"valid", r["valid"]}});
  return r["valid"].get<bool>() ? 0 : 1;
}

}  // namespace magnetar::perf
