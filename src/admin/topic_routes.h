// /admin/v2/persistent routes (Pulsar's PersistentTopics resource) and the HTTP lookup.
// Topic state is read only on the topic's executor; each handler answers from there.
#pragma once

#include "admin/rest_util.h"
#include "admin/router.h"

namespace magnetar::admin {

// /admin/v2/persistent/{tenant}/{namespace}: GET list, GET .../partitioned;
// .../{topic}: PUT create, DELETE; .../{topic}/partitions: PUT, GET, POST, DELETE;
// GET .../{topic}/stats, partitioned-stats, internalStats, partitioned-internalStats;
// GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic} (Pulsar's TopicLookup: LookupData,
// 404 for a missing namespace or, without auto-creation, a missing persistent topic) and its
// .../bundle (standalone; cluster mode registers its own first).
void addTopicRoutes(Router& router, const AdminContext& ctx);

// .../{topic}/subscriptions (GET), .../subscription/{sub} (PUT, DELETE), .../skip/{n},
// .../skip_all, .../resetcursor/{timestamp}, .../resetcursor (POST), .../unload (PUT),
// .../terminate (POST), .../lastMessageId, .../examinemessage, .../ledger/{l}/entry/{e} (GET).
void addSubscriptionRoutes(Router& router, const AdminContext& ctx);

// GET .../subscription/{sub}/position/{n} (peek), .../internal-info, .../messageid/{timestamp},
// .../properties; PUT .../backlogSize; POST .../subscription/{sub}/analyzeBacklog,
// .../subscription/{sub}/expireMessages[/{seconds}], .../all_subscription/expireMessages/{seconds}.
void addMessageRoutes(Router& router, const AdminContext& ctx);

// PUT .../{topic}/compaction (start; 409 "Compaction already in progress"; each partition of a
// partitioned topic), GET .../{topic}/compaction (Pulsar's LongRunningProcessStatus).
void addCompactionRoutes(Router& router, const AdminContext& ctx);

// Pulsar's ManagedLedger.getEstimatedBacklogSize(from): bytes of the ledgers after from's ledger
// plus from's ledger's share from entry from.entryId on (its size pro rata to the entries).
int64_t estimatedBacklogSize(const std::vector<storage::LedgerStats>& ledgers,
                             storage::Position from);
// The entry before p ({-1,-1} when p is the first); ledgers in id order.
storage::Position previousPosition(const std::vector<storage::LedgerStats>& ledgers,
                                   storage::Position p);

// The raw payload of a stored entry (as stored: compressed if the producer compressed it) with
// Pulsar's X-Pulsar-* headers (Message-ID, publish-time, producer-name, sequence-id, batch,
// compression, chunk, partition-key, event-time, PROPERTY-<key>); 500 for an unparsable entry.
HttpResponse messageResponse(const storage::Entry& e);

}  // namespace magnetar::admin
