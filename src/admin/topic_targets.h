// Runs an admin operation on every topic a REST path names: the topic itself, or each partition
// of a partitioned topic (as Pulsar's admin does for subscriptions, unload, stats).
#pragma once

#include <fmt/format.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "admin/remote_partition.h"
#include "admin/rest_util.h"

namespace magnetar::admin {

template <typename T>
using TopicOp =
    std::function<void(std::shared_ptr<broker::PersistentTopic>, std::function<void(T)>)>;

// For a partitioned topic, runs op on each partition's executor (loading it; with `create`
// also creating partitions never used yet; a missing partition yields `ifMissing`); in cluster
// mode a partition another broker owns gets `req` from its owner instead (callPartitionOwner,
// its answer read by fromRemote<T>). For a plain topic runs op once (with `create` creating the
// topic); a missing topic or namespace answers 404 itself. done(results) runs once, on any
// thread, with one result per target in partition order.
template <typename T>
void onEachTarget(const AdminContext* ctx, const HttpRequest& req, const broker::TopicName& name,
                  bool create, T ifMissing, const Respond& respond, TopicOp<T> op,
                  std::function<void(std::vector<T>)> done) {
  Result<int> partitions = ctx->service.partitionsOf(name, false);
  if (!partitions.isOk()) {
    respond(HttpResponse::error(404, partitions.status().message()));
    return;
  }
  int n = *partitions;
  if (n == 0) {
    auto gather = Gather<T>::create(1, std::move(done));
    withTopic(
        *ctx, name, respond,
        [gather, op](std::shared_ptr<broker::PersistentTopic> t) {
          op(std::move(t), [gather](T v) { gather->set(0, std::move(v)); });
        },
        create);
    return;
  }
  auto gather = Gather<T>::create(static_cast<size_t>(n), std::move(done));
  for (int i = 0; i < n; ++i) {
    if (ownedElsewhere(*ctx, name.partition(i))) {
      callPartitionOwner(*ctx, req, name.partition(i),
                         [gather, i, ifMissing](const Result<HttpClientResponse>& r) {
                           gather->set(i, fromRemote<T>(r, ifMissing));
                         });
      continue;
    }
    ctx->service.getOrCreateTopic(
        name.partition(i), create,
        [gather, op, i, ifMissing](Result<std::shared_ptr<broker::PersistentTopic>> r) {
          if (!r.isOk()) {
            gather->set(i, ifMissing);
            return;
          }
          op(*r, [gather, i](T v) { gather->set(i, std::move(v)); });
        });
  }
}

// The first non-OK status (kNotFound counted only when every target said so), else OK.
inline Status combineStatuses(const std::vector<Status>& all) {
  size_t notFound = 0;
  for (const Status& s : all) {
    if (s.code() == StatusCode::kNotFound) {
      ++notFound;
    } else if (!s.isOk()) {
      return s;
    }
  }
  if (!all.empty() && notFound == all.size()) return all.front();
  return Status::ok();
}

// A done callback for onEachTarget<Status>: 204 when every target succeeded, 404 with `notFound`
// when all said kNotFound, else the first error (Pulsar's codes).
inline std::function<void(std::vector<Status>)> answerStatuses(const Respond& respond,
                                                               const char* notFound) {
  return [respond, notFound](const std::vector<Status>& all) {
    Status s = combineStatuses(all);
    if (s.code() == StatusCode::kNotFound) return respond(HttpResponse::error(404, notFound));
    respond(s ? noContent() : errorResponse(s));
  };
}

}  // namespace magnetar::admin
