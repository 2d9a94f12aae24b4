#include "client/receive_queue.h"

#include <gtest/gtest.h>

#include <vector>

namespace magnetar::client {
namespace {

ReceiveQueue::Item item() { return ReceiveQueue::Item{Message{}, nullptr, 7}; }

TEST(ReceiveQueue, PopAsyncTakesAQueuedItemAtOnce) {
  ReceiveQueue q;
  q.push(item());
  int calls = 0;
  q.popAsync([&](std::optional<ReceiveQueue::Item> i) {
    ASSERT_TRUE(i);
    EXPECT_EQ(i->epoch, 7u);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(q.size(), 0u);
}

TEST(ReceiveQueue, WaitersAreServedInOrderByLaterPushes) {
  ReceiveQueue q;
  std::vector<int> served;
  q.popAsync([&](std::optional<ReceiveQueue::Item> i) { served.push_back(i ? 1 : -1); });
  q.popAsync([&](std::optional<ReceiveQueue::Item> i) { served.push_back(i ? 2 : -2); });
  EXPECT_TRUE(served.empty());
  q.push(item());
  EXPECT_EQ(served, std::vector<int>({1}));
  EXPECT_EQ(q.size(), 0u);  // handed over, not queued
  q.close();                // the second waiter learns the queue closed
  EXPECT_EQ(served, std::vector<int>({1, -2}));
  q.popAsync([&](std::optional<ReceiveQueue::Item> i) { served.push_back(i ? 3 : -3); });
  EXPECT_EQ(served, std::vector<int>({1, -2, -3}));
}

}  // namespace
}  // namespace magnetar::client
