// MetadataCache<T>: a typed read-through cache over a metadata::Store (Pulsar's MetadataCache /
// MetadataCacheImpl). Values are decoded from the node's bytes with the Serde's decode and written
// with its encode. A read fills the cache (an absent node is cached as nullopt); the store's
// notifications for a cached path drop its entry, and a re-established session (the watches of
// the old one are gone) drops every entry, so the next read goes to the store again.
//
// Writes are compare-and-set on the version the cache read: readModifyUpdate retries on
// kBadVersion (another writer won), as Pulsar's does; after a write the entry is dropped and read
// again on the next get (a one-shot watch fired by the write itself must be set again).
//
// ChildrenMirror<T> keeps every child of one node in a callback's hands (Pulsar's caches listed
// and watched by a service): the registries' full in-memory views in cluster and standalone mode.
//
// Thread: any for the calls; the cache's own store callbacks and its listeners run on `loop` (one
// executor given at creation); a caller's callback is posted to the executor it names, never run
// inline. No lock is held across store I/O.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "metadata/store.h"
#include "net/executor.h"

namespace magnetar::metadata {

// A value type's serialization. decode's error (e.g. kInvalidArgument for an unreadable node)
// fails the read that met it.
template <typename T>
struct Serde {
  std::function<std::string(const T&)> encode;
  std::function<Result<T>(const std::string&)> decode;
};

template <typename T>
class MetadataCache : public std::enable_shared_from_this<MetadataCache<T>> {
 public:
  // The value (nullopt: no such node), or the store's / decode's error.
  using ValueCallback = std::function<void(Result<std::optional<T>>)>;
  using StatusCallback = std::function<void(Status)>;
  // readModifyUpdate's function: the new value from the current one (nullopt: no node); nullopt
  // leaves the node as it is (no write); an error ends the update with it. It may run more than
  // once (once per attempt), on the cache's loop.
  using Modify = std::function<Result<std::optional<T>>(const std::optional<T>&)>;
  // A changed path (data created, modified, deleted, or children changed: the node's path), or
  // nullopt when every entry was dropped (session re-established). Runs on the cache's loop.
  using Listener = std::function<void(const std::optional<std::string>&)>;

  // How many times readModifyUpdate tries before giving up with the last kBadVersion.
  static constexpr int kMaxAttempts = 20;

  // store and loop outlive the cache (close() it before they go).
  static std::shared_ptr<MetadataCache> create(Store* store, Serde<T> serde, net::Executor* loop) {
    std::shared_ptr<MetadataCache> c(new MetadataCache(store, std::move(serde), loop));
    std::weak_ptr<MetadataCache> weak = c;
    c->listenerId_ = store->registerListener(
        [weak](const Notification& n) {
          if (auto self = weak.lock()) self->onNotification(n);
        },
        loop);
    c->sessionListenerId_ = store->registerSessionListener(
        [weak](SessionEvent e) {
          if (e != SessionEvent::kSessionReestablished) return;
          if (auto self = weak.lock()) self->onSessionReestablished();
        },
        loop);
    return c;
  }
  ~MetadataCache() { close(); }
  MetadataCache(const MetadataCache&) = delete;
  MetadataCache& operator=(const MetadataCache&) = delete;

  // Stops listening to the store (the cache still answers from the store). Thread: any.
  void close() {
    MutexLock lock(mu_);
    if (closed_) return;
    closed_ = true;
    store_->unregisterListener(listenerId_);
    store_->unregisterListener(sessionListenerId_);
  }

  // Adds a listener of changes. Thread: any; before the changes it should see.
  void addListener(Listener fn) {
    MutexLock lock(mu_);
    listeners_.push_back(std::move(fn));
  }

