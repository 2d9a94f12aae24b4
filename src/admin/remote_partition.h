// Cluster mode: an admin call on a partitioned topic's own name reaches every partition's owner,
// as Pulsar's broker calls each partition's admin route through its PulsarAdmin client
// (PersistentTopicsBase: partitioned stats, skip-all, expire, delete, ...). The broker asked
// looks up the partition's owner (TopicOwnership::lookup, which places an unowned bundle as a
// client lookup would) and sends it the same request with the partition's name; 307 answers on
// the way are followed.
#pragma once

#include <boost/json.hpp>
#include <functional>
#include <string>
#include <vector>

#include "admin/http_client.h"
#include "admin/rest_util.h"

namespace magnetar::admin {

// `path` (/admin/v2/{persistent|non-persistent}/{tenant}/{ns}/{topic}[/rest]) for partition
// `index` of {topic}: the topic segment gets "-partition-<index>", and the partitioned topic's
// own routes map to the partition's (partitioned-stats -> stats, partitioned-internalStats ->
// internalStats, /partitions -> the topic itself). "" when path has no topic segment.
std::string partitionPath(const std::string& path, int index);

// True when this broker runs in a cluster and does not own `partition` (its admin call has to be
// sent to the owner). Thread: any.
bool ownedElsewhere(const AdminContext& ctx, const broker::TopicName& partition);

// Sends `req` (method, query, body, Authorization) for `partition` to its owner: the owner is
// looked up, then partitionPath(req.path) is requested there (redirects followed, 30 s at most).
// done runs once on an I/O loop with the owner's answer or the lookup's / transport's error.
void callPartitionOwner(const AdminContext& ctx, const HttpRequest& req,
                        const broker::TopicName& partition,
                        std::function<void(Result<HttpClientResponse>)> done);

// A remote answer as this broker's own result would be: a Status (2xx ok; 404 kNotFound, 409
// kAlreadyExists, 412 kBusy, 405 kNotAllowed, others kInternal, each with the answer's reason);
// a JSON value (parsed 2xx body, else `ifMissing`); a string list (2xx JSON array of strings,
// else `ifMissing`).
Status remoteStatus(const Result<HttpClientResponse>& r);
boost::json::value remoteJson(const Result<HttpClientResponse>& r,
                              const boost::json::value& ifMissing);
std::vector<std::string> remoteStrings(const Result<HttpClientResponse>& r,
                                       const std::vector<std::string>& ifMissing);

template <typename T>
T fromRemote(const Result<HttpClientResponse>& r, const T& ifMissing);
template <>
inline Status fromRemote<Status>(const Result<HttpClientResponse>& r, const Status&) {
  return remoteStatus(r);
}
template <>
inline boost::json::value fromRemote<boost::json::value>(const Result<HttpClientResponse>& r,
                                                         const boost::json::value& ifMissing) {
  return remoteJson(r, ifMissing);
}
template <>
inline std::vector<std::string> fromRemote<std::vector<std::string>>(
    const Result<HttpClientResponse>& r, const std::vector<std::string>& ifMissing) {
  return remoteStrings(r, ifMissing);
}

}  // namespace magnetar::admin
