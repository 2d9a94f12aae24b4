// Key_Shared dispatch order when consumers leave: a Dispatcher over the in-memory managed ledger,
// consumers behind ConsumerSinks whose MESSAGE frames are decoded, and an executor the test runs
// task by task so a consumer can leave while a read is in flight.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "broker/topic/internal/draining_hashes.h"
#include "broker/topic/internal/key_shared_selector.h"
#include "broker/topic/subscription.h"
#include "broker/topic/tests/dispatch_test_util.h"
#include "protocol/commands.h"
#include "protocol/frame.h"
#include "storage/memory_managed_ledger.h"

namespace magnetar::broker {
namespace {

using proto::CommandSubscribe;

// kCachedReads: whether the ledger answers reads at once from its cache (the tailing case) or
// only through the executor (a cache miss), so a test can act while a read is in flight.
template <bool kCachedReads>
class DispatchFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    sub_ = openSubscription(factory_, ex_, "t/default/persistent/ks", "ks",
                            "persistent://t/default/ks", options_, &ml_);
    ASSERT_TRUE(sub_);
  }

  std::shared_ptr<Consumer> addConsumer(uint64_t id, const std::string& name, RecordingSink* sink) {
    auto c = std::make_shared<Consumer>(id, name, sink, CommandSubscribe::Key_Shared, 0);
    EXPECT_TRUE(sub_->addConsumer(c).isOk());
    return c;
  }

  void publish(const std::string& key, int count) {
    for (int i = 0; i < count; ++i) {
      proto::MessageMetadata md;
      md.set_producer_name("p");
      md.set_sequence_id(static_cast<uint64_t>(seq_++));
      md.set_publish_time(1700000000000);
      md.set_partition_key(key);
      ml_->asyncAddEntry(protocol::Commands::newEntry(md, "x"), [](Status, storage::Position) {});
    }
    ex_.drain();
  }

  // A key whose hash `owner` owns now.
  std::string keyOwnedBy(const Consumer* owner) {
    const KeySharedSelector* sel = sub_->dispatcher()->keySharedSelector();
    for (int i = 0; i < 10000; ++i) {
      std::string key = "key-" + std::to_string(i);
      if (sel->select(sel->hashOf(key)) == owner) return key;
    }
    ADD_FAILURE() << "no key owned by " << owner->name();
    return {};
  }

  // Consumers a_ (id 1) and b_ (id 2) on sinkA_ and sinkB_, and a key each of them owns now.
  void addTwoConsumers() {
    a_ = addConsumer(1, "a", &sinkA_);
    b_ = addConsumer(2, "b", &sinkB_);
    keyA_ = keyOwnedBy(a_.get());
    keyB_ = keyOwnedBy(b_.get());
    ASSERT_FALSE(keyA_.empty());
    ASSERT_FALSE(keyB_.empty());
  }

  // New entries of a consumer out of permits go to the replay set, not parked at it.
  void noParking() { options_.dynamic.keySharedParkedEntriesMaxBytes.store(0); }

  // A key A owns that a consumer named "c" takes while it is there (its ring points come from
  // its name). Adds and removes that consumer (id 3, on sinkC_).
  std::string keyMovingFromAToC() {
    auto c = addConsumer(3, "c", &sinkC_);
    const KeySharedSelector* sel = sub_->dispatcher()->keySharedSelector();
    std::vector<std::string> keysOfC;
    for (int i = 0; i < 2000; ++i) {
      std::string key = "key-" + std::to_string(i);
      if (sel->select(sel->hashOf(key)) == c.get()) keysOfC.push_back(key);
    }
    sub_->removeConsumer(c.get());
    for (const auto& key : keysOfC) {
      if (sel->select(sel->hashOf(key)) == a_.get()) return key;
    }
    ADD_FAILURE() << "no key moves from a to c";
    return {};
  }

  StepExecutor ex_;
  storage::MemoryManagedLedgerFactory factory_{
      storage::MemoryLedgerOptions{.cachedReads = kCachedReads}};
  std::shared_ptr<storage::ManagedLedger> ml_;
  BrokerOptions options_;
  std::unique_ptr<Subscription> sub_;
  int seq_ = 0;
  // addTwoConsumers(); after sub_, so they go before it.
  RecordingSink sinkA_, sinkB_, sinkC_;
  std::shared_ptr<Consumer> a_, b_;
  std::string keyA_, keyB_;
};

