#include "base/dcheck.h"

#include <gtest/gtest.h>

namespace magnetar {
namespace {

// Unit tests are built with MAGNETAR_DCHECKS (CMake option, on with the tests).
TEST(DcheckTest, OnInTestBuilds) { EXPECT_EQ(MAGNETAR_DCHECK_IS_ON, 1); }

TEST(DcheckTest, PassingCheckDoesNothing) {
  int evaluated = 0;
  MAGNETAR_DCHECK(++evaluated == 1);
  EXPECT_EQ(evaluated, 1);
}

void failingFunction(int n) { MAGNETAR_DCHECK(n == 2); }

TEST(DcheckDeathTest, FailurePrintsFileLineFunctionAndAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(failingFunction(1),
               "dcheck_test\\.cc:[0-9]+: failingFunction: DCHECK failed: n == 2");
}

}  // namespace
}  // namespace magnetar
