// BookieClient against fake bookies on loopback sockets: a good one (answers ADD and READ from
// what it stored, as a bookie does) and bad ones (garbage, a connection closed mid-frame, no
// answer). A bad bookie fails its own requests with a named result; the client and the requests
// to the good bookie carry on.
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

TEST_F(BookieClientTest, GarbageFailsOnlyThatBookiesRequests) {
  FakeBookie good(Mode::kGood);
  FakeBookie bad(Mode::kGarbage);
  EXPECT_EQ(add(bad.id(), 0, "x"), BkResult::kProtocolError);
  EXPECT_EQ(add(good.id(), 0, "y"), BkResult::kOk);
  EXPECT_EQ(read(good.id(), 0).first, BkResult::kOk);
}

TEST_F(BookieClientTest, CloseMidFrameFailsTheRequest) {
  FakeBookie good(Mode::kGood);
  FakeBookie bad(Mode::kCloseMidFrame);
  EXPECT_EQ(add(bad.id(), 0, "x"), BkResult::kBookieHandleNotAvailable);
  EXPECT_EQ(add(good.id(), 0, "y"), BkResult::kOk);
  // The next request reconnects (and fails the same way): the client is not stuck.
  EXPECT_EQ(read(bad.id(), 0).first, BkResult::kBookieHandleNotAvailable);
  EXPECT_EQ(bad.requests(), 2);
}

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

}  // namespace
}  // namespace magnetar::bookkeeper
