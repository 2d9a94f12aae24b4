#include "metadata/tests/store_contract.h"

#include <atomic>
#include <chrono>
#include <thread>

namespace magnetar::metadata::testing {

namespace {
std::atomic<int> counter{0};

template <typename T>
struct Slot {
  std::optional<T> v;
};
}  // namespace

void StoreContractTest::SetUp() {
  source_ = GetParam()();
  ASSERT_TRUE(source_);
  store_ = source_->openSession();
  ASSERT_TRUE(store_);
  root_ = "/contract-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

void StoreContractTest::TearDown() {
  if (store_) store_->close();
  store_.reset();
  ex_.runPending();
  source_.reset();
}

void StoreContractTest::runUntil(const std::function<bool()>& pred) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (!pred()) {
    if (ex_.runPending() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "timed out";
  }
}

Result<std::optional<GetResult>> StoreContractTest::get(Store& s, const std::string& path) {
  Slot<Result<std::optional<GetResult>>> slot;
  s.get(path, &ex_, [&](Result<std::optional<GetResult>> r) {
    EXPECT_TRUE(ex_.running());  // posted to the executor, not run inline
    slot.v = std::move(r);
  });
  runUntil([&] { return slot.v.has_value(); });
  return slot.v ? std::move(*slot.v) : Status::error(StatusCode::kTimeout, "no answer");
}

Result<Stat> StoreContractTest::put(Store& s, const std::string& path, const std::string& value,
                                    const PutOptions& opts) {
  Slot<Result<Stat>> slot;
  s.put(path, value, opts, &ex_, [&](Result<Stat> r) {
    EXPECT_TRUE(ex_.running());
    slot.v = std::move(r);
  });
  runUntil([&] { return slot.v.has_value(); });
  return slot.v ? std::move(*slot.v) : Status::error(StatusCode::kTimeout, "no answer");
}

Status StoreContractTest::remove(Store& s, const std::string& path, std::optional<Version> v) {
  Slot<Status> slot;
  s.remove(path, v, &ex_, [&](Status st) {
    EXPECT_TRUE(ex_.running());
    slot.v = std::move(st);
  });
  runUntil([&] { return slot.v.has_value(); });
  return slot.v ? *slot.v : Status::error(StatusCode::kTimeout, "no answer");
}

Result<std::vector<std::string>> StoreContractTest::children(Store& s, const std::string& path) {
  Slot<Result<std::vector<std::string>>> slot;
  s.getChildren(path, &ex_, [&](Result<std::vector<std::string>> r) { slot.v = std::move(r); });
  runUntil([&] { return slot.v.has_value(); });
  return slot.v ? std::move(*slot.v) : Status::error(StatusCode::kTimeout, "no answer");
}

Result<bool> StoreContractTest::exists(Store& s, const std::string& path) {
  Slot<Result<bool>> slot;
  s.exists(path, &ex_, [&](Result<bool> r) { slot.v = std::move(r); });
  runUntil([&] { return slot.v.has_value(); });
  return slot.v ? std::move(*slot.v) : Status::error(StatusCode::kTimeout, "no answer");
}

void StoreContractTest::listen(Store& s, std::vector<Notification>* into) {
  s.registerListener([into](const Notification& n) { into->push_back(n); }, &ex_);
}

bool StoreContractTest::has(const std::vector<Notification>& got, NotificationType t,
                            const std::string& path) {
  for (const auto& n : got) {
    if (n.type == t && n.path == path) return true;
  }
  return false;
}

// ---- values, versions, compare-and-set --------------------------------------------------------

TEST_P(StoreContractTest, PutThenGetGivesTheValueAndCountsVersions) {
  std::string p = root_ + "/k";
  auto missing = get(*store_, p);
  ASSERT_TRUE(missing.isOk()) << missing.status().toString();
  EXPECT_FALSE(missing->has_value());

  auto s1 = put(*store_, p, "v1");
  ASSERT_TRUE(s1.isOk()) << s1.status().toString();
  EXPECT_EQ(s1->path, p);
  EXPECT_EQ(s1->version, 0);
  EXPECT_FALSE(s1->ephemeral);
  auto s2 = put(*store_, p, std::string("v2\0x", 4));
  ASSERT_TRUE(s2.isOk());
  EXPECT_EQ(s2->version, 1);
  EXPECT_GE(s2->modificationTimestampMs, s1->creationTimestampMs);

  auto r = get(*store_, p);
  ASSERT_TRUE(r.isOk() && r->has_value());
  EXPECT_EQ((*r)->value, std::string("v2\0x", 4));  // bytes, not C strings
  EXPECT_EQ((*r)->stat.version, 1);
  EXPECT_EQ(exists(*store_, p).value(), true);
  EXPECT_EQ(exists(*store_, p + "-not").value(), false);
}

TEST_P(StoreContractTest, ExpectedVersionsAreCompareAndSet) {
  std::string p = root_ + "/cas";
  PutOptions createOnly;
  createOnly.expectedVersion = kNotExists;
  ASSERT_TRUE(put(*store_, p, "a", createOnly).isOk());
  auto again = put(*store_, p, "b", createOnly);
  EXPECT_EQ(again.status().code(), StatusCode::kBadVersion);

  PutOptions at0;
  at0.expectedVersion = 0;
  auto ok = put(*store_, p, "b", at0);
  ASSERT_TRUE(ok.isOk()) << ok.status().toString();
  EXPECT_EQ(ok->version, 1);
  auto stale = put(*store_, p, "c", at0);  // someone else's write came first
  EXPECT_EQ(stale.status().code(), StatusCode::kBadVersion);
  EXPECT_EQ(get(*store_, p).value()->value, "b");  // the refused write changed nothing

  auto missing = put(*store_, root_ + "/none", "x", at0);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(get(*store_, root_ + "/none").value().has_value());
}

TEST_P(StoreContractTest, MissingParentsAreCreatedEmpty) {
  ASSERT_TRUE(put(*store_, root_ + "/a/b/c", "leaf").isOk());
  auto a = get(*store_, root_ + "/a");
  ASSERT_TRUE(a.isOk() && a->has_value());
  EXPECT_EQ((*a)->value, "");
  EXPECT_EQ(children(*store_, root_ + "/a").value(), std::vector<std::string>{"b"});
  EXPECT_EQ(children(*store_, root_ + "/a/b").value(), std::vector<std::string>{"c"});
}

TEST_P(StoreContractTest, ChildrenAreSortedAndEmptyForAMissingNode) {
  for (const char* n : {"b", "a", "c-1", "c"})
    ASSERT_TRUE(put(*store_, root_ + "/" + n, "").isOk());
  ASSERT_TRUE(put(*store_, root_ + "/a/deeper", "").isOk());
  EXPECT_EQ(children(*store_, root_).value(), (std::vector<std::string>{"a", "b", "c", "c-1"}));
  auto none = children(*store_, root_ + "/missing");
  ASSERT_TRUE(none.isOk());
  EXPECT_TRUE(none->empty());
}

TEST_P(StoreContractTest, RemoveChecksExistenceVersionAndChildren) {
  EXPECT_EQ(remove(*store_, root_ + "/none").code(), StatusCode::kNotFound);
  ASSERT_TRUE(put(*store_, root_ + "/p/child", "").isOk());
  EXPECT_EQ(remove(*store_, root_ + "/p").code(), StatusCode::kNotAllowed);
  EXPECT_EQ(remove(*store_, root_ + "/p/child", 7).code(), StatusCode::kBadVersion);
  EXPECT_TRUE(remove(*store_, root_ + "/p/child", 0).isOk());
  EXPECT_TRUE(remove(*store_, root_ + "/p").isOk());
  EXPECT_FALSE(get(*store_, root_ + "/p").value().has_value());
}

TEST_P(StoreContractTest, BadPathsAndValuesAreRefusedAndChangeNothing) {
  for (const std::string bad : {"", "relative", "/trailing/", "/a//b"}) {
    EXPECT_EQ(put(*store_, bad, "x").status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(get(*store_, bad).status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(remove(*store_, bad).code(), StatusCode::kInvalidArgument) << bad;
  }
  std::string big(1024 * 1024 + 1, 'x');
  EXPECT_EQ(put(*store_, root_ + "/big", big).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(get(*store_, root_ + "/big").value().has_value());
  ASSERT_TRUE(put(*store_, root_ + "/max", std::string(1000 * 1000, 'y')).isOk());
  EXPECT_EQ(get(*store_, root_ + "/max").value()->value.size(), 1000u * 1000u);
}

// ---- sessions: ephemeral and sequential nodes ---------------------------------------------------

TEST_P(StoreContractTest, EphemeralNodesLiveAsLongAsTheirSession) {
  auto other = source_->openSession();
  PutOptions eph;
  eph.ephemeral = true;
  std::string p = root_ + "/owner";
  auto made = put(*other, p, "broker-2", eph);
  ASSERT_TRUE(made.isOk()) << made.status().toString();
  EXPECT_TRUE(made->ephemeral);
  EXPECT_TRUE(made->createdBySelf);

  auto seen = get(*store_, p);
  ASSERT_TRUE(seen.isOk() && seen->has_value());
  EXPECT_EQ((*seen)->value, "broker-2");
  EXPECT_TRUE((*seen)->stat.ephemeral);
  EXPECT_FALSE((*seen)->stat.createdBySelf);  // another session's

  // An ephemeral node has no children.
  EXPECT_EQ(put(*other, p + "/child", "").status().code(), StatusCode::kNotAllowed);
  // A second owner cannot take it while the first session lives.
  PutOptions take = eph;
  take.expectedVersion = kNotExists;
  EXPECT_EQ(put(*store_, p, "broker-1", take).status().code(), StatusCode::kBadVersion);

  std::vector<Notification> got;
  listen(*store_, &got);
  ASSERT_TRUE(exists(*store_, p).value());  // sets the watch
  other->close();
  runUntil([&] { return has(got, NotificationType::kDeleted, p); });
  EXPECT_FALSE(get(*store_, p).value().has_value());
  EXPECT_TRUE(put(*store_, p, "broker-1", take).isOk());  // now free
  // A closed session refuses calls.
  EXPECT_EQ(get(*other, p).status().code(), StatusCode::kClosed);
}

TEST_P(StoreContractTest, SequentialNodesGetIncreasingTenDigitSuffixes) {
  PutOptions seq;
  seq.sequential = true;
  auto a = put(*store_, root_ + "/q/item-", "1", seq);
  auto b = put(*store_, root_ + "/q/item-", "2", seq);
  ASSERT_TRUE(a.isOk() && b.isOk());
  const std::string prefix = root_ + "/q/item-";
  ASSERT_EQ(a->path.size(), prefix.size() + 10) << a->path;
  EXPECT_EQ(a->path.compare(0, prefix.size(), prefix), 0);
  EXPECT_LT(a->path, b->path);
  auto kids = children(*store_, root_ + "/q").value();
  ASSERT_EQ(kids.size(), 2u);
  EXPECT_EQ(get(*store_, b->path).value()->value, "2");
}

// ---- notifications -----------------------------------------------------------------------------

TEST_P(StoreContractTest, WatchesSetByReadsFireForAnotherSessionsChanges) {
  auto other = source_->openSession();
  std::vector<Notification> got;
  listen(*store_, &got);
  std::string p = root_ + "/w";
  ASSERT_TRUE(put(*store_, root_ + "/seed", "").isOk());

  ASSERT_FALSE(get(*store_, p).value().has_value());  // a watch on a missing node
  ASSERT_TRUE(put(*other, p, "1").isOk());
  runUntil([&] { return has(got, NotificationType::kCreated, p); });

  ASSERT_TRUE(get(*store_, p).value().has_value());
  ASSERT_TRUE(put(*other, p, "2").isOk());
  runUntil([&] { return has(got, NotificationType::kModified, p); });

  ASSERT_TRUE(children(*store_, root_).isOk());
  ASSERT_TRUE(put(*other, root_ + "/new-child", "").isOk());
  runUntil([&] { return has(got, NotificationType::kChildrenChanged, root_); });

  ASSERT_TRUE(exists(*store_, p).value());
  ASSERT_TRUE(remove(*other, p).isOk());
  runUntil([&] { return has(got, NotificationType::kDeleted, p); });
  other->close();
}

}  // namespace magnetar::metadata::testing
