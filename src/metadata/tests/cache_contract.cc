#include "metadata/tests/cache_contract.h"

#include <map>
#include <thread>

#include "metadata/cache.h"

namespace magnetar::metadata::testing {

namespace {

// Decimal integers; anything else does not decode.
Serde<int> intSerde() {
  return Serde<int>{[](const int& v) { return std::to_string(v); },
                    [](const std::string& s) -> Result<int> {
                      if (s.empty() || s.find_first_not_of("0123456789") != s.npos) {
                        return Status::invalidArgument("not a number: " + s);
                      }
                      return std::stoi(s);
                    }};
}

}  // namespace

TEST_P(MetadataCacheContractTest, GetReadsThroughAndCachesAbsentNodesToo) {
  auto cache = MetadataCache<int>::create(store_.get(), intSerde(), &ex_);
  ASSERT_TRUE(put(*store_, root_ + "/a", "7").isOk());
  std::optional<Result<std::optional<int>>> got;
  cache->get(root_ + "/a", &ex_, [&](Result<std::optional<int>> r) { got = r; });
  runUntil([&] { return got.has_value(); });
  ASSERT_TRUE(got->isOk());
  EXPECT_EQ(**got, std::optional<int>(7));
  EXPECT_EQ(cache->getIfCached(root_ + "/a"), std::optional<int>(7));
  got.reset();
  cache->get(root_ + "/none", &ex_, [&](Result<std::optional<int>> r) { got = r; });
  runUntil([&] { return got.has_value(); });
  ASSERT_TRUE(got->isOk());
  EXPECT_FALSE((*got)->has_value());
  ASSERT_TRUE(put(*store_, root_ + "/bad", "x").isOk());
  got.reset();
  cache->get(root_ + "/bad", &ex_, [&](Result<std::optional<int>> r) { got = r; });
  runUntil([&] { return got.has_value(); });
  ASSERT_FALSE(got->isOk());
  EXPECT_EQ(got->status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got->status().message().find(root_ + "/bad"), std::string::npos);
  cache->close();
}

TEST_P(MetadataCacheContractTest, AnotherSessionsWriteInvalidatesTheEntry) {
  auto other = source_->openSession();
  auto cache = MetadataCache<int>::create(store_.get(), intSerde(), &ex_);
  std::vector<std::optional<std::string>> changed;
  cache->addListener([&](const std::optional<std::string>& p) { changed.push_back(p); });
  ASSERT_TRUE(put(*store_, root_ + "/a", "1").isOk());
  bool done = false;
  cache->get(root_ + "/a", &ex_, [&](Result<std::optional<int>>) { done = true; });
  runUntil([&] { return done; });
  ASSERT_EQ(cache->getIfCached(root_ + "/a"), std::optional<int>(1));
  ASSERT_TRUE(put(*other, root_ + "/a", "2").isOk());
  runUntil([&] { return !cache->getIfCached(root_ + "/a").has_value(); });
  EXPECT_FALSE(changed.empty());
  std::optional<Result<std::optional<int>>> got;
  cache->get(root_ + "/a", &ex_, [&](Result<std::optional<int>> r) { got = r; });
  runUntil([&] { return got.has_value(); });
  EXPECT_EQ(**got, std::optional<int>(2));
  cache->close();
  other->close();
}

// Another session writes between the cache's read and its write: the write meets kBadVersion,
// the cache reads again and applies the function to the new value (Pulsar's retry).
TEST_P(MetadataCacheContractTest, ReadModifyUpdateRetriesWhenAnotherWriterWins) {
  auto other = source_->openSession();
  auto cache = MetadataCache<int>::create(store_.get(), intSerde(), &ex_);
  ASSERT_TRUE(put(*store_, root_ + "/n", "10").isOk());
  int calls = 0;
  std::optional<Result<std::optional<int>>> got;
  cache->readModifyUpdate(
      root_ + "/n",
      [&](const std::optional<int>& cur) -> Result<std::optional<int>> {
        if (++calls == 1) {  // race: the other session writes 100 and is done first
          storage::testing::ManualExecutor ex2;
          bool raced = false;
          other->put(root_ + "/n", "100", {}, &ex2, [&](Result<Stat> r) {
            EXPECT_TRUE(r.isOk());
            raced = true;
          });
          while (!raced) {
            if (ex2.runPending() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }
        return std::optional<int>(cur.value_or(0) + 1);
      },
      &ex_, [&](Result<std::optional<int>> r) { got = r; });
  runUntil([&] { return got.has_value(); });
  ASSERT_TRUE(got->isOk()) << got->status().toString();
  EXPECT_EQ(**got, std::optional<int>(101));
  EXPECT_EQ(calls, 2);
  auto stored = get(*store_, root_ + "/n");
  EXPECT_EQ((*stored)->value, "101");
  cache->close();
  other->close();
}

TEST_P(MetadataCacheContractTest, ReadModifyUpdateCreatesLeavesAndFails) {
  auto cache = MetadataCache<int>::create(store_.get(), intSerde(), &ex_);
  auto update = [&](std::function<Result<std::optional<int>>(const std::optional<int>&)> fn) {
    std::optional<Result<std::optional<int>>> got;
    cache->readModifyUpdate(root_ + "/m", fn, &ex_, [&](Result<std::optional<int>> r) { got = r; });
    runUntil([&] { return got.has_value(); });
    return *got;
  };
  auto made = update([](const std::optional<int>& c) -> Result<std::optional<int>> {
    EXPECT_FALSE(c.has_value());
    return std::optional<int>(1);
  });
  EXPECT_EQ(*made, std::optional<int>(1));
  auto left = update(
      [](const std::optional<int>&) -> Result<std::optional<int>> { return std::optional<int>(); });
  EXPECT_EQ(*left, std::optional<int>(1));
  auto refused = update([](const std::optional<int>&) -> Result<std::optional<int>> {
    return Status::notAllowed("no");
  });
  EXPECT_EQ(refused.status().code(), StatusCode::kNotAllowed);
  EXPECT_EQ((*get(*store_, root_ + "/m"))->value, "1");
  cache->close();
}

TEST_P(MetadataCacheContractTest, CreateAndRemove) {
  auto cache = MetadataCache<int>::create(store_.get(), intSerde(), &ex_);
  auto status = [&](const std::function<void(MetadataCache<int>::StatusCallback)>& call) {
    std::optional<Status> s;
    call([&](Status r) { s = r; });
    runUntil([&] { return s.has_value(); });
    return *s;
  };
  const std::string p = root_ + "/c";
  EXPECT_TRUE(status([&](auto cb) { cache->create(p, 5, &ex_, cb); }).isOk());
  EXPECT_EQ(status([&](auto cb) { cache->create(p, 6, &ex_, cb); }).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ((*get(*store_, p))->value, "5");
  EXPECT_TRUE(status([&](auto cb) { cache->remove(p, &ex_, cb); }).isOk());
  EXPECT_FALSE(get(*store_, p)->has_value());
  EXPECT_EQ(status([&](auto cb) { cache->remove(p, &ex_, cb); }).code(), StatusCode::kNotFound);
  cache->close();
}

// The mirror hands over every child, then follows creations, changes and deletions made through
// another session.
TEST_P(MetadataCacheContractTest, ChildrenMirrorFollowsAnotherSession) {
  auto other = source_->openSession();
  ASSERT_TRUE(put(*store_, root_ + "/r/a", "1").isOk());
  auto cache = MetadataCache<int>::create(store_.get(), intSerde(), &ex_);
  std::map<std::string, int> seen;
  auto mirror =
      ChildrenMirror<int>::create(cache, store_.get(), &ex_, root_ + "/r",
                                  [&](const std::string& name, const std::optional<int>& v) {
                                    if (v) {
                                      seen[name] = *v;
                                    } else {
                                      seen.erase(name);
                                    }
                                  });
  std::optional<Status> ready;
  mirror->start([&](Status s) { ready = s; });
  runUntil([&] { return ready.has_value(); });
  ASSERT_TRUE(ready->isOk());
  EXPECT_EQ(seen, (std::map<std::string, int>{{"a", 1}}));
  ASSERT_TRUE(put(*other, root_ + "/r/b", "2").isOk());
  runUntil([&] { return seen.count("b") > 0; });
  ASSERT_TRUE(put(*other, root_ + "/r/a", "3").isOk());
  runUntil([&] { return seen["a"] == 3; });
  ASSERT_TRUE(remove(*other, root_ + "/r/b").isOk());
  runUntil([&] { return seen.count("b") == 0; });
  EXPECT_EQ(seen, (std::map<std::string, int>{{"a", 3}}));
  mirror->stop();  // reads still in flight must not reach `seen` after this scope
  cache->close();
  other->close();
}

}  // namespace magnetar::metadata::testing