using KeySharedDispatchTest = DispatchFixture<false>;
using CachedReadDispatchTest = DispatchFixture<true>;

// A owns the key and takes its first message (entry 0), then has no permits: entry 1 waits for
// redelivery. A gets one more permit, so the dispatcher reads entry 1 again (a replay read). A
// leaves while that read is in flight: entry 0 goes back for redelivery. B now owns the key and
// must get entry 0 before entry 1, although entry 1's read completes first.
TEST_F(KeySharedDispatchTest, ReplayReadInFlightDoesNotOvertakeEntriesOfLeavingConsumer) {
  noParking();  // the entries go through the replay set and its reads
  addTwoConsumers();
  publish(keyA_, 2);

  sub_->dispatcher()->flow(a_.get(), 1);
  ex_.drain();
  ASSERT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0}));

  sub_->dispatcher()->flow(b_.get(), 10);
  ASSERT_TRUE(ex_.runOne());  // the read of entry 1: A has no permits, so it waits in replay
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 1u);
  EXPECT_EQ(ex_.pending(), 0u);  // no replay read while A can take nothing
  sub_->dispatcher()->flow(a_.get(), 1);
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);  // taken out by the replay read
  ASSERT_EQ(ex_.pending(), 1u);                        // that replay read is in flight
  EXPECT_TRUE(sinkB_.entryIds.empty());

  sub_->removeConsumer(a_.get());  // entry 0 goes back for redelivery, the hash moves to B
  ex_.drain();

  EXPECT_EQ(sinkB_.entryIds, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
  EXPECT_EQ(b_->pendingAcks.size(), 2u);
}

// Same race with several entries of the key on both sides and a second key that is not involved:
// B receives the key's entries in publish order and the other key's entries are not held back.
TEST_F(KeySharedDispatchTest, KeyOrderKeptWhenOwnerLeavesDuringReplayRead) {
  noParking();  // the entries go through the replay set and its reads
  addTwoConsumers();
  publish(keyA_, 3);  // entries 0..2
  publish(keyB_, 1);  // entry 3
  publish(keyA_, 3);  // entries 4..6

  sub_->dispatcher()->flow(a_.get(), 3);
  ex_.drain();
  ASSERT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0, 1, 2}));

  sub_->dispatcher()->flow(b_.get(), 10);
  ASSERT_TRUE(ex_.runOne());  // entries 3..6 read: 3 to B, 4..6 wait (A has no permits)
  EXPECT_EQ(sinkB_.entryIds, (std::vector<uint64_t>{3}));
  EXPECT_EQ(ex_.pending(), 0u);
  sub_->dispatcher()->flow(a_.get(), 3);
  ASSERT_GE(ex_.pending(), 1u);  // the replay reads of 4..6

  sub_->removeConsumer(a_.get());
  ex_.drain();

  EXPECT_EQ(sinkB_.entryIds, (std::vector<uint64_t>{3, 0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
}

// A subscription removed while its read is in flight (an unsubscribe, the last consumer of a
// non-durable one leaving): the read's completion finds the dispatcher gone and touches nothing.
TEST_F(KeySharedDispatchTest, ReadCompletingAfterTheSubscriptionWentIsDropped) {
  RecordingSink sinkA;
  auto a = addConsumer(1, "a", &sinkA);
  publish("k", 5);
  sub_->dispatcher()->flow(a.get(), 10);
  ASSERT_EQ(ex_.pending(), 1u);  // the read, in flight
  sub_.reset();
  ex_.drain();
  EXPECT_TRUE(sinkA.entryIds.empty());
}

// Reads the cache answers are dispatched in the caller's pass, kInlineReadRounds batches at most;
// the rest goes through the executor.
TEST_F(CachedReadDispatchTest, TailingReadsDispatchInlineThenThroughTheExecutor) {
  options_.dynamic.dispatcherMaxReadBatchSize.store(10);
  RecordingSink sinkA;
  auto a = addConsumer(1, "a", &sinkA);
  publish("k", 100);
  sub_->dispatcher()->flow(a.get(), 100);
  std::vector<uint64_t> first;
  for (uint64_t i = 0; i < 10 * Dispatcher::kInlineReadRounds; ++i) first.push_back(i);
  EXPECT_EQ(sinkA.entryIds, first);
  EXPECT_EQ(ex_.pending(), 1u);  // the next read, queued behind other work
  ex_.drain();
  ASSERT_EQ(sinkA.entryIds.size(), 100u);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(sinkA.entryIds[i], i);
}

// Entries held for a consumer without permits are replayed from the cache at once, in order,
// when it sends FLOW.
TEST_F(CachedReadDispatchTest, ReplayFromCacheIsInlineAndInOrder) {
  addTwoConsumers();
  publish(keyA_, 2);  // 0, 1
  publish(keyB_, 2);  // 2, 3
  publish(keyA_, 2);  // 4, 5
  sub_->dispatcher()->flow(a_.get(), 10);
  EXPECT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0, 1, 4, 5}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 2u);
  EXPECT_EQ(ex_.pending(), 0u);
  sub_->dispatcher()->flow(b_.get(), 10);
  EXPECT_EQ(sinkB_.entryIds, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
  EXPECT_EQ(ex_.pending(), 0u);
}

// Replay batches past kInlineReadRounds go through the executor as one task per batch, not one
// per position, and keep their order.
TEST_F(CachedReadDispatchTest, ReplayPastTheInlineRoundsIsOneTaskPerBatch) {
  noParking();  // the entries go through the replay set and its reads
  options_.dynamic.dispatcherMaxReadBatchSize.store(10);
  addTwoConsumers();
  publish(keyA_, 100);
  sub_->dispatcher()->flow(a_.get(), 1);   // A takes entry 0
  sub_->dispatcher()->flow(b_.get(), 10);  // 1..99 are read and wait for A in the replay set
  ex_.drain();
  ASSERT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0}));
  ASSERT_EQ(sub_->dispatcher()->replayBacklog(), 99u);
  sub_->dispatcher()->flow(a_.get(), 200);
  EXPECT_EQ(sinkA_.entryIds.size(), 1u + 10 * Dispatcher::kInlineReadRounds);
  EXPECT_EQ(ex_.pending(), 1u);  // the next replay batch (10 positions), one task
  ex_.drain();
  std::vector<uint64_t> all(100);
  for (uint64_t i = 0; i < 100; ++i) all[i] = i;
  EXPECT_EQ(sinkA_.entryIds, all);
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
  EXPECT_TRUE(sinkB_.entryIds.empty());
}

