#include "broker/topic/internal/key_shared_state.h"

#include <algorithm>

namespace magnetar::broker {

KeySharedState::KeySharedState(const BrokerOptions& options)
    : options_(options),
      selector_(std::max(1, options.subscriptionKeySharedConsistentHashingReplicaPoints),
                options.subscriptionKeySharedUseConsistentHashing) {}

int32_t KeySharedState::hashOf(const EntryMetadataPeek& md) const {
  if (md.hasOrderingKey) return selector_.hashOf(md.orderingKey);
  if (md.hasPartitionKey) return selector_.hashOf(md.partitionKey);
  return selector_.hashOf("NONE_KEY");
}

bool KeySharedState::lookAheadLimitReached(size_t consumers, size_t replaySize) const {
  const BrokerDynamicOptions& d = options_.dynamic;
  const int64_t perConsumer = d.keySharedLookAheadMsgInReplayThresholdPerConsumer.load();
  const int64_t perSubscription = d.keySharedLookAheadMsgInReplayThresholdPerSubscription.load();
  int64_t limit = -1;
  if (perConsumer > 0) limit = perConsumer * static_cast<int64_t>(consumers);
  if (perSubscription > 0) limit = limit < 0 ? perSubscription : std::min(limit, perSubscription);
  return limit >= 0 && static_cast<int64_t>(replaySize) >= limit;
}

}  // namespace magnetar::broker
