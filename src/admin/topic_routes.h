// /admin/v2/persistent routes (Pulsar's PersistentTopics resource) and the HTTP lookup.
// Topic state is read only on the topic's executor; each handler answers from there.
#pragma once

#include "admin/rest_util.h"
#include "admin/router.h"

namespace magnetar::admin {

// /admin/v2/persistent/{tenant}/{namespace}: GET list, GET .../partitioned;
// .../{topic}: PUT create, DELETE; .../{topic}/partitions: PUT, GET, POST, DELETE;
// GET .../{topic}/stats, partitioned-stats, internalStats, partitioned-internalStats;
// GET /lookup/v2/topic/persistent/{tenant}/{namespace}/{topic}.
void addTopicRoutes(Router& router, const AdminContext& ctx);

// .../{topic}/subscriptions (GET), .../subscription/{sub} (PUT, DELETE), .../skip/{n},
// .../skip_all, .../resetcursor/{timestamp}, .../resetcursor (POST), .../unload (PUT),
// .../terminate (POST), .../lastMessageId, .../examinemessage, .../ledger/{l}/entry/{e} (GET).
void addSubscriptionRoutes(Router& router, const AdminContext& ctx);

}  // namespace magnetar::admin
