#include "base/inline_function.h"

#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace magnetar {
namespace {

using Fn = InlineFunction<int(int, std::string), 64>;

TEST(InlineFunctionTest, CallsWithArgumentsAndReportsEmpty) {
  Fn empty;
  EXPECT_FALSE(empty);
  Fn null = nullptr;
  EXPECT_FALSE(null);
  int base = 40;
  Fn f = [base](int x, std::string s) { return base + x + static_cast<int>(s.size()); };
  ASSERT_TRUE(f);
  EXPECT_EQ(f(1, "ab"), 43);
  EXPECT_EQ(f(0, ""), 40);
}

TEST(InlineFunctionTest, MovesTheCallableAndDestroysItOnce) {
  auto token = std::make_shared<int>(7);
  {
    // A capture with a destructor (not trivially copyable): moved by its move constructor.
    Fn f = [token](int x, std::string) { return *token + x; };
    EXPECT_EQ(token.use_count(), 2);
    Fn g = std::move(f);
    EXPECT_FALSE(f);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
    EXPECT_EQ(token.use_count(), 2);
    EXPECT_EQ(g(1, ""), 8);
    Fn h;
    h = std::move(g);
    EXPECT_EQ(h(2, ""), 9);
    EXPECT_EQ(token.use_count(), 2);
    h = nullptr;
    EXPECT_EQ(token.use_count(), 1);
    EXPECT_FALSE(h);
    h = [token](int, std::string) { return 0; };
    EXPECT_EQ(token.use_count(), 2);
  }
  EXPECT_EQ(token.use_count(), 1);  // the last holder's destructor released the capture
}

TEST(InlineFunctionTest, MoveOnlyCapturesAndTrivialCapturesOfFullSize) {
  auto owned = std::make_unique<int>(5);
  InlineFunction<int(), 16> f = [p = std::move(owned)] { return *p; };
  InlineFunction<int(), 16> g = std::move(f);
  EXPECT_EQ(g(), 5);
  // A trivially copyable capture that fills the whole buffer (moved by a byte copy).
  std::array<int, 16> a{};
  a[15] = 3;
  InlineFunction<int(), 64> big = [a] { return a[15]; };
  InlineFunction<int(), 64> moved = std::move(big);
  EXPECT_FALSE(big);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(moved(), 3);
}

TEST(InlineFunctionTest, HoldsAStdFunction) {
  std::function<int(int, std::string)> sf = [](int x, std::string) { return x * 2; };
  Fn f = sf;
  EXPECT_EQ(f(21, ""), 42);
}

}  // namespace
}  // namespace magnetar
