// MessageId ordering and identity.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "client/message.h"

namespace magnetar::client {
namespace {

TEST(MessageIdTest, OrdersByLedgerEntryThenBatchIndex) {
  std::vector<MessageId> ids = {
      {2, 0, -1, -1}, {1, 5, -1, 1, 3}, {1, 5, -1, 0, 3}, {1, 4, -1, -1}, {1, 5, -1, 2, 3},
      {0, 9, -1, -1},
  };
  std::sort(ids.begin(), ids.end());
  std::vector<MessageId> want = {
      {0, 9, -1, -1}, {1, 4, -1, -1}, {1, 5, -1, 0, 3}, {1, 5, -1, 1, 3}, {1, 5, -1, 2, 3},
      {2, 0, -1, -1},
  };
  EXPECT_EQ(ids, want);
  EXPECT_LT(MessageId::earliest(), (MessageId{0, 0}));
  EXPECT_LT((MessageId{1LL << 40, 1LL << 40}), MessageId::latest());
}

TEST(MessageIdTest, BatchSizeIsNotPartOfTheIdentity) {
  MessageId a{3, 4, 1, 2, 10};
  MessageId b{3, 4, 1, 2, 0};
  EXPECT_EQ(a, b);
  EXPECT_NE(a, (MessageId{3, 4, 2, 2, 10}));
  EXPECT_EQ(a.toString(), "3:4:1:2");
  EXPECT_EQ(MessageId::earliest().toString(), "-1:-1:-1:-1");
}

TEST(MessageIdTest, DefaultMessageIsEmpty) {
  Message m;
  EXPECT_TRUE(m.payload().empty());
  EXPECT_FALSE(m.hasKey());
  EXPECT_EQ(m.topic(), "");
  EXPECT_EQ(m.messageId(), MessageId{});
}

}  // namespace
}  // namespace magnetar::client
