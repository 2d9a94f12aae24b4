// BookieClient against fake bookies on loopback sockets: a good one (answers ADD and READ from
// what it stored, as a bookie does) and bad ones (garbage, a connection closed mid-frame, no
// answer). A bad bookie fails its own requests with a named result; the client and the requests
// to the good bookie carry on. A busy one (a bounded queue, ETOOMANYREQUESTS beyond it): the
// count bound keeps the client under it, and refused requests are sent again.
#include "bookkeeper/bookie_client.h"

#include <gtest/gtest.h>

#include <future>

#include "bookkeeper/tests/fake_bookie.h"

namespace magnetar::bookkeeper {
namespace {

class BookieClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_.start();
    BookieClientOptions o;
    o.addTimeout = std::chrono::milliseconds(500);
    o.readTimeout = std::chrono::milliseconds(500);
    o.connectTimeout = std::chrono::milliseconds(2000);
    client_ = std::make_unique<BookieClient>(loop_, o);
  }
  void TearDown() override {
    std::promise<void> p;
    loop_.execute([&] {
      client_->close();
      p.set_value();
    });
    p.get_future().wait();
    loop_.stop();
  }
  BkResult add(const BookieId& b, int64_t entry, const std::string& payload) {
    std::promise<BkResult> p;
    loop_.execute([&] {
      client_->addEntry(b, masterKeyFor(""), EntryHeader{1, entry, entry - 1, 0},
                        Buffer::copyOf(payload), kFlagNone, [&](BkResult rc) { p.set_value(rc); });
    });
    return p.get_future().get();
  }
  std::pair<BkResult, std::string> read(const BookieId& b, int64_t entry) {
    std::promise<std::pair<BkResult, std::string>> p;
    loop_.execute([&] {
      client_->readEntry(b, 1, entry, kFlagNone, nullptr, [&](BkResult rc, std::string e) {
        p.set_value({rc, std::move(e)});
      });
    });
    return p.get_future().get();
  }

  // n ADDs of `size` bytes at once through `c`; their results in completion order.
  std::vector<std::pair<int64_t, BkResult>> addMany(BookieClient& c, const BookieId& b, int n,
                                                    size_t size = 10) {
    auto done = std::make_shared<std::promise<std::vector<std::pair<int64_t, BkResult>>>>();
    auto got = std::make_shared<std::vector<std::pair<int64_t, BkResult>>>();
    loop_.execute([&c, b, n, size, done, got] {
      for (int64_t i = 0; i < n; ++i) {
        c.addEntry(b, masterKeyFor(""), EntryHeader{1, i, i - 1, 0},
                   Buffer::copyOf(std::string(size, 'p')), kFlagNone,
                   [done, got, n, i](BkResult rc) {
                     got->push_back({i, rc});
                     if (static_cast<int>(got->size()) == n) done->set_value(*got);
                   });
      }
    });
    return done->get_future().get();
  }
  BookieClientStats statsOf(BookieClient& c) {
    std::promise<BookieClientStats> p;
    loop_.execute([&] { p.set_value(c.stats()); });
    return p.get_future().get();
  }
  void closeOnLoop(BookieClient& c) {
    std::promise<void> closed;
    loop_.execute([&] {
      c.close();
      closed.set_value();
    });
    closed.get_future().wait();
  }

  net::EventLoop loop_{"bookkeeper-io-0"};
  std::unique_ptr<BookieClient> client_;
};

TEST_F(BookieClientTest, GoodBookieStoresAndReturnsEntries) {
  FakeBookie good(Mode::kGood);
  ASSERT_EQ(add(good.id(), 0, "zero"), BkResult::kOk);
  ASSERT_EQ(add(good.id(), 1, "one"), BkResult::kOk);
  auto [rc, e] = read(good.id(), 1);
  ASSERT_EQ(rc, BkResult::kOk);
  auto v = verifyEntry(e, 1, 1);
  ASSERT_TRUE(v.isOk());
  EXPECT_EQ(v->payload, "one");
  EXPECT_EQ(read(good.id(), 7).first, BkResult::kNoSuchEntry);
}

