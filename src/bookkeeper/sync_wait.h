// Blocking waits on the client's callback API, for tools and for BookieRecovery: run an
// asynchronous call and block the calling thread until its callback has run once.
// REQUIRES: the caller is not on a bookkeeper-io loop (the callback runs there; waiting on it
// from the loop deadlocks).
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <utility>

#include "base/blocking_wait.h"
#include "bookkeeper/protocol.h"

namespace magnetar::bookkeeper {

// Runs `start`, which must call its callback exactly once, and returns what the callback got.
template <typename T>
std::pair<BkResult, T> await(const std::function<void(std::function<void(BkResult, T)>)>& start) {
  auto p = std::make_shared<std::promise<std::pair<BkResult, T>>>();
  auto f = p->get_future();
  start([p](BkResult rc, T v) { p->set_value({rc, std::move(v)}); });
  return blockingGet(f, "a bookkeeper call");
}

// As await for a callback that takes only a result (close, delete).
inline BkResult awaitDone(const std::function<void(std::function<void(BkResult)>)>& start) {
  auto p = std::make_shared<std::promise<BkResult>>();
  auto f = p->get_future();
  start([p](BkResult rc) { p->set_value(rc); });
  return blockingGet(f, "a bookkeeper call");
}

}  // namespace magnetar::bookkeeper
