// TopicOwnership: which broker serves a topic (cluster mode). BrokerService holds one when the
// broker runs in a cluster (src/broker/cluster/NamespaceService); without one (standalone) every
// topic is served here and LOOKUP answers with this broker.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_COMMON)
#error "broker/common is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "broker/common/topic_name.h"
#include "net/executor.h"

namespace magnetar::broker {

// The answer to a lookup (Pulsar's LookupResult / CommandLookupTopicResponse).
struct LookupAnswer {
  Status error;           // not ok: the lookup failed (ServiceNotReady to the client)
  bool redirect = false;  // false: Connect to url (the owner); true: ask url again
  bool authoritative = false;
  std::string url;         // pulsar://host:port
  std::string urlTls;      // pulsar+ssl://host:port or ""
  std::string httpUrl;     // the same broker's web service (admin redirects, HTTP lookup)
  std::string httpUrlTls;  // or ""
  // The named broker's advertisedListeners: name -> (pulsar:// url, pulsar+ssl:// url); empty
  // without them.
  std::map<std::string, std::pair<std::string, std::string>> listeners;
};

class TopicOwnership {
 public:
  using LookupCallback = std::function<void(LookupAnswer)>;
  virtual ~TopicOwnership() = default;
  // Finds (or, when nobody owns it, gets assigned) the owner of the topic's bundle. cb runs on
  // replyEx. authoritative: the client was redirected here to take the bundle (Pulsar's
  // authoritative flag). listenerName: one of the brokers' advertisedListeners (LOOKUP's
  // advertised_listener_name, HTTP's listenerName): the answer's url/urlTls are that listener's
  // on the broker named (an error "the broker do not have <name> listener" when it has none);
  // "" for the brokers' own URLs. Thread: any.
  virtual void lookup(const TopicName& topic, bool authoritative, const std::string& listenerName,
                      net::Executor* replyEx, LookupCallback cb) = 0;
  // True while this broker owns the topic's bundle. Thread: any (a lock and a set lookup).
  virtual bool owns(const TopicName& topic) const = 0;
  // The slow form of owns(), for a PRODUCER or SUBSCRIBE that owns() refused: true when the
  // bundle's ownership znode is this session's, even if the completion of its creation has not
  // run yet (a lookup on another broker can see the znode first; Pulsar's ownership cache makes
  // such a client wait for the acquisition instead of refusing it). cb runs on replyEx; false on
  // any error. Thread: any.
  virtual void confirmOwned(const TopicName& topic, net::Executor* replyEx,
                            std::function<void(bool)> cb) = 0;
  // The bundle boundaries of namespace "tenant/ns" (ascending, first 0, last 0xffffffff): its
  // LocalPolicies' cut (written by a split), else its Policies', else the default cut, as
  // Pulsar's NamespaceBundleFactory. cb runs on replyEx. Errors: the metadata store's.
  // Thread: any.
  virtual void boundariesOf(const std::string& ns, net::Executor* replyEx,
                            std::function<void(Result<std::vector<uint64_t>>)> cb) = 0;
  // The name ("0x..._0x...") of the bundle of a topic of namespace `ns` ("tenant/ns") by the cut
  // this broker knows (cluster mode: the namespace's real bundles, a split's halves included);
  // "" when there is no such cut (standalone: the default 4-bundle cut applies). Thread: any.
  virtual std::string bundleOf(const std::string& ns, const std::string& fullTopicName) const {
    return "";
  }
  // False while this broker may have lost its bundles without knowing yet (cluster mode: no
  // confirmed contact with ZooKeeper for most of the session timeout, or the session is lost):
  // publishes and acks must then not be written or acknowledged. Thread: any; one relaxed
  // atomic load and a coarse clock read (cheap enough for every SEND).
  virtual bool writable() const { return true; }
  // Raised each time every bundle is released at once (a lost session; cluster mode, else 0),
  // after the release. A producer or consumer whose topic was found owned under an older value
  // must not write: its bundle may be another broker's even once a new session restores
  // writable(). Read it before owns(). Thread: any.
  virtual uint64_t ownershipEpoch() const { return 0; }
};

}  // namespace magnetar::broker