// The same for a replay batch queued past the inline rounds.
TEST_F(CachedReadDispatchTest, ReplayTaskAfterTheSubscriptionWentIsDropped) {
  noParking();  // the entries go through the replay set and its reads
  options_.dynamic.dispatcherMaxReadBatchSize.store(10);
  addTwoConsumers();
  publish(keyA_, 100);
  sub_->dispatcher()->flow(a_.get(), 1);
  sub_->dispatcher()->flow(b_.get(), 10);
  ex_.drain();
  sub_->dispatcher()->flow(a_.get(), 200);
  const size_t before = sinkA_.entryIds.size();
  ASSERT_EQ(ex_.pending(), 1u);  // the next replay batch
  sub_.reset();
  ex_.drain();
  EXPECT_EQ(sinkA_.entryIds.size(), before);
}

// Entries waiting in the replay set for a consumer that takes nothing (no permits) must not hide
// the entries behind them that other consumers can take.
TEST_F(CachedReadDispatchTest, ReplayOfOthersIsNotStalledByAConsumerWithoutPermits) {
  RecordingSink sinkA, sinkB, sinkC;
  auto a = addConsumer(1, "a", &sinkA);
  auto b = addConsumer(2, "b", &sinkB);
  auto c = addConsumer(3, "c", &sinkC);
  std::string keyA = keyOwnedBy(a.get());
  std::string keyB = keyOwnedBy(b.get());
  std::string keyC = keyOwnedBy(c.get());
  publish(keyA, 20);                      // 0..19
  publish(keyC, 5);                       // 20..24
  publish(keyB, 5);                       // 25..29
  sub_->dispatcher()->flow(a.get(), 1);   // A takes 0 and then holds everything else of its key
  sub_->dispatcher()->flow(b.get(), 10);  // 1..24 wait in the replay set, B gets 25..29
  EXPECT_EQ(sinkB.entryIds, (std::vector<uint64_t>{25, 26, 27, 28, 29}));
  sub_->dispatcher()->flow(c.get(), 10);
  ex_.drain();
  EXPECT_EQ(sinkC.entryIds, (std::vector<uint64_t>{20, 21, 22, 23, 24}));
  EXPECT_EQ(sinkA.entryIds, (std::vector<uint64_t>{0}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 19u);
  sub_->dispatcher()->flow(a.get(), 100);  // A's key comes back in order
  std::vector<uint64_t> all;
  for (uint64_t i = 0; i < 20; ++i) all.push_back(i);
  EXPECT_EQ(sinkA.entryIds, all);
}

// The replay set is walked per owning consumer; when consumers join or leave, its entries follow
// their keys to the new owners. A's entries wait in the replay set (no permits) while B takes all
// of its own; C joins and takes over part of both ranges; B leaves, its unacked entries come back.
// Every entry reaches the consumer owning its key when it is sent, each key in order.
TEST_F(CachedReadDispatchTest, ReplayedEntriesFollowTheirKeysWhenConsumersChange) {
  RecordingSink sinkA, sinkB, sinkC;
  auto a = addConsumer(1, "a", &sinkA);
  auto b = addConsumer(2, "b", &sinkB);
  std::vector<std::string> keysA, keysB;
  const KeySharedSelector* sel = sub_->dispatcher()->keySharedSelector();
  for (int i = 0; i < 2000 && (keysA.size() < 8 || keysB.size() < 8); ++i) {
    std::string key = "key-" + std::to_string(i);
    auto* owner = sel->select(sel->hashOf(key));
    auto& keys = owner == a.get() ? keysA : keysB;
    if (keys.size() < 8) keys.push_back(key);
  }
  ASSERT_EQ(keysA.size(), 8u);
  ASSERT_EQ(keysB.size(), 8u);
  // Entry id = round * 16 + 2k (keysA[k]) or + 2k + 1 (keysB[k]).
  auto keyOf = [&](uint64_t id) { return (id % 2 == 0 ? keysA : keysB)[(id % 16) / 2]; };
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < 8; ++k) {
      publish(keysA[k], 1);
      publish(keysB[k], 1);
    }
  }
  sub_->dispatcher()->flow(b.get(), 24);
  ex_.drain();
  ASSERT_EQ(sinkB.entryIds.size(), 24u);
  ASSERT_EQ(sub_->dispatcher()->replayBacklog(), 24u);  // all of A's

  auto c = addConsumer(3, "c", &sinkC);
  sub_->dispatcher()->flow(c.get(), 100);
  ex_.drain();
  for (uint64_t id : sinkC.entryIds) {
    EXPECT_EQ(sel->select(sel->hashOf(keyOf(id))), c.get()) << "entry " << id;
  }
  sub_->removeConsumer(b.get());
  sub_->dispatcher()->flow(a.get(), 100);
  ex_.drain();
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
  std::vector<uint64_t> got = sinkA.entryIds;
  got.insert(got.end(), sinkC.entryIds.begin(), sinkC.entryIds.end());
  std::sort(got.begin(), got.end());
  std::vector<uint64_t> all(48);
  for (uint64_t i = 0; i < 48; ++i) all[i] = i;
  EXPECT_EQ(got, all) << "A and C together get every entry once (B's come back)";
  for (uint64_t id : sinkA.entryIds) {
    EXPECT_EQ(sel->select(sel->hashOf(keyOf(id))), a.get()) << "entry " << id;
  }
  for (const auto* sink : {&sinkA, &sinkC}) {
    std::map<std::string, uint64_t> last;
    for (uint64_t id : sink->entryIds) {
      auto [it, fresh] = last.emplace(keyOf(id), id);
      if (!fresh) {
        EXPECT_LT(it->second, id) << "key " << keyOf(id) << " out of order";
        it->second = id;
      }
    }
  }
}