// A bookie answering garbage or closing mid-frame, and what its requests fail with.
struct BadBookieCase {
  Mode mode;
  BkResult rc;
};

class BadBookieTest : public BookieClientTest,
                      public ::testing::WithParamInterface<BadBookieCase> {};

TEST_P(BadBookieTest, FailsOnlyThatBookiesRequests) {
  FakeBookie good(Mode::kGood);
  FakeBookie bad(GetParam().mode);
  EXPECT_EQ(add(bad.id(), 0, "x"), GetParam().rc);
  EXPECT_EQ(add(good.id(), 0, "y"), BkResult::kOk);
  EXPECT_EQ(read(good.id(), 0).first, BkResult::kOk);
  // The next request reconnects (and fails the same way): the client is not stuck.
  EXPECT_EQ(read(bad.id(), 0).first, GetParam().rc);
  EXPECT_EQ(bad.requests(), 2);
}

INSTANTIATE_TEST_SUITE_P(Modes, BadBookieTest,
                         ::testing::Values(BadBookieCase{Mode::kGarbage, BkResult::kProtocolError},
                                           BadBookieCase{Mode::kCloseMidFrame,
                                                         BkResult::kBookieHandleNotAvailable}),
                         [](const ::testing::TestParamInfo<BadBookieCase>& i) {
                           return i.param.mode == Mode::kGarbage ? "Garbage" : "CloseMidFrame";
                         });

TEST_F(BookieClientTest, SilentBookieTimesOut) {
  FakeBookie good(Mode::kGood);
  FakeBookie silent(Mode::kSilent);
  std::promise<BkResult> slow;
  loop_.execute([&] {
    client_->addEntry(silent.id(), masterKeyFor(""), EntryHeader{1, 0, -1, 1}, Buffer::copyOf("s"),
                      kFlagNone, [&](BkResult rc) { slow.set_value(rc); });
  });
  // Meanwhile the good bookie answers at once.
  EXPECT_EQ(add(good.id(), 0, "y"), BkResult::kOk);
  EXPECT_EQ(slow.get_future().get(), BkResult::kTimeout);
}

TEST_F(BookieClientTest, NobodyListeningIsBookieHandleNotAvailable) {
  int port;
  {
    FakeBookie gone(Mode::kGood);
    port = std::stoi(gone.id().substr(10));
  }
  EXPECT_EQ(add("127.0.0.1:" + std::to_string(port), 0, "x"), BkResult::kBookieHandleNotAvailable);
  EXPECT_EQ(add("not-an-address", 0, "x"), BkResult::kBookieHandleNotAvailable);
}

TEST_F(BookieClientTest, InFlightBytesAreBounded) {
  // A limit below one entry: each request waits for the previous reply; all still complete in
  // order.
  BookieClientOptions o;
  o.maxInFlightBytesPerBookie = 100;
  BookieClient limited(loop_, o);
  FakeBookie good(Mode::kGood);
  std::promise<std::vector<int64_t>> done;
  auto order = std::make_shared<std::vector<int64_t>>();
  loop_.execute([&, order] {
    for (int64_t i = 0; i < 20; ++i) {
      limited.addEntry(good.id(), masterKeyFor(""), EntryHeader{1, i, i - 1, 0},
                       Buffer::copyOf(std::string(300, 'p')), kFlagNone,
                       [&, order, i](BkResult rc) {
                         EXPECT_EQ(rc, BkResult::kOk);
                         order->push_back(i);
                         if (order->size() == 20) done.set_value(*order);
                       });
    }
  });
  auto got = done.get_future().get();
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], i);
  std::promise<void> closed;
  loop_.execute([&] {
    limited.close();
    closed.set_value();
  });
  closed.get_future().wait();
}