  // The value at path: from the cache, else read (and watched) from the store.
  void get(const std::string& path, net::Executor* ex, ValueCallback cb) {
    load(path, [ex, cb = std::move(cb)](Result<Entry> e) mutable {
      post(ex, [cb = std::move(cb), e = std::move(e)]() mutable {
        cb(e.isOk() ? Result<std::optional<T>>(std::move(e->value))
                    : Result<std::optional<T>>(e.status()));
      });
    });
  }
  // The cached value, without I/O: nullopt when not cached or cached as absent.
  std::optional<T> getIfCached(const std::string& path) const {
    MutexLock lock(mu_);
    auto it = entries_.find(path);
    return it == entries_.end() ? std::nullopt : it->second.value;
  }
  // The node's children (not cached), as Store::getChildren; sets a child watch.
  void getChildren(const std::string& path, net::Executor* ex, Store::ChildrenCallback cb) {
    store_->getChildren(path, ex, std::move(cb));
  }

  // Creates the node with value. Errors: kAlreadyExists when it exists, the store's.
  void create(const std::string& path, const T& value, net::Executor* ex, StatusCallback cb) {
    PutOptions o;
    o.expectedVersion = kNotExists;
    auto self = this->shared_from_this();
    store_->put(path, serde_.encode(value), o, loop_,
                [self, path, ex, cb = std::move(cb)](Result<Stat> r) mutable {
                  self->invalidate(path);
                  Status s = r.status();
                  if (s.code() == StatusCode::kBadVersion) {
                    s = Status::alreadyExists("metadata node " + path + " already exists");
                  }
                  post(ex, [cb = std::move(cb), s] { cb(s); });
                });
  }

  // Pulsar's readModifyUpdateOrCreate: reads the value (cached or not), applies fn and writes the
  // result at the version read (creating the node when there was none); on kBadVersion (another
  // writer) reads again and retries, up to kMaxAttempts. cb gets the value written (or the value
  // left when fn returned nullopt). Errors: fn's, the store's, decode's.
  void readModifyUpdate(const std::string& path, Modify fn, net::Executor* ex, ValueCallback cb) {
    attempt(path, std::make_shared<Modify>(std::move(fn)), ex, std::move(cb), 1);
  }

  // Removes the node (whatever its version). Errors: kNotFound, the store's.
  void remove(const std::string& path, net::Executor* ex, StatusCallback cb) {
    auto self = this->shared_from_this();
    store_->remove(path, std::nullopt, loop_,
                   [self, path, ex, cb = std::move(cb)](Status s) mutable {
                     self->invalidate(path);
                     post(ex, [cb = std::move(cb), s] { cb(s); });
                   });
  }

  // Drops the entry of path / every entry: the next read goes to the store.
  void invalidate(const std::string& path) {
    MutexLock lock(mu_);
    entries_.erase(path);
    ++epochs_[path];
  }
  void invalidateAll() {
    MutexLock lock(mu_);
    for (const auto& [path, e] : entries_) ++epochs_[path];
    entries_.clear();
    ++generation_;
  }

 private:
  struct Entry {
    std::optional<T> value;
    std::optional<Stat> stat;  // nullopt: no node
  };

  MetadataCache(Store* store, Serde<T> serde, net::Executor* loop)
      : store_(store), serde_(std::move(serde)), loop_(loop) {}

  template <typename F>
  static void post(net::Executor* ex, F f) {
    ex->execute(std::move(f));
  }

  // The entry of path (cached, else read and cached unless invalidated meanwhile); done runs on
  // the cache's loop, or inline when cached.
  void load(const std::string& path, std::function<void(Result<Entry>)> done) {
    uint64_t epoch = 0;
    uint64_t generation = 0;
    std::optional<Entry> cached;
    {
      MutexLock lock(mu_);
      auto it = entries_.find(path);
      if (it != entries_.end()) cached = it->second;
      epoch = epochs_[path];
      generation = generation_;
    }
    if (cached) return done(std::move(*cached));
    auto self = this->shared_from_this();
    store_->get(path, loop_,
                [self, path, epoch, generation,
                 done = std::move(done)](Result<std::optional<GetResult>> r) {
                  if (!r.isOk()) return done(r.status());
                  Entry e;
                  if (r->has_value()) {
                    Result<T> v = self->serde_.decode((*r)->value);
                    if (!v.isOk()) {
                      return done(Status::error(v.status().code(), "metadata node " + path + ": " +
                                                                       v.status().message()));
                    }
                    e.value = std::move(*v);
                    e.stat = (*r)->stat;
                  }
                  {
                    MutexLock lock(self->mu_);
                    if (self->epochs_[path] == epoch && self->generation_ == generation) {
                      self->entries_[path] = e;
                    }
                  }
                  done(std::move(e));
                });
  }