// Seek and unload take every consumer off the subscription one by one: what the first one held
// must not be handed to the others in between (they are about to be closed too).
TEST_F(CachedReadDispatchTest, TakingAllConsumersDispatchesNothingWhileTheyAreRemoved) {
  addTwoConsumers();
  publish(keyA_, 3);
  sub_->dispatcher()->flow(a_.get(), 10);
  sub_->dispatcher()->flow(b_.get(), 10);
  ASSERT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0, 1, 2}));
  auto all = sub_->dispatcher()->takeConsumers();
  ASSERT_EQ(all.size(), 2u);
  for (auto& c : all) sub_->removeConsumer(c.get());
  ex_.drain();
  EXPECT_TRUE(sinkB_.entryIds.empty());
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 3u);  // kept for whoever subscribes next
}

// Key_Shared look-ahead: while a consumer without permits holds min(perConsumer * consumers,
// perSubscription) entries in the replay set, no new entries are read (Pulsar 4's rule).
TEST_F(CachedReadDispatchTest, ReplaySetStopsNewReadsAtTheLookAheadThreshold) {
  options_.dynamic.dispatcherMaxReadBatchSize.store(2);
  options_.dynamic.keySharedLookAheadMsgInReplayThresholdPerConsumer.store(
      2);  // 2 consumers: 4 entries
  addTwoConsumers();
  publish(keyB_, 10);  // 0..9 for B, which has no permits yet
  publish(keyA_, 5);   // 10..14 for A
  sub_->dispatcher()->flow(a_.get(), 100);
  ex_.drain();
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 4u);
  EXPECT_TRUE(sinkA_.entryIds.empty());  // A's entries are behind the limit
  sub_->dispatcher()->flow(b_.get(), 100);
  ex_.drain();
  EXPECT_EQ(sinkB_.entryIds, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{10, 11, 12, 13, 14}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
}

