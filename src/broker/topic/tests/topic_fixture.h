// The fixture of the topic tests that need a real executor thread: a PersistentTopic over an
// in-memory managed ledger, owned by an event loop of its own.
#pragma once

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <optional>
#include <string>

#include "broker/topic/topic.h"
#include "storage/memory_managed_ledger.h"

namespace magnetar::broker {

// Base: ::testing::Test, or ::testing::TestWithParam<T> for a parametrized suite.
template <class Base = ::testing::Test>
class LoopTopicTest : public Base {
 protected:
  // Starts the loop and opens persistent://public/default/<local> on a new ledger; the topic is
  // not initialized. dedupPolicy: the namespace's deduplicationEnabled (unset: the broker's).
  void openTopic(const std::string& local, std::optional<bool> dedupPolicy = std::nullopt) {
    loop_.start();
    std::promise<std::shared_ptr<storage::ManagedLedger>> opened;
    factory_.asyncOpen("public/default/persistent/" + local, &loop_,
                       [&](Result<std::shared_ptr<storage::ManagedLedger>> r) {
                         opened.set_value(r.isOk() ? r.value() : nullptr);
                       });
    ledger_ = opened.get_future().get();
    ASSERT_TRUE(ledger_);
    auto name = TopicName::parse("persistent://public/default/" + local);
    ASSERT_TRUE(name.isOk());
    topic_ = std::make_shared<PersistentTopic>(name.value(), ledger_, loop_, options_, dedupPolicy);
  }
  // The topic is dropped on its loop (its destructor checks the thread), then the loop stops.
  void TearDown() override {
    runOnLoop([this] { topic_.reset(); });
    loop_.stop();
  }
  // Runs f on the loop and waits for it.
  template <typename F>
  void runOnLoop(F f) {
    std::promise<void> done;
    loop_.execute([&] {
      f();
      done.set_value();
    });
    done.get_future().get();
  }

  net::EventLoop loop_{"topic-loop"};
  // failAdds and the other faults, shared with the factory's ledgers.
  storage::MemoryLedgerOptions ledgerOptions_;
  storage::MemoryManagedLedgerFactory factory_{ledgerOptions_};
  BrokerOptions options_;
  std::shared_ptr<storage::ManagedLedger> ledger_;
  std::shared_ptr<PersistentTopic> topic_;
};

}  // namespace magnetar::broker
