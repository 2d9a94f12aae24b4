// NamespaceService: bundle ownership and lookups across brokers sharing a ZooKeeper (Pulsar's
// NamespaceService + OwnershipCache + the modular load manager's registration and leader).
//
// - Registration: /loadbalance/brokers/{brokerId} (ephemeral, LocalBrokerData), rewritten when
//   the owned bundles change.
// - Leader: /loadbalance/leader (ephemeral, LeaderBroker); every broker tries to create it at
//   start and whenever it is deleted.
// - Ownership: /namespace/{tenant}/{ns}/{bundle} (ephemeral, NamespaceEphemeralData), created with
//   "must not exist", so two brokers racing for a bundle end with one owner.
// - Lookup (as Pulsar's findBrokerServiceUrl): an owned bundle -> Connect to its owner. An unowned
//   one: an authoritative lookup takes it here; otherwise the leader places it (load_placement.h:
//   Pulsar's selectBrokerForAssignment with LeastLongTermMessageRate over the brokers' reports,
//   its aggregated bundle data and its preallocated bundles, honouring the namespace isolation
//   policies and anti-affinity groups) and takes it itself or redirects (authoritative) to that
//   broker; a non-leader redirects to the leader (not authoritative). No leader known: this
//   broker takes it.
// - Session lost (ZooKeeper expired it): every bundle is released at once (owns() turns false,
//   the ownershipLost handler closes their producers and consumers) and every cached bundle cut
//   and owner is dropped (their watches went with the session: Pulsar's caches invalidate all on
//   a new session); on the new session the broker registers and runs for leader again. Its old
//   znodes vanished with the old session, so the other brokers take the bundles at the next
//   lookups.
// - Ownership lease (writable()): a cheap exists() every sessionTimeout/4; writes (SEND, ACK) are
//   refused, closing the connection, unless a request sent less than 3/4 of the session timeout
//   ago was answered on the current session. A broker resumed from a pause past its session thus
//   writes nothing for the bundles it lost before its session-expiry event arrives. Past the
//   lease, lookups and confirmOwned() do not answer from the owned set either: the ownership
//   znode is read again (the session ZooKeeper answers now decides, or the lookup fails
//   ServiceNotReady), so a resumed broker does not send clients to itself for a bundle another
//   broker has taken.
//
// Thread: everything runs on the service's own loop `metadata-store`; lookup() and owns() may be
// called from any thread.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_CLUSTER)
#error "broker/cluster is not below this broker part (src/broker/README.md)"
#endif

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "broker/cluster/cluster_metadata.h"
#include "broker/cluster/load_placement.h"
#include "broker/common/topic_ownership.h"
#include "metadata/store.h"
#include "net/event_loop.h"
#include "setting_defaults.h"

namespace magnetar::broker::cluster {

struct NamespaceServiceOptions {
  std::string clusterName;
  // metadataStoreSessionTimeoutMillis: the ownership lease (writable()) lasts 3/4 of it from the
  // sending of the last request ZooKeeper answered; a cheap request goes every quarter of it.
  int sessionTimeoutMs = static_cast<int>(setting_defaults::metadataStoreSessionTimeoutMillis);
  int defaultNumberOfNamespaceBundles = setting_defaults::defaultNumberOfNamespaceBundles;
  // The placement settings (loadBalancerBrokerOverloadedThresholdPercentage, the resource
  // weights, loadBalancerBrokerMaxTopics, loadBalancerDistributeBundlesEvenlyEnabled); dynamic:
  // read at each assignment; unset: the defaults.
  std::function<PlacementSettings()> placementSettings;
  // namespaceBundleUnloadingTimeoutMs: how long a voluntary release waits for the bundle's
  // topics to close (the release handler) before it deletes the ownership znode anyway.
  // Dynamic: read at each release; unset: 60000.
  std::function<int64_t()> bundleUnloadingTimeoutMs;
};

class NamespaceService : public TopicOwnership {
 public:
  // store: the local metadata store (ownership, registration, leader); config: the
  // configuration store (namespace policies), may be the same. Both outlive this.
  NamespaceService(metadata::Store* store, metadata::Store* config,
                   NamespaceServiceOptions options);
  ~NamespaceService() override;