TEST_F(CachedReadDispatchTest, LookAheadLimitOffReadsPastTheBlockedConsumer) {
  options_.dynamic.dispatcherMaxReadBatchSize.store(2);
  options_.dynamic.keySharedLookAheadMsgInReplayThresholdPerConsumer.store(0);
  options_.dynamic.keySharedLookAheadMsgInReplayThresholdPerSubscription.store(0);
  addTwoConsumers();
  publish(keyB_, 10);
  publish(keyA_, 5);
  sub_->dispatcher()->flow(a_.get(), 100);
  ex_.drain();
  EXPECT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{10, 11, 12, 13, 14}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 10u);
}

// Issue 45: a replay read visits only the entries of consumers that can take something. With
// 40,000 entries waiting for A (no permits), B's 1,000 redelivered entries cost 1,000 visits (the
// old scan walked A's 40,000 at every read), and B gets them back in order.
TEST_F(CachedReadDispatchTest, ReplayReadsDoNotVisitEntriesWaitingForASlowConsumer) {
  options_.dynamic.keySharedLookAheadMsgInReplayThresholdPerConsumer.store(0);
  options_.dynamic.keySharedLookAheadMsgInReplayThresholdPerSubscription.store(0);
  addTwoConsumers();
  publish(keyA_, 40000);  // 0..39999 for A, which never has permits
  publish(keyB_, 1000);   // 40000..40999 (one ledger)
  sub_->dispatcher()->flow(b_.get(), 1000);
  ex_.drain();
  ASSERT_EQ(sinkB_.entryIds.size(), 1000u);
  ASSERT_EQ(sub_->dispatcher()->replayBacklog(), 40000u);
  EXPECT_EQ(sub_->dispatcher()->stats().replayEntriesVisited, 0u);
  sub_->dispatcher()->redeliver(b_.get(), {});  // B's 1,000 join the replay set
  ASSERT_EQ(sub_->dispatcher()->replayBacklog(), 41000u);
  for (int i = 0; i < 100; ++i) sub_->dispatcher()->flow(b_.get(), 10);
  ex_.drain();
  EXPECT_EQ(sub_->dispatcher()->stats().replayEntriesVisited, 1000u);
  ASSERT_EQ(sinkB_.entryIds.size(), 2000u);
  for (uint64_t i = 0; i < 2000; ++i) EXPECT_EQ(sinkB_.entryIds[i], 40000 + i % 1000) << i;
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 40000u);
  EXPECT_TRUE(sinkA_.entryIds.empty());
}