  void attempt(const std::string& path, std::shared_ptr<Modify> fn, net::Executor* ex,
               ValueCallback cb, int n) {
    auto self = this->shared_from_this();
    load(path, [self, path, fn, ex, cb = std::move(cb), n](Result<Entry> e) mutable {
      auto fail = [ex](ValueCallback c, Status s) { post(ex, [c = std::move(c), s] { c(s); }); };
      if (!e.isOk()) return fail(std::move(cb), e.status());
      Result<std::optional<T>> next = (*fn)(e->value);
      if (!next.isOk()) return fail(std::move(cb), next.status());
      if (!next->has_value()) {
        return post(ex,
                    [cb = std::move(cb), v = std::move(e->value)]() mutable { cb(std::move(v)); });
      }
      PutOptions o;
      o.expectedVersion = e->stat ? e->stat->version : kNotExists;
      std::string bytes = self->serde_.encode(**next);
      self->store_->put(path, bytes, o, self->loop_,
                        [self, path, fn, ex, cb = std::move(cb), n,
                         v = std::move(**next)](Result<Stat> r) mutable {
                          self->invalidate(path);
                          StatusCode code = r.isOk() ? StatusCode::kOk : r.status().code();
                          bool raced =
                              code == StatusCode::kBadVersion || code == StatusCode::kNotFound;
                          if (raced && n < kMaxAttempts) {
                            return self->attempt(path, fn, ex, std::move(cb), n + 1);
                          }
                          if (!r.isOk()) {
                            Status s = r.status();
                            return post(ex, [cb = std::move(cb), s] { cb(s); });
                          }
                          post(ex, [cb = std::move(cb), v = std::move(v)]() mutable {
                            cb(std::optional<T>(std::move(v)));
                          });
                        });
    });
  }

  void onNotification(const Notification& n) {
    if (n.type != NotificationType::kChildrenChanged) invalidate(n.path);
    notifyListeners(n.path);
  }
  void onSessionReestablished() {
    invalidateAll();
    notifyListeners(std::nullopt);
  }
  void notifyListeners(const std::optional<std::string>& path) {
    std::vector<Listener> ls;
    {
      MutexLock lock(mu_);
      if (closed_) return;
      ls = listeners_;
    }
    for (const auto& l : ls) l(path);
  }

  Store* store_;
  const Serde<T> serde_;
  net::Executor* loop_;
  uint64_t listenerId_ = 0;
  uint64_t sessionListenerId_ = 0;
  mutable Mutex mu_;
  bool closed_ GUARDED_BY(mu_) = false;
  std::map<std::string, Entry> entries_ GUARDED_BY(mu_);
  // Bumped at each invalidation of a path / of all: a read started before it is not cached.
  std::map<std::string, uint64_t> epochs_ GUARDED_BY(mu_);
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::vector<Listener> listeners_ GUARDED_BY(mu_);
};

// Every child of `root` with its value, kept current: fn(name, value) for each child at start()
// and whenever one is created or changed, fn(name, nullopt) when one is deleted (or became
// unreadable: logged). Reads go through the cache (and set its watches); after a re-established
// session every child is read again. Thread: start() from any thread; fn runs on the cache's
// loop. Create it with `create` and keep it (and the cache) alive while it should follow; stop()
// it before what fn refers to goes away (reads in flight keep the mirror itself alive).
template <typename T>
class ChildrenMirror : public std::enable_shared_from_this<ChildrenMirror<T>> {
 public:
  using RecordFn = std::function<void(const std::string&, const std::optional<T>&)>;