  // Registers as `self` and runs for leader; returns once registered (lookups answer
  // ServiceNotReady until then). Errors: the store's (kTimeout, kClosed, kIoError), after 30 s
  // at most. Thread: main.
  Status start(const BrokerUrls& self);
  // This broker's producer-name generator id (Pulsar's DistributedIdGenerator): the sequence
  // number of the ephemeral sequential znode /counters/producer-name/-NNNNNNNNNN start() made.
  int64_t producerNameGeneratorId() const { return generatorId_; }
  // Stops the loop; the caller then closes the store (its ephemeral znodes go with the session).
  void stop();

  void lookup(const TopicName& topic, bool authoritative, const std::string& listenerName,
              net::Executor* replyEx, LookupCallback cb) override;
  bool owns(const TopicName& topic) const override;
  void confirmOwned(const TopicName& topic, net::Executor* replyEx,
                    std::function<void(bool)> cb) override;
  bool writable() const override;
  uint64_t ownershipEpoch() const override {
    return ownershipEpoch_.load(std::memory_order_acquire);
  }

  // Called on the loop after bundles were lost (session expired, ownership node deleted); the
  // handler closes the clients of the topics owns() no longer accepts. Set before start().
  void setOwnershipLostHandler(std::function<void()> fn) { onLost_ = std::move(fn); }
  // A voluntary release (admin bundle or namespace unload, a split with unload, another broker's
  // namespace unload): called on the loop once owns() turned false for `bundleKey`, before its
  // ownership znode is deleted, so the handler can close the bundle's topics (cursors written,
  // ledgers closed) while no other broker can take them (Pulsar's OwnedBundle.handleUnloadRequest
  // closes the topics, then removes the ownership). It calls `closed` once, on any thread; the
  // znode goes then, or after bundleUnloadingTimeoutMs. Lookups meanwhile answer ServiceNotReady
  // ("being unloaded"). Unset: the ownership-lost handler runs and the znode goes at once. A lost
  // session never waits. Set before start().
  using ReleaseHandler =
      std::function<void(const std::string& bundleKey, std::function<void()> closed)>;
  void setBundleReleaseHandler(ReleaseHandler fn) { onRelease_ = std::move(fn); }
  // Called on the loop once owns() turned true for `bundleKey` (taken by a lookup, found ours
  // again, or a split's half), before the lookup that took it is answered; Pulsar's
  // NamespaceBundleOwnershipListener.onLoad (the transaction coordinators of the assign topic's
  // partitions in it load then). Must not block. Set before start().
  void setBundleOwnedHandler(std::function<void(const std::string& bundleKey)> fn) {
    onOwned_ = std::move(fn);
  }

  // The LocalBrokerData JSON of every registration write (start, owned bundles changed,
  // republishRegistration()): the load manager's report (load_report.h). Unset: zero load
  // figures (localBrokerDataJson). Called on the loop. Set before start().
  using RegistrationSource = std::function<std::string(
      const BrokerUrls& self, const std::vector<std::string>& ownedBundles, int64_t startMs)>;
  void setRegistrationSource(RegistrationSource fn) { registrationSource_ = std::move(fn); }
  // The leader's aggregated BundleData by bundle (the load manager's: LoadManager::bundleData);
  // placement reads it for the brokers' long-term rates. Unset: every bundle counts as Pulsar's
  // default (50 msg/s each way). Called on the loop, must not block. Set before start().
  void setBundleDataSource(std::function<std::map<std::string, BundleData>()> fn) {
    bundleDataSource_ = std::move(fn);
  }
  // Rewrites /loadbalance/brokers/{brokerId} now (a new load report). Thread: any; ignored
  // before start() registered.
  void republishRegistration();

