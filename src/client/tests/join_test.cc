#include "client/join.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace magnetar::client {
namespace {

TEST(JoinStatusesTest, RunsOnceAfterTheLastReportWithTheFirstError) {
  int calls = 0;
  Status seen;
  auto join = joinStatuses(3, [&](const Status& s) {
    ++calls;
    seen = s;
  });
  join(Status::ok());
  join(Status::invalidArgument("first"));
  EXPECT_EQ(calls, 0);
  join(Status::closed("second"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(seen.message(), "first");
}

TEST(JoinStatusesTest, AllOkGivesOk) {
  Status seen = Status::closed("not called");
  auto join = joinStatuses(2, [&](const Status& s) { seen = s; });
  join(Status::ok());
  join(Status::ok());
  EXPECT_TRUE(seen.isOk());
}

TEST(JoinStatusesTest, ZeroResultsCompletesAtOnce) {
  int calls = 0;
  joinStatuses(0, [&](const Status& s) {
    EXPECT_TRUE(s.isOk());
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(JoinStatusesTest, ReportsFromManyThreadsCompleteOnce) {
  std::atomic<int> calls{0};
  constexpr int kThreads = 8;
  auto join = joinStatuses(kThreads, [&](const Status&) { calls.fetch_add(1); });
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int i = 0; i < kThreads; ++i) threads.emplace_back([&] { join(Status::ok()); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
}

}  // namespace
}  // namespace magnetar::client
