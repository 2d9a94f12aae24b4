#include "base/status.h"

#include <gtest/gtest.h>

namespace magnetar {

TEST(StatusTest, OkAndError) {
  Status ok;
  EXPECT_TRUE(ok.isOk());
  Status e = Status::busy("producer p1 exists");
  EXPECT_FALSE(e.isOk());
  EXPECT_EQ(e.code(), StatusCode::kBusy);
  EXPECT_EQ(e.toString(), "Busy: producer p1 exists");
}

TEST(StatusTest, ResultCarriesValueOrError) {
  Result<int> r = 5;
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(*r, 5);
  Result<int> e = Status::notFound("x");
  EXPECT_FALSE(e.isOk());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
}

}  // namespace magnetar