  // Admin views. Thread: any.
  std::vector<std::string> ownedBundles() const;  // "tenant/ns/0x..._0x...", sorted
  bool isLeader() const;
  const BrokerUrls& self() const { return self_; }
  // The bundle of a topic of namespace `ns` ("tenant/ns"): the owned bundle holding it, else
  // the one of the cached cut (the default cut when not looked up yet).
  std::string bundleOf(const std::string& ns, const std::string& fullTopicName) const override;
  // The configuration store (ClusterData, Policies); outlives this.
  metadata::Store* configStore() const { return config_; }
  // The bundle names of a namespace (as cached; the default cut when not looked up yet).
  std::vector<std::string> bundlesOf(const std::string& ns) const;
  // Registered brokers (children of /loadbalance/brokers, "host:webport"), sorted. cb on replyEx.
  void activeBrokers(net::Executor* replyEx,
                     std::function<void(Result<std::vector<std::string>>)> cb);
  // The leader from /loadbalance/leader; kNotFound when none. cb on replyEx.
  void leaderBroker(net::Executor* replyEx, std::function<void(Result<LeaderData>)> cb);
  // The namespace's bundle boundaries (from its policies, else the default cut). cb on replyEx.
  void boundariesOf(const std::string& ns, net::Executor* replyEx,
                    std::function<void(Result<std::vector<uint64_t>>)> cb) override;
  // The leader's destination for a bundle it sheds (Pulsar's doLoadShedding calls selectBroker
  // before unloading): the placement of assignAsLeader over the current reports (the owner's
  // still lists the bundle). A destination other than `owner` is preallocated the bundle (as
  // Pulsar's unload with destinationBroker), so the lookups after the unload are placed there.
  // cb on replyEx: nullopt when no broker qualifies. Thread: any.
  void chooseUnloadDestination(const std::string& bundleKey, const std::string& owner,
                               net::Executor* replyEx,
                               std::function<void(std::optional<std::string>)> cb);
  // The owner of a bundle, nullopt when unowned. cb on replyEx.
  void ownerOf(const std::string& bundleKey, net::Executor* replyEx,
               std::function<void(Result<std::optional<OwnerData>>)> cb);
  // Pulsar's setNamespaceBundleAffinity (admin unload with destinationBroker, on the leader):
  // the next placement of `bundleKey` ("tenant/ns/0x..._0x...") by this broker as leader gives
  // it to `brokerId` ("host:webPort"), once, before preallocations and the strategy
  // (ModularLoadManagerWrapper.getLeastLoaded); a broker not registered then is skipped (placed
  // as usual; Pulsar would answer it anyway). Thread: any (applied on the loop in order).
  void setBundleAffinity(const std::string& bundleKey, const std::string& brokerId);
  // Releases an owned bundle (admin unload): deletes its ownership znode and closes its
  // clients. An ownership znode that does not parse as NamespaceEphemeralData (it names no
  // broker that could release it) is deleted at the version read, whoever made it; its creator
  // sees the deletion and closes the bundle's clients, and the next lookup places the bundle
  // again. cb on replyEx. Errors: kNotFound when owned by another broker (readable znode).
  void unloadBundle(const std::string& ns, const std::string& bundle, net::Executor* replyEx,
                    std::function<void(Status)> cb);
  // Unloads every owned bundle of `ns` (Pulsar's namespace unload): this broker's are released
  // here; an unreadable ownership znode is deleted (as unloadBundle); another broker's ownership
  // znode is marked disabled (NamespaceEphemeralData.disabled, as Pulsar marks a bundle being
  // unloaded), which makes its owner close the bundle's clients and delete the znode; after
  // kUnloadWait the znode is deleted here if still there (a dead or stuck owner). cb on replyEx
  // once no bundle of ns is owned. Errors: the store's.
  void unloadNamespace(const std::string& ns, net::Executor* replyEx,
                       std::function<void(Status)> cb);
  // Splits a bundle of `ns` at the points `at` (ascending or not; from a split algorithm,
  // bundle_split.h) into at.size() + 1 bundles (Pulsar's NamespaceService.splitAndOwnBundle):
  // ownership of every child is taken first, then the namespace's cut is stored in its
  // LocalPolicies (/admin/local-policies/{tenant}/{ns}, compare-and-set on what was read), then
  // its Policies' bundles in the configuration store (updateNamespaceBundlesForPolicies), then
  // the old bundle's znode goes. Its topics stay on this broker, clients untouched; with
  // `unload` every child is then released (their topics closed, receipts first). An unowned
  // bundle is taken first. cb on replyEx. Errors: kNotFound (not a bundle of ns),
  // kInvalidArgument (a range of 1, a point outside the bundle: cutAfterSplit), kBusy (owned by
  // another broker), kBadVersion (the cut changed meanwhile), the store's.
  void splitBundle(const std::string& ns, const std::string& bundle, std::vector<uint64_t> at,
                   bool unload, net::Executor* replyEx, std::function<void(Status)> cb);
  // The number of bundles of `ns` as cached (the default count when not looked up). Any thread.
  int bundleCount(const std::string& ns) const;
  // How long unloadNamespace waits for other owners to release.
  static constexpr std::chrono::seconds kUnloadWait{5};