  static std::shared_ptr<ChildrenMirror> create(std::shared_ptr<MetadataCache<T>> cache,
                                                Store* store, net::Executor* loop, std::string root,
                                                RecordFn fn) {
    return std::shared_ptr<ChildrenMirror>(
        new ChildrenMirror(std::move(cache), store, loop, std::move(root), std::move(fn)));
  }

  // Creates root (empty) when missing, lists and reads every child; ready(status of the first
  // listing) runs on the loop once every child then present was handed to fn.
  void start(std::function<void(Status)> ready) {
    std::weak_ptr<ChildrenMirror> weak = this->shared_from_this();
    cache_->addListener([weak](const std::optional<std::string>& path) {
      if (auto self = weak.lock()) self->onChange(path);
    });
    PutOptions o;
    o.expectedVersion = kNotExists;  // a child watch needs the node
    auto self = this->shared_from_this();
    store_->put(root_, "", o, loop_, [self, ready = std::move(ready)](const Result<Stat>&) mutable {
      self->list(false, std::move(ready));
    });
  }

  // fn is not called after this returns. Thread: the loop, or any thread once the loop no longer
  // runs the mirror's callbacks (a call in progress on the loop is not waited for).
  void stop() { stopped_.store(true, std::memory_order_release); }

 private:
  ChildrenMirror(std::shared_ptr<MetadataCache<T>> cache, Store* store, net::Executor* loop,
                 std::string root, RecordFn fn)
      : cache_(std::move(cache)),
        store_(store),
        loop_(loop),
        root_(std::move(root)),
        fn_(std::move(fn)) {}

  // Loop only. all: read every child, not only new ones.
  void list(bool all, std::function<void(Status)> ready = {}) {
    auto self = this->shared_from_this();
    cache_->getChildren(
        root_, loop_, [self, all, ready = std::move(ready)](Result<std::vector<std::string>> r) {
          if (self->stopped()) return;
          if (!r.isOk()) {
            MLOG_WARN("metadata: cannot list {}: {}", self->root_, r.status().message());
            if (ready) ready(r.status());
            return;
          }
          std::set<std::string> now(r->begin(), r->end());
          std::set<std::string> old = std::move(self->children_);
          self->children_ = now;
          for (const auto& c : old) {
            if (!now.count(c)) self->fn_(c, std::nullopt);
          }
          auto left = std::make_shared<size_t>(0);
          for (const auto& c : now) {
            if (all || !old.count(c)) ++*left;
          }
          if (*left == 0) {
            if (ready) ready(Status::ok());
            return;
          }
          auto one = [left, ready] {
            if (--*left == 0 && ready) ready(Status::ok());
          };
          for (const auto& c : now) {
            if (all || !old.count(c)) self->read(c, one);
          }
        });
  }

  void read(const std::string& name, std::function<void()> then) {
    auto self = this->shared_from_this();
    cache_->get(root_ + "/" + name, loop_,
                [self, name, then = std::move(then)](Result<std::optional<T>> r) {
                  if (self->stopped()) return;
                  if (!r.isOk()) {
                    MLOG_WARN("metadata: cannot read {}/{}: {}", self->root_, name,
                              r.status().message());
                  } else {
                    std::optional<T> value = std::move(r).value();
                    if (self->children_.count(name) || !value) self->fn_(name, value);
                  }
                  if (then) then();
                });
  }

  bool stopped() const { return stopped_.load(std::memory_order_acquire); }

  void onChange(const std::optional<std::string>& path) {
    if (stopped()) return;
    if (!path) return list(true);
    if (*path == root_) return list(false);
    if (parentPath(*path) != root_) return;
    std::string name = path->substr(root_.size() + 1);
    // A new child comes with the root's children watch; a known one is read again (which also
    // sets its next watch); a deleted one is reported by that listing.
    if (children_.count(name)) read(name, {});
  }

  std::shared_ptr<MetadataCache<T>> cache_;
  Store* store_;
  net::Executor* loop_;
  const std::string root_;
  RecordFn fn_;
  std::set<std::string> children_;  // loop only: the last listing
  std::atomic<bool> stopped_{false};
};

}  // namespace magnetar::metadata