// A key that moves to a joining consumer while the old one holds an unacked message of it
// (draining): its entries wait, unvisited, until that message is acked, then go to the new owner
// in order.
TEST_F(CachedReadDispatchTest, DrainingKeyEntriesGoToTheNewOwnerOnceTheOldOneAcks) {
  addTwoConsumers();
  RecordingSink sinkC;
  auto c = addConsumer(3, "c", &sinkC);
  const KeySharedSelector* sel = sub_->dispatcher()->keySharedSelector();
  std::vector<std::string> keysOfC;
  for (int i = 0; i < 2000; ++i) {
    std::string key = "key-" + std::to_string(i);
    if (sel->select(sel->hashOf(key)) == c.get()) keysOfC.push_back(key);
  }
  sub_->removeConsumer(c.get());
  std::string moving;  // A's now, C's again once C is back (its ring points come from its name)
  for (const auto& key : keysOfC) {
    if (sel->select(sel->hashOf(key)) == a_.get()) moving = key;
  }
  ASSERT_FALSE(moving.empty());
  publish(moving, 3);  // 0..2
  sub_->dispatcher()->flow(a_.get(), 1);
  ASSERT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0}));
  RecordingSink sinkC2;
  auto c2 = addConsumer(4, "c", &sinkC2);
  ASSERT_EQ(sel->select(sel->hashOf(moving)), c2.get());
  sub_->dispatcher()->flow(c2.get(), 10);
  ex_.drain();
  EXPECT_TRUE(sinkC2.entryIds.empty());  // A still holds entry 0 of the key
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 2u);
  const uint64_t visited = sub_->dispatcher()->stats().replayEntriesVisited;
  sub_->dispatcher()->flow(b_.get(), 10);
  ex_.drain();
  EXPECT_EQ(sub_->dispatcher()->stats().replayEntriesVisited, visited);  // held: not visited
  std::vector<storage::Position> heldByA;
  a_->pendingAcks.forEach(
      [&](storage::Position p, const Consumer::PendingAck&) { heldByA.push_back(p); });
  ASSERT_EQ(heldByA.size(), 1u);
  const auto draining = sub_->dispatcher()->drainingHashes();
  ASSERT_EQ(draining.size(), 1u);
  EXPECT_EQ(draining[0].hash, sel->hashOf(moving));
  EXPECT_EQ(draining[0].holder, a_.get());
  EXPECT_EQ(draining[0].unackMsgs, 1);
  EXPECT_GT(draining[0].blockedAttempts, 0u);
  const uint64_t cleared = sub_->dispatcher()->drainingHashesClearedTotal();
  sub_->dispatcher()->acked(a_.get(), heldByA);
  ex_.drain();
  EXPECT_EQ(sinkC2.entryIds, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
  EXPECT_TRUE(sub_->dispatcher()->drainingHashes().empty());
  EXPECT_EQ(sub_->dispatcher()->drainingHashesClearedTotal(), cleared + 1);
  EXPECT_EQ(a_->drainingHashesClearedTotal, 1u);
}

// The draining hashes are re-derived from the consumers' pending entries at each change: a key
// that moved away from A drains while A holds an entry of it, and stops draining when it moves
// back to A (its owner again); its new entries then go to A, after the one A holds.
TEST_F(CachedReadDispatchTest, AKeyMovedBackToItsHolderStopsDraining) {
  addTwoConsumers();
  const KeySharedSelector* sel = sub_->dispatcher()->keySharedSelector();
  const std::string moving = keyMovingFromAToC();
  ASSERT_FALSE(moving.empty());
  publish(moving, 3);  // 0..2
  sub_->dispatcher()->flow(a_.get(), 1);
  ASSERT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0}));
  RecordingSink sinkC2;
  auto c2 = addConsumer(4, "c", &sinkC2);
  ASSERT_EQ(sel->select(sel->hashOf(moving)), c2.get());
  sub_->dispatcher()->flow(c2.get(), 10);
  ex_.drain();
  EXPECT_TRUE(sinkC2.entryIds.empty());
  ASSERT_EQ(sub_->dispatcher()->drainingHashes().size(), 1u);
  sub_->removeConsumer(c2.get());  // the key is A's again: nothing drains
  ex_.drain();
  EXPECT_TRUE(sub_->dispatcher()->drainingHashes().empty());
  sub_->dispatcher()->flow(a_.get(), 10);
  ex_.drain();
  EXPECT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
}

// A hash drains at A; A leaves: its entry goes back for redelivery and the new owner gets the
// key's entries from the first, in order; nothing drains any more.
TEST_F(CachedReadDispatchTest, DrainingEndsWhenTheHolderLeaves) {
  addTwoConsumers();
  const KeySharedSelector* sel = sub_->dispatcher()->keySharedSelector();
  const std::string moving = keyMovingFromAToC();
  ASSERT_FALSE(moving.empty());
  publish(moving, 3);  // 0..2
  sub_->dispatcher()->flow(a_.get(), 1);
  ASSERT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0}));
  RecordingSink sinkC2;
  auto c2 = addConsumer(4, "c", &sinkC2);
  sub_->dispatcher()->flow(c2.get(), 10);
  ex_.drain();
  EXPECT_TRUE(sinkC2.entryIds.empty());
  ASSERT_EQ(sub_->dispatcher()->drainingHashes().size(), 1u);
  sub_->removeConsumer(a_.get());
  ex_.drain();
  ASSERT_EQ(sel->select(sel->hashOf(moving)), c2.get());
  EXPECT_EQ(sinkC2.entryIds, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_TRUE(sub_->dispatcher()->drainingHashes().empty());
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
}