 private:
  using Boundaries = std::vector<uint64_t>;
  void getBoundaries(const std::string& ns, const std::function<void(Result<Boundaries>)>& cb);
  // Reads the cut from the stores (no cache) and caches it.
  void loadBoundaries(const std::string& ns, const std::function<void(Result<Boundaries>)>& cb);
  void lookupOnLoop(const TopicName& topic, bool authoritative,
                    const std::function<void(LookupAnswer)>& reply);
  // hash: the looked-up topic's bundle hash (nullopt: a bundle named by the admin), so that a
  // bundle cut changed meanwhile leads to the topic's bundle in the new cut.
  void resolveBundle(const std::string& bundleKey, bool authoritative,
                     const std::function<void(LookupAnswer)>& reply,
                     std::optional<uint32_t> hash = std::nullopt);
  // Takes an unowned bundle. First the namespace's cut is read from the stores (not the cache)
  // and the namespace's ownership znodes listed: a bundle not in the cut (split meanwhile: looked
  // up again in the new cut when hash is known) or overlapping another owned bundle is not
  // taken (kBadVersion), so a stale cut never makes two owners of one topic.
  void acquire(const std::string& bundleKey, const std::function<void(LookupAnswer)>& reply,
               std::optional<uint32_t> hash = std::nullopt);
  void createOwnership(const std::string& bundleKey,
                       const std::function<void(LookupAnswer)>& reply);
  // The leader's placement (Pulsar's selectBrokerForAssignment): the reports, then the
  // isolation policies and the anti-affinity groups are read (readPlacementPolicies), then
  // placeBundle decides and answers.
  struct Placement;
  void assignAsLeader(const std::string& bundleKey, const std::function<void(LookupAnswer)>& reply,
                      std::optional<uint32_t> hash);
  void readReports(const std::shared_ptr<Placement>& p);
  void readPlacementPolicies(const std::shared_ptr<Placement>& p);
  void readAntiAffinityGroups(const std::shared_ptr<Placement>& p);
  void placeBundle(const std::shared_ptr<Placement>& p);
  // The destination an unload named for p->key (consumed), when registered: answered (taken
  // here or a redirect) and true; false to place as usual.
  bool placeByAffinity(const std::shared_ptr<Placement>& p);
  void redirectToLeader(const std::string& bundleKey,
                        const std::function<void(LookupAnswer)>& reply,
                        std::optional<uint32_t> hash);
  // A new session of the configuration store (when it is not the local store): the cached cuts
  // are read again (their watches went with the old session).
  void onConfigSession(metadata::SessionEvent e);
  // Creates this broker's ephemeral /loadbalance/brokers/<id>; while another session holds it,
  // retries once a second, triesLeft times. Loop thread.
  void registerSelf(int triesLeft, const std::function<void(Status)>& done);
  // registerSelf found the node: done(OK) when this store's session created it, else the retry.
  void registeredBySelf(const std::string& path, int triesLeft,
                        const std::function<void(Status)>& done);
  // Creates /counters/producer-name (persistent) and an ephemeral sequential child; its number.
  void takeGeneratorId(const std::function<void(Result<int64_t>)>& done);
  void after(std::chrono::milliseconds delay, std::function<void()> fn);
  void publishRegistration();
  std::string registrationJson() const;  // loop only
  void elect();
  void onNotification(const metadata::Notification& n);
  void onSession(metadata::SessionEvent e);
  // The lease: an exists() on /loadbalance/brokers every sessionTimeout/4; its answer (on the
  // same session) extends leaseUntilNs_ to its sending time + 3/4 of the session timeout.
  void renewLease();
  // A request sent at sentNs (coarseNowNs) was answered on the current session: the lease runs
  // to sentNs + 3/4 of the session timeout, unless it already runs longer. Any thread.
  void extendLease(int64_t sentNs);
  void releaseAll(const char* why);
  // Releases an owned bundle: forgets it, closes its topics (onRelease_, waited for at most
  // bundleUnloadingTimeoutMs) or their clients (onLost_), then deletes its znode. Loop only.
  void release(const std::string& key, const std::function<void(Status)>& done);
  // unloadBundle() of a bundle not owned here: deletes its ownership znode when it does not
  // parse (or is this session's). Loop only.
  void removeUnreadableOwnership(const std::string& key, const std::function<void(Status)>& done);
  // Marks another broker's bundle disabled and waits for its znode to go (deleting it after
  // kUnloadWait). Loop only.
  void unloadElsewhere(const std::string& key, const std::function<void(Status)>& done);
  void splitOwned(const std::string& ns, const std::string& bundle, const std::vector<uint64_t>& at,
                  bool unload, const std::function<void(Status)>& done);
  // One split in progress, splitOwned's steps in order (loop only): claimSplitChildren creates
  // the children's ownership znodes one by one, writeSplitBoundaries writes the new cut to
  // LocalPolicies (compare-and-set on what was read; kBadVersion if the bundles changed since
  // `cut`), writeSplitPolicies to the Policies (retried on kBadVersion), finishSplit owns the
  // children, drops the old bundle's znode and releases the children if `unload`. A failing
  // step removes the children's znodes created so far (undoSplit) and calls `done`.
  struct BundleSplit {
    std::string ns;
    std::string key;  // ns/bundle being split
    bool unload = false;
    std::function<void(Status)> done;
    Boundaries cut;                     // the namespace's boundaries when the split began
    Boundaries next;                    // cut with the new boundaries inside the bundle
    std::vector<std::string> children;  // their bundle keys, ascending
  };
  void claimSplitChildren(const std::shared_ptr<const BundleSplit>& sp, size_t n);
  void writeSplitBoundaries(const std::shared_ptr<const BundleSplit>& sp);
  void writeSplitPolicies(const std::shared_ptr<const BundleSplit>& sp, int triesLeft);
  void finishSplit(const std::shared_ptr<const BundleSplit>& sp);
  void releaseChildren(const std::shared_ptr<const BundleSplit>& sp, size_t n, const Status& first);
  void undoSplit(const BundleSplit& sp, size_t created);
  LookupAnswer connectTo(const BrokerUrls& u) const;

