// Helpers of the dispatcher tests: an executor the test runs task by task, a ConsumerSink that
// decodes the MESSAGE frames it is sent, and a Subscription on a new ledger.
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "broker/topic/consumer.h"
#include "broker/topic/subscription.h"
#include "net/executor.h"
#include "net/tests/frame_bytes.h"
#include "protocol/frame.h"

namespace magnetar::broker {

// The topic's executor: tasks run only when the test says so.
class StepExecutor : public net::Executor {
 public:
  void execute(net::Task t) override { tasks_.push_back(std::move(t)); }
  bool inExecutorThread() const override { return true; }
  bool runOne() {
    if (tasks_.empty()) return false;
    net::Task t = std::move(tasks_.front());
    tasks_.pop_front();
    t();
    return true;
  }
  void drain() {
    while (runOne()) {
    }
  }
  size_t pending() const { return tasks_.size(); }

 private:
  std::deque<net::Task> tasks_;
};

// Decodes the MESSAGE frames a consumer is sent and records their entry ids in arrival order.
class RecordingSink : public ConsumerSink {
 public:
  void send(net::FrameBatch&& frames) override {
    std::string bytes = net::flatten(frames);
    Status s = decoder_.feed(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                             [this](const proto::BaseCommand& cmd, Buffer) {
                               if (cmd.type() == proto::BaseCommand::MESSAGE) {
                                 entryIds.push_back(cmd.message().message_id().entryid());
                               }
                             });
    EXPECT_TRUE(s.isOk()) << s.toString();
  }
  void sendFrame(const Buffer&) override {}
  std::vector<uint64_t> entryIds;

 private:
  protocol::FrameDecoder decoder_;
};

// Opens ledger `ledger` of `factory` on `ex` into *ml and subscription `name` of `topic` on it
// (a cursor from the earliest entry); null, with a failed expectation, when either fails.
inline std::unique_ptr<Subscription> openSubscription(storage::ManagedLedgerFactory& factory,
                                                      StepExecutor& ex, const std::string& ledger,
                                                      const std::string& name,
                                                      const std::string& topic,
                                                      const BrokerOptions& options,
                                                      std::shared_ptr<storage::ManagedLedger>* ml) {
  factory.asyncOpen(ledger, &ex, [&](Result<std::shared_ptr<storage::ManagedLedger>> r) {
    if (r.isOk()) *ml = r.value();
  });
  ex.drain();
  EXPECT_TRUE(*ml) << "ledger " << ledger << " did not open";
  if (!*ml) return nullptr;
  auto cursor = (*ml)->openCursor(name, storage::InitialPosition::kEarliest);
  EXPECT_TRUE(cursor.isOk()) << cursor.status().toString();
  if (!cursor.isOk()) return nullptr;
  return std::make_unique<Subscription>(name, **ml, *cursor.value(), options, topic, -1);
}

}  // namespace magnetar::broker
