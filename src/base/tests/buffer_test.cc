#include "base/buffer.h"

#include <gtest/gtest.h>

namespace magnetar {

TEST(BufferTest, SharesOneBlock) {
  Buffer a = Buffer::copyOf("hello");
  EXPECT_EQ(a.useCount(), 1);
  {
    Buffer b = a;
    EXPECT_EQ(a.useCount(), 2);
    EXPECT_EQ(b.data(), a.data());
    EXPECT_EQ(b.view(), "hello");
  }
  EXPECT_EQ(a.useCount(), 1);
  Buffer c = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_EQ(c.view(), "hello");
}

TEST(BufferTest, EmptyBuffer) {
  Buffer e;
  EXPECT_EQ(e.size(), 0u);
  Buffer z = Buffer::allocate(0);
  EXPECT_TRUE(z.empty());
}

}  // namespace magnetar
