// Dispatcher's dispatch rate limits (Pulsar's DispatchRateLimiter for the topic, the
// subscription and the broker): docs/rate-limits.md.
#include <algorithm>
#include <chrono>

#include "base/clock.h"
#include "base/dcheck.h"
#include "broker/topic/dispatcher.h"
#include "net/event_loop.h"

namespace magnetar::broker {

void Dispatcher::setDispatchRateLimiters(MessageRateLimiter* topic,
                                         MessageRateLimiter* subscription,
                                         MessageRateLimiter* broker,
                                         const DynamicSetting<bool>* onNonBacklog) {
  topicRate_ = topic;
  subRate_ = subscription;
  brokerRate_ = broker;
  rateOnNonBacklog_ = onNonBacklog;
}

void Dispatcher::dispatchRateChanged() {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  if (rateTimer_ && rateTimerArmed_) rateTimer_->cancel();  // its handler sees the cancel
  rateTimerArmed_ = false;
  readMoreEntries();
}

bool Dispatcher::takeDispatchAllowance(int64_t* maxMsgs, int64_t* maxBytes) {
  if (rateOnNonBacklog_ && !rateOnNonBacklog_->load()) {
    // Pulsar throttles only "inactive" (backlogged) cursors then.
    const storage::Position lac = ledger_.lastConfirmedEntry();
    if (readPosition_ > lac ||
        ledger_.numberOfEntriesBetween(
            storage::Position{readPosition_.ledgerId, readPosition_.entryId - 1}, lac) <=
            kNonBacklogEntries) {
      return true;
    }
  }
  const int64_t now = steadyNowNs();
  int64_t msgs = INT64_MAX;
  int64_t bytes = INT64_MAX;
  int64_t waitNs = 0;
  for (MessageRateLimiter* l : {topicRate_, subRate_, brokerRate_}) {
    if (!l || !l->enabled()) continue;
    msgs = std::min(msgs, l->msgTokens(now));
    bytes = std::min(bytes, l->byteTokens(now));
    waitNs = std::max(waitNs, l->throttleNanos(now));
  }
  if (msgs > 0 && bytes > 0) {
    *maxMsgs = std::min(*maxMsgs, msgs);
    *maxBytes = std::min(*maxBytes, bytes);
    return true;
  }
  ++rateLimitedTimes_;
  if (rateTimerArmed_) return false;
  if (!rateTimer_) {
    auto* loop = dynamic_cast<net::EventLoop*>(ledger_.executor());
    if (!loop) return false;
    rateTimer_ = std::make_unique<boost::asio::steady_timer>(loop->context());
  }
  // Pulsar re-reads after MESSAGE_RATE_BACKOFF_MS (1 s); here when the tokens are back, at most
  // that long.
  waitNs = std::clamp<int64_t>(waitNs, 1'000'000, 1'000'000'000);
  rateTimerArmed_ = true;
  rateTimer_->expires_after(std::chrono::nanoseconds(waitNs));
  rateTimer_->async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    rateTimerArmed_ = false;
    readMoreEntries();
  });
  return false;
}

void Dispatcher::chargeDispatchRate(uint64_t msgsBefore, uint64_t bytesBefore, int64_t entries) {
  // Pulsar's dispatchThrottlingOnBatchMessageEnabled: an entry (batch) counts as one message.
  const int64_t msgs = options_.dynamic.dispatchThrottlingOnBatchMessageEnabled.load()
                           ? entries
                           : static_cast<int64_t>(stats_.msgOutCounter - msgsBefore);
  consumeDispatchQuota(msgs, static_cast<int64_t>(stats_.bytesOutCounter - bytesBefore));
}

void Dispatcher::consumeDispatchQuota(int64_t msgs, int64_t bytes) {
  if (msgs <= 0 && bytes <= 0) return;
  const int64_t now = steadyNowNs();
  for (MessageRateLimiter* l : {topicRate_, subRate_, brokerRate_}) {
    if (l && l->enabled()) (void)l->consume(msgs, bytes, now);
  }
}

}  // namespace magnetar::broker
