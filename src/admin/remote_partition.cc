#include "admin/remote_partition.h"

#include <memory>

#include "broker/common/topic_ownership.h"

namespace magnetar::admin {

namespace json = boost::json;

std::string partitionPath(const std::string& path, int index) {
  // Segments: "", admin, v2, {domain}, {tenant}, {ns}, {topic}, rest...
  size_t pos = 0;
  for (int i = 0; i < 6; ++i) {
    pos = path.find('/', pos + (i == 0 ? 0 : 1));
    if (pos == std::string::npos) return "";
  }
  size_t topicStart = pos + 1;
  size_t topicEnd = path.find('/', topicStart);
  std::string rest = topicEnd == std::string::npos ? "" : path.substr(topicEnd);
  if (rest == "/partitioned-stats") {
    rest = "/stats";
  } else if (rest == "/partitioned-internalStats") {
    rest = "/internalStats";
  } else if (rest == "/partitions") {
    rest = "";
  }
  std::string topic = path.substr(
      topicStart, topicEnd == std::string::npos ? std::string::npos : topicEnd - topicStart);
  if (topic.empty()) return "";
  return path.substr(0, topicStart) + topic + "-partition-" + std::to_string(index) + rest;
}

bool ownedElsewhere(const AdminContext& ctx, const broker::TopicName& partition) {
  broker::TopicOwnership* own = ctx.service.topicOwnership();
  return own != nullptr && !own->owns(partition);
}

void callPartitionOwner(const AdminContext& ctx, const HttpRequest& req,
                        const broker::TopicName& partition,
                        std::function<void(Result<HttpClientResponse>)> done) {
  broker::TopicOwnership* own = ctx.service.topicOwnership();
  net::EventLoop* loop = &ctx.service.ioLoops().next();
  std::string path = partitionPath(req.path, partition.partitionIndex());
  if (own == nullptr || path.empty()) {
    loop->execute([done] { done(Status::invalidArgument("no partition owner to ask")); });
    return;
  }
  HttpClientRequest call;
  call.method = req.method;
  call.body = req.body;
  call.contentType = req.contentType;
  call.authorization = req.authorization;
  std::string query = req.query;
  own->lookup(partition, false, "", loop,
              [loop, path, query, call = std::move(call), partition,
               done = std::move(done)](const broker::LookupAnswer& a) mutable {
                if (!a.error.isOk()) {
                  return done(Status::error(a.error.code(), "Failed to find the owner of " +
                                                                partition.toString() + ": " +
                                                                a.error.message()));
                }
                // The owner, or (a redirect) the broker to ask, which answers 307 to the owner.
                call.url = a.httpUrl + path + (query.empty() ? "" : "?" + query);
                httpCall(*loop, std::move(call), std::move(done));
              });
}

namespace {

std::string reasonOf(const HttpClientResponse& r) {
  boost::system::error_code ec;
  json::value v = json::parse(r.body, ec);
  if (!ec && v.is_object()) {
    if (const json::value* reason = v.as_object().if_contains("reason");
        reason && reason->is_string()) {
      return std::string(reason->as_string());
    }
  }
  return r.body.empty() ? "HTTP " + std::to_string(r.status) + " from " + r.url : r.body;
}

}  // namespace

Status remoteStatus(const Result<HttpClientResponse>& r) {
  if (!r.isOk()) return r.status();
  int s = r->status;
  if (s >= 200 && s < 300) return Status::ok();
  std::string reason = reasonOf(*r);
  switch (s) {
    case 404:
      return Status::notFound(reason);
    case 409:
      return Status::alreadyExists(reason);
    case 412:
      return Status::busy(reason);
    case 405:
      return Status::notAllowed(reason);
    default:
      return Status::internal(reason);
  }
}

json::value remoteJson(const Result<HttpClientResponse>& r, const json::value& ifMissing) {
  if (!r.isOk() || r->status < 200 || r->status >= 300) return ifMissing;
  boost::system::error_code ec;
  json::value v = json::parse(r->body, ec);
  return ec ? ifMissing : v;
}

std::vector<std::string> remoteStrings(const Result<HttpClientResponse>& r,
                                       const std::vector<std::string>& ifMissing) {
  json::value v = remoteJson(r, nullptr);
  if (!v.is_array()) return ifMissing;
  std::vector<std::string> out;
  for (const json::value& e : v.as_array()) {
    if (e.is_string()) out.emplace_back(e.as_string());
  }
  return out;
}

}  // namespace magnetar::admin