// Parking (issue 47): A is out of permits, so the new entries of its key wait at A, in memory;
// its next FLOW sends them in order with no read, also where a read needs the executor.
TEST_F(KeySharedDispatchTest, EntriesParkedAtAConsumerOutOfPermitsGoOutInOrderWithoutARead) {
  addTwoConsumers();
  publish(keyA_, 5);  // 0..4
  sub_->dispatcher()->flow(a_.get(), 1);
  ex_.drain();
  ASSERT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0}));
  sub_->dispatcher()->flow(b_.get(), 10);
  ex_.drain();
  EXPECT_EQ(a_->parked.size(), 4u);
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 4u);
  sub_->dispatcher()->flow(a_.get(), 2);
  EXPECT_EQ(ex_.pending(), 0u);  // no read: the parked entries went at once
  EXPECT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0, 1, 2}));
  sub_->dispatcher()->flow(a_.get(), 10);
  EXPECT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
  EXPECT_EQ(sub_->dispatcher()->stats().replayEntriesVisited, 0u);
  EXPECT_TRUE(sinkB_.entryIds.empty());
}

// An entry of the key redelivered (older) while newer ones are parked: the redelivery goes
// first, then the parked ones, in position order.
TEST_F(CachedReadDispatchTest, ARedeliveryGoesBeforeTheParkedEntriesOfItsKey) {
  addTwoConsumers();
  publish(keyA_, 3);  // 0..2
  sub_->dispatcher()->flow(a_.get(), 1);
  sub_->dispatcher()->flow(b_.get(), 10);  // B's permits let the dispatcher read on
  ex_.drain();
  ASSERT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0}));
  ASSERT_EQ(a_->parked.size(), 2u);
  std::vector<storage::Position> held;
  a_->pendingAcks.forEach(
      [&](storage::Position p, const Consumer::PendingAck&) { held.push_back(p); });
  ASSERT_EQ(held.size(), 1u);
  sub_->dispatcher()->redeliver(a_.get(), held);
  ex_.drain();
  sub_->dispatcher()->flow(a_.get(), 10);
  ex_.drain();
  EXPECT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0, 0, 1, 2}));
  EXPECT_TRUE(a_->parked.empty());
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
}

// The parked entries follow their key when its owner leaves: B gets them, in order, after the
// one A had unacked.
TEST_F(CachedReadDispatchTest, ParkedEntriesFollowTheirKeyWhenTheOwnerLeaves) {
  addTwoConsumers();
  publish(keyA_, 3);  // 0..2
  sub_->dispatcher()->flow(a_.get(), 1);
  sub_->dispatcher()->flow(b_.get(), 10);
  ex_.drain();
  ASSERT_EQ(a_->parked.size(), 2u);
  EXPECT_TRUE(sinkB_.entryIds.empty());
  sub_->removeConsumer(a_.get());
  ex_.drain();
  EXPECT_EQ(sinkB_.entryIds, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
}

// Past keySharedParkedEntriesMaxBytes new entries go to the replay set: the parked (older) ones
// still go first, then the replay set's, in order.
TEST_F(CachedReadDispatchTest, ParkingStopsAtItsByteBoundAndOrderHolds) {
  addTwoConsumers();
  publish(keyA_, 3);
  sub_->dispatcher()->flow(a_.get(), 1);
  sub_->dispatcher()->flow(b_.get(), 10);
  ex_.drain();  // 0 to A, 1 and 2 parked
  ASSERT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0}));
  ASSERT_EQ(a_->parked.size(), 2u);
  options_.dynamic.keySharedParkedEntriesMaxBytes.store(1);
  publish(keyA_, 2);
  sub_->dispatcher()->flow(b_.get(), 1);  // a pass: 3 and 4 are read, over the bound
  ex_.drain();
  EXPECT_EQ(a_->parked.size(), 2u);
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 4u);
  sub_->dispatcher()->flow(a_.get(), 100);
  ex_.drain();
  EXPECT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
}

}  // namespace
}  // namespace magnetar::broker
