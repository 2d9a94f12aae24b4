// Topic-level policies of /admin/v2/persistent (Pulsar's TopicPolicies, on by default in Pulsar 4
// as topicLevelPoliciesEnabled) and the namespace routes added with them.
#pragma once

#include "admin/rest_util.h"
#include "admin/router.h"

namespace magnetar::admin {

// .../{topic}/{policy} GET [?applied=true], POST, DELETE for retention, messageTTL (POST
// ?messageTTL=N), maxProducers, maxConsumers, maxUnackedMessagesOnConsumer,
// maxUnackedMessagesOnSubscription, deduplicationEnabled, delayedDelivery, compactionThreshold,
// maxSubscriptionsPerTopic, inactiveTopicPolicies, persistence; backlogQuotaMap GET and
// backlogQuota POST/DELETE [?backlogQuotaType=destination_storage|message_age].
// Stored in broker::PolicyRegistry (metadata store). GET answers 204 when unset; with
// applied=true the effective value (topic > namespace > broker setting). The limits Magnetar
// enforces take effect at once (BrokerService::onTopicPoliciesChanged). Errors: 404 topic or
// namespace missing, 412 a partition's name or a bad value, 400 bad JSON.
void addTopicPolicyRoutes(Router& router, const AdminContext& ctx);

// PUT /admin/v2/namespaces/{t}/{ns}/unload (every loaded topic's clients are closed, as the topic
// unload), GET .../replication (the replication clusters: this cluster),
// .../subscriptionExpirationTime and .../autoTopicCreation GET/POST/DELETE (Pulsar's bodies and
// validation messages; autoTopicCreation is enforced by BrokerService::allowAutoTopicCreation and
// partitionsOf).
void addNamespacePolicyRoutes(Router& router, const AdminContext& ctx);

// Pulsar's AutoTopicCreationOverride validation; "" when valid, else the detail message.
std::string validateAutoTopicCreation(const boost::json::value& body,
                                      broker::AutoTopicCreationOverride* out);

}  // namespace magnetar::admin