  metadata::Store* store_;
  metadata::Store* config_;
  NamespaceServiceOptions options_;
  BrokerUrls self_;
  net::EventLoop loop_{"metadata-store"};
  std::function<void()> onLost_;
  ReleaseHandler onRelease_;
  std::function<void(const std::string&)> onOwned_;
  RegistrationSource registrationSource_;
  std::function<std::map<std::string, BundleData>()> bundleDataSource_;
  std::set<std::string> releasing_;  // loop only: bundles whose topics are closing (release())
  std::vector<uint64_t> listenerIds_;
  std::optional<uint64_t> configListener_;
  std::optional<uint64_t> configSessionListener_;
  bool stopped_ = false;
  int64_t startMs_ = 0;
  int64_t generatorId_ = 0;  // set by start()
  // CLOCK_MONOTONIC_COARSE ns until which writes are allowed (0: none). Written on the loop.
  std::atomic<int64_t> leaseUntilNs_{0};
  std::atomic<uint64_t> ownershipEpoch_{0};  // sessions lost (ownershipEpoch())
  uint64_t sessionGeneration_ = 0;           // loop only: +1 at every session loss

  mutable Mutex mu_;
  bool ready_ GUARDED_BY(mu_) = false;
  bool leader_ GUARDED_BY(mu_) = false;
  std::set<std::string> owned_ GUARDED_BY(mu_);                   // bundle keys
  std::map<std::string, Boundaries> boundaries_ GUARDED_BY(mu_);  // by namespace

  // Loop only.
  std::string leaderId_;
  // Other brokers' bundles as last read (each znode watched): bundle key -> owner.
  std::map<std::string, BrokerUrls> owners_;
  // Leader: bundles given out, not yet in their brokers' reports (Pulsar's preallocations).
  Preallocations preallocated_;
  // Leader: bundle key -> destination broker of an unload (setBundleAffinity), used once.
  std::map<std::string, std::string> affinity_;
  uint64_t roundRobin_ = 0;     // PlacementInput::roundRobin
  std::string loggedStrategy_;  // an unsupported placement strategy already logged
  std::mt19937_64 random_{std::random_device{}()};  // ties between equally loaded brokers
};

// "/namespace/tenant/ns/0x..._0x..." for a bundle key "tenant/ns/0x..._0x...".
std::string ownershipPath(const std::string& bundleKey);

}  // namespace magnetar::broker::cluster