TEST_F(BookieClientTest, InFlightRequestsAreBoundedByCount) {
  // A bookie that queues at most 8 requests and refuses more (maxPendingAddRequestsPerThread):
  // with the count bound at 8, 100 ADDs sent at once are never refused, and the bound is used.
  BookieClientOptions o;
  o.maxInFlightRequestsPerBookie = 8;
  BookieClient limited(loop_, o);
  FakeBookie busy(Mode::kQueued, 0, 8);
  auto got = addMany(limited, busy.id(), 100);
  for (const auto& [i, rc] : got) EXPECT_EQ(rc, BkResult::kOk) << i;
  EXPECT_EQ(busy.rejected(), 0);
  EXPECT_EQ(busy.maxHeld(), 8u);
  EXPECT_EQ(busy.requests(), 100);
  EXPECT_GT(statsOf(limited).waitedForRoom, 0u);
  closeOnLoop(limited);
}

TEST_F(BookieClientTest, TooManyRequestsIsRetriedOnTheSameBookie) {
  // ETOOMANYREQUESTS is not a failure: the request goes again, after a pause (10, 20, 40, 80,
  // 160 ms here, well within the timeout).
  BookieClientOptions o;
  o.addTimeout = std::chrono::milliseconds(10000);
  BookieClient c(loop_, o);
  FakeBookie busy(Mode::kGood, /*rejectFirst=*/5);
  auto got = addMany(c, busy.id(), 1);
  EXPECT_EQ(got[0].second, BkResult::kOk);
  EXPECT_EQ(busy.rejected(), 5);
  EXPECT_EQ(busy.requests(), 6);
  EXPECT_EQ(statsOf(c).tooManyRequests, 5u);
  EXPECT_EQ(statsOf(c).timeouts, 0u);
  closeOnLoop(c);
}

TEST_F(BookieClientTest, ABookieQueueSmallerThanTheBoundIsFoundByRetries) {
  // The count bound (1000) is above the bookie's queue (8): refusals shrink the channel's
  // window and every ADD still completes.
  BookieClientOptions o;
  o.maxInFlightRequestsPerBookie = 1000;
  o.addTimeout = std::chrono::milliseconds(20000);
  BookieClient c(loop_, o);
  FakeBookie busy(Mode::kQueued, 0, 8);
  auto got = addMany(c, busy.id(), 200);
  for (const auto& [i, rc] : got) EXPECT_EQ(rc, BkResult::kOk) << i;
  EXPECT_GT(busy.rejected(), 0);
  EXPECT_EQ(statsOf(c).tooManyRequests, static_cast<uint64_t>(busy.rejected()));
  closeOnLoop(c);
}

TEST_F(BookieClientTest, ARefusalPastTheTimeoutIsTooManyRequests) {
  FakeBookie full(Mode::kGood, /*rejectFirst=*/1 << 30);
  EXPECT_EQ(add(full.id(), 0, "x"), BkResult::kTooManyRequests);  // after the 500 ms timeout
  EXPECT_GT(full.rejected(), 1);
}

TEST_F(BookieClientTest, ATimeoutMarksTheBookieAsFailingForAWhile) {
  BookieClientOptions o;
  o.addTimeout = std::chrono::milliseconds(200);
  o.bookieFailureHistoryExpiration = std::chrono::milliseconds(1000);
  BookieClient c(loop_, o);
  FakeBookie silent(Mode::kSilent);
  FakeBookie good(Mode::kGood);
  auto failing = [&](const BookieId& b) {
    std::promise<bool> p;
    loop_.execute([&] { p.set_value(c.failedRecently(b).has_value()); });
    return p.get_future().get();
  };
  EXPECT_FALSE(failing(silent.id()));
  auto got = addMany(c, silent.id(), 1);
  EXPECT_EQ(got[0].second, BkResult::kTimeout);
  EXPECT_TRUE(failing(silent.id()));
  EXPECT_EQ(addMany(c, good.id(), 1)[0].second, BkResult::kOk);
  EXPECT_FALSE(failing(good.id()));
  EXPECT_EQ(statsOf(c).timeouts, 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_FALSE(failing(silent.id()));  // the history expired
  closeOnLoop(c);
}

}  // namespace
}  // namespace magnetar::bookkeeper
