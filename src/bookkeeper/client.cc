#include "bookkeeper/client.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <random>

#include "base/dcheck.h"
#include "base/logging.h"
#include "metadata/zk_store.h"

namespace magnetar::bookkeeper {

Status checkQuorums(int ensembleSize, int writeQuorum, int ackQuorum) {
  auto bad = [](const std::string& what) { return Status::invalidArgument(what); };
  if (ackQuorum < 1) return bad("ackQuorum " + std::to_string(ackQuorum) + " < 1");
  if (ackQuorum > writeQuorum) {
    return bad("ackQuorum " + std::to_string(ackQuorum) + " > writeQuorum " +
               std::to_string(writeQuorum));
  }
  if (writeQuorum > ensembleSize) {
    return bad("writeQuorum " + std::to_string(writeQuorum) + " > ensemble " +
               std::to_string(ensembleSize));
  }
  if (ensembleSize > 64) return bad("ensemble " + std::to_string(ensembleSize) + " > 64");
  return Status::ok();
}

Result<std::pair<std::string, std::string>> parseMetadataServiceUri(const std::string& uri) {
  // BookKeeper's ZKMetadataDriverBase: scheme "zk" or "zk+<layout>", hosts separated by ';' (or
  // ','), then the ledgers root path.
  std::string rest;
  if (constexpr std::string_view kPulsar = "metadata-store:"; uri.rfind(kPulsar, 0) == 0) {
    // Pulsar's driver: the rest is a metadata store URL whose path is the ledgers root.
    rest = uri.substr(kPulsar.size());
    if (rest.rfind("zk://", 0) == 0) {
      rest = rest.substr(5);
    } else if (rest.rfind("zk:", 0) == 0) {
      rest = rest.substr(3);
    } else {
      return Status::invalidArgument("metadata service URI '" + uri +
                                     "': only ZooKeeper (metadata-store:zk:host:port/ledgers)");
    }
  } else {
    size_t sep = uri.find("://");
    std::string scheme = sep == std::string::npos ? "" : uri.substr(0, sep);
    if (scheme != "zk" && scheme.rfind("zk+", 0) != 0) {
      return Status::invalidArgument(
          "metadata service URI '" + uri +
          "': expected zk://host:port[;host:port]/ledgers or metadata-store:zk:host:port/ledgers");
    }
    rest = uri.substr(sep + 3);
  }
  size_t slash = rest.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 >= rest.size()) {
    return Status::invalidArgument("metadata service URI '" + uri +
                                   "': no host or no ledgers root path");
  }
  std::string hosts = rest.substr(0, slash);
  std::replace(hosts.begin(), hosts.end(), ';', ',');
  std::string root = rest.substr(slash);
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  auto zk = metadata::parseZkUrl(hosts);
  if (!zk.isOk()) return zk.status();
  return std::make_pair(*zk, root);
}

// ---- LedgerHandle ----

LedgerHandle::LedgerHandle(BookKeeperClient& client, net::EventLoop& loop, BookieClient& bookies,
                           int64_t ledgerId, VersionedMetadata md, bool writer)
    : client_(client),
      loop_(loop),
      bookies_(bookies),
      ledgerId_(ledgerId),
      md_(std::move(md)),
      key_(masterKeyFor(md_.metadata.password)),
      writer_(writer) {
  if (md_.metadata.state == LedgerState::kClosed) {
    lastAddConfirmed_ = lastAddPushed_ = md_.metadata.lastEntryId;
    length_ = confirmedLength_ = md_.metadata.length;
  }
}

int LedgerHandle::nextReplica(int64_t entryId, uint64_t tried) {
  const auto& md = md_.metadata;
  const auto& ensemble = md.ensembleFor(entryId);
  int best = -1;
  std::chrono::steady_clock::time_point bestFailure{};
  for (int k = 0; k < md.writeQuorumSize; ++k) {
    int idx = static_cast<int>((entryId + k) % md.ensembleSize);
    if ((tried & (uint64_t{1} << idx)) != 0) continue;
    auto failure = bookies_.failedRecently(ensemble[static_cast<size_t>(idx)]);
    if (!failure) return idx;
    if (best < 0 || *failure < bestFailure) {
      best = idx;
      bestFailure = *failure;
    }
  }
  return best;
}

void LedgerHandle::readFrom(int64_t entryId, bool recovery, uint64_t tried, int missing,
                            BkResult firstError, EntryCallback cb) {
  int idx = nextReplica(entryId, tried);
  if (idx < 0) {
    // Every replica answered with an error (or did not answer).
    return cb(firstError == BkResult::kOk ? BkResult::kNoSuchEntry : firstError, {});
  }
  BookieId b = md_.metadata.ensembleFor(entryId)[static_cast<size_t>(idx)];
  tried |= uint64_t{1} << idx;
  uint16_t flags = recovery ? (kFlagDoFencing | kFlagHighPriority) : kFlagNone;
  std::weak_ptr<LedgerHandle> weak = weak_from_this();
  bookies_.readEntry(
      b, ledgerId_, entryId, flags, recovery ? &key_ : nullptr,
      [weak, entryId, recovery, tried, missing, firstError, b, cb = std::move(cb)](
          BkResult rc, const std::string& e) mutable {
        auto self = weak.lock();
        if (!self) return cb(BkResult::kClientClosed, {});
        if (rc == BkResult::kOk) {
          auto v = verifyEntry(e, self->ledgerId_, entryId,
                               entryDigestOf(self->md_.metadata.digestType));
          if (v.isOk()) {
            return cb(BkResult::kOk,
                      LedgerEntry{entryId, v->header.length, std::string(v->payload)});
          }
          MLOG_WARN("bookkeeper: ledger {} entry {} from bookie {}: {}", self->ledgerId_, entryId,
                    b, v.status().message());
          rc = BkResult::kDigestMismatch;
        }
        const auto& md = self->md_.metadata;
        if (rc == BkResult::kNoSuchEntry || rc == BkResult::kNoSuchLedger) {
          // Recovery: absent from Qw - Qa + 1 replicas, the entry cannot have been acknowledged.
          if (recovery && ++missing >= md.writeQuorumSize - md.ackQuorumSize + 1) {
            return cb(BkResult::kNoSuchEntry, {});
          }
          if (firstError == BkResult::kOk) firstError = rc;
        } else if (firstError == BkResult::kOk || firstError == BkResult::kNoSuchEntry ||
                   firstError == BkResult::kNoSuchLedger) {
          firstError = rc;  // a real error says more than "not here"
        }
        self->readFrom(entryId, recovery, tried, missing, firstError, std::move(cb));
      });
}

void LedgerHandle::readEntries(int64_t first, int64_t last, ReadCallback cb) {
  MAGNETAR_DCHECK_ON(loop_);
  if (first < 0 || last < first) return cb(BkResult::kIllegalOp, {});
  if (last > lastAddConfirmed_) return cb(BkResult::kReadOutOfRange, {});
  struct Batch {
    std::vector<LedgerEntry> entries;
    int64_t first = 0;
    int64_t last = 0;
    int64_t next = 0;  // next entry to request
    size_t remaining = 0;
    BkResult rc = BkResult::kOk;
    ReadCallback cb;
  };
  auto batch = std::make_shared<Batch>();
  batch->entries.resize(static_cast<size_t>(last - first + 1));
  batch->first = batch->next = first;
  batch->last = last;
  batch->remaining = batch->entries.size();
  batch->cb = std::move(cb);
  // A window of reads in flight: a bookie refuses reads beyond its queue (TooManyRequests).
  auto self = shared_from_this();
  auto pump = std::make_shared<std::function<void()>>();
  *pump = [self, batch, weakPump = std::weak_ptr<std::function<void()>>(pump)]() {
    auto pumpFn = weakPump.lock();
    while (batch->next <= batch->last && batch->rc == BkResult::kOk &&
           batch->next - batch->first -
                   static_cast<int64_t>(batch->entries.size() - batch->remaining) <
               kMaxReadsInFlight) {
      int64_t e = batch->next++;
      self->readOne(e, [batch, e, pumpFn](BkResult rc, LedgerEntry entry) {
        auto& slot = batch->entries[static_cast<size_t>(e - batch->first)];
        slot = std::move(entry);
        slot.entryId = e;
        if (rc != BkResult::kOk && batch->rc == BkResult::kOk) batch->rc = rc;
        --batch->remaining;
        bool issuedAll = batch->next > batch->last || batch->rc != BkResult::kOk;
        size_t outstanding = static_cast<size_t>(batch->next - batch->first) -
                             (batch->entries.size() - batch->remaining);
        if (issuedAll && outstanding == 0) {
          auto cb = std::move(batch->cb);
          if (batch->rc != BkResult::kOk) return cb(batch->rc, {});
          return cb(BkResult::kOk, std::move(batch->entries));
        }
        if (pumpFn) (*pumpFn)();
      });
    }
  };
  (*pump)();
}

void LedgerHandle::readLastAddConfirmed(std::function<void(BkResult, int64_t)> cb) {
  MAGNETAR_DCHECK_ON(loop_);
  struct State {
    size_t remaining;
    int answered = 0;
    int64_t lac = -1;
    std::function<void(BkResult, int64_t)> cb;
  };
  const auto& ensemble = md_.metadata.ensembles.rbegin()->second;
  auto st = std::make_shared<State>();
  st->remaining = ensemble.size();
  st->cb = std::move(cb);
  std::weak_ptr<LedgerHandle> weak = weak_from_this();
  for (const auto& b : ensemble) {
    bookies_.readEntry(b, ledgerId_, kLastAddConfirmed, kFlagNone, nullptr,
                       [weak, st](BkResult rc, const std::string& e) {
                         auto self = weak.lock();
                         if (rc == BkResult::kOk && self) {
                           auto v = verifyEntry(e, self->ledgerId_, -1,
                                                entryDigestOf(self->md_.metadata.digestType));
                           if (v.isOk()) {
                             ++st->answered;
                             st->lac = std::max(st->lac, v->header.lastAddConfirmed);
                           }
                         } else if (rc == BkResult::kNoSuchEntry || rc == BkResult::kNoSuchLedger) {
                           ++st->answered;  // this bookie has nothing of the ledger
                         }
                         if (--st->remaining > 0) return;
                         if (!self) return st->cb(BkResult::kClientClosed, -1);
                         if (st->answered == 0) return st->cb(BkResult::kBookieError, -1);
                         self->lastAddConfirmed_ = std::max(self->lastAddConfirmed_, st->lac);
                         st->cb(BkResult::kOk, self->lastAddConfirmed_);
                       });
  }
}

void LedgerHandle::close(DoneCallback cb) {
  MAGNETAR_DCHECK_ON(loop_);
  if (closed_) return cb(BkResult::kOk);
  closed_ = true;
  if (!writer_) return cb(BkResult::kOk);
  failAllPending(BkResult::kLedgerClosed);
  writeClosed(std::move(cb));
}

void LedgerHandle::writeClosed(DoneCallback cb) {
  LedgerMetadata md = md_.metadata;
  md.state = LedgerState::kClosed;
  md.lastEntryId = lastAddConfirmed_;
  md.length = lastAddConfirmed_ >= 0 ? confirmedLength_ : 0;
  auto self = shared_from_this();
  client_.ledgerManager().writeLedgerMetadata(
      ledgerId_, md, md_.version, &loop_,
      [self, md, cb = std::move(cb)](BkResult rc, VersionedMetadata written) {
        if (rc == BkResult::kOk) {
          self->md_ = std::move(written);
          return cb(BkResult::kOk);
        }
        if (rc != BkResult::kMetadataVersion) return cb(rc);
        // Someone else wrote the znode: retry on the new version if it is still our open
        // ledger; accept a close that agrees with ours; otherwise we were fenced (recovery).
        self->client_.ledgerManager().readLedgerMetadata(
            self->ledgerId_, &self->loop_, [self, md, cb](BkResult rc2, VersionedMetadata cur) {
              if (rc2 != BkResult::kOk) return cb(rc2);
              const auto& m = cur.metadata;
              if (m.state == LedgerState::kClosed && m.lastEntryId == md.lastEntryId &&
                  m.length == md.length) {
                self->md_ = std::move(cur);
                return cb(BkResult::kOk);
              }
              if (m.state != self->md_.metadata.state ||
                  m.ensembles != self->md_.metadata.ensembles) {
                return cb(BkResult::kMetadataVersion);
              }
              self->md_ = std::move(cur);
              self->writeClosed(cb);
            });
      });
}

// ---- BookKeeperClient ----

Result<std::unique_ptr<BookKeeperClient>> BookKeeperClient::open(const ClientConfig& config) {
  auto parsed = parseMetadataServiceUri(config.metadataServiceUri);
  if (!parsed.isOk()) return parsed.status();
  metadata::ZkConfig zk;
  zk.url = parsed->first;
  zk.sessionTimeoutMs = config.zkSessionTimeoutMs;
  zk.connectTimeoutMs = config.zkConnectTimeoutMs;
  auto store = metadata::openZkStore(zk);
  if (!store.isOk()) {
    return Status::error(store.status().code(), "metadata service " + config.metadataServiceUri +
                                                    ": " + store.status().message());
  }
  return openWithStore(config, std::move(*store));
}

Result<std::unique_ptr<BookKeeperClient>> BookKeeperClient::openWithStore(
    const ClientConfig& config, std::unique_ptr<metadata::Store> store) {
  auto parsed = parseMetadataServiceUri(config.metadataServiceUri);
  if (!parsed.isOk()) return parsed.status();
  if (config.numIoThreads < 1) return Status::invalidArgument("numIoThreads must be >= 1");
  std::unique_ptr<BookKeeperClient> c(new BookKeeperClient(config));
  c->store_ = std::move(store);
  c->ledgers_ = std::make_unique<LedgerManager>(c->store_.get(), parsed->second);
  c->loops_ = std::make_unique<net::EventLoopGroup>("bookkeeper-io", config.numIoThreads);
  for (int i = 0; i < config.numIoThreads; ++i) {
    c->bookies_.push_back(std::make_unique<BookieClient>(c->loops_->at(i), config.bookie));
  }
  c->loops_->start();
  std::promise<std::pair<BkResult, std::string>> layout;
  c->ledgers_->checkLayout(&c->loops_->at(0), [&layout](BkResult rc, std::string what) {
    layout.set_value({rc, std::move(what)});
  });
  auto [rc, what] = layout.get_future().get();
  if (rc != BkResult::kOk) {
    c->close();
    return Status::ioError("BookKeeper cluster at " + config.metadataServiceUri + ": " + what);
  }
  return c;
}

BookKeeperClient::~BookKeeperClient() { close(); }

net::EventLoop& BookKeeperClient::loopFor(int64_t ledgerId) {
  return loops_->at(
      static_cast<int>(static_cast<uint64_t>(ledgerId) % static_cast<uint64_t>(loops_->size())));
}

BookieClient& BookKeeperClient::bookiesOn(net::EventLoop& loop) {
  for (int i = 0; i < loops_->size(); ++i) {
    if (&loops_->at(i) == &loop) return *bookies_[static_cast<size_t>(i)];
  }
  MAGNETAR_DCHECK(false);
  return *bookies_[0];
}

void BookKeeperClient::createLedger(int ensembleSize, int writeQuorum, int ackQuorum,
                                    std::map<std::string, std::string> customMetadata,
                                    HandleCallback cb) {
  net::EventLoop* loop0 = &loops_->at(0);
  if (closed_) return loop0->execute([cb] { cb(BkResult::kClientClosed, nullptr); });
  if (auto q = checkQuorums(ensembleSize, writeQuorum, ackQuorum); !q.isOk()) {
    MLOG_WARN("bookkeeper: create ledger: {}", q.message());
    return loop0->execute([cb] { cb(BkResult::kIllegalOp, nullptr); });
  }
  ledgers_->generateLedgerId(loop0, [this, ensembleSize, writeQuorum, ackQuorum,
                                     custom = std::move(customMetadata),
                                     cb = std::move(cb)](BkResult rc, int64_t id) mutable {
    if (rc != BkResult::kOk) return cb(rc, nullptr);
    net::EventLoop* loop = &loopFor(id);
    ledgers_->availableBookies(loop, [this, id, loop, ensembleSize, writeQuorum, ackQuorum,
                                      custom = std::move(custom), cb = std::move(cb)](
                                         BkResult rc, std::vector<BookieId> bookies) mutable {
      if (rc != BkResult::kOk) return cb(rc, nullptr);
      if (static_cast<int>(bookies.size()) < ensembleSize) {
        MLOG_WARN("bookkeeper: {} writable bookies, ensemble of {} needed", bookies.size(),
                  ensembleSize);
        return cb(BkResult::kNotEnoughBookies, nullptr);
      }
      // DefaultEnsemblePlacementPolicy: a random choice among the writable bookies; those that
      // failed recently only when the others are not enough (BookKeeper's quarantine).
      thread_local std::mt19937_64 rng{std::random_device{}()};
      std::shuffle(bookies.begin(), bookies.end(), rng);
      BookieClient& bc = bookiesOn(*loop);
      std::stable_partition(bookies.begin(), bookies.end(),
                            [&bc](const BookieId& b) { return !bc.failedRecently(b); });
      bookies.resize(static_cast<size_t>(ensembleSize));
      LedgerMetadata md;
      md.ensembleSize = ensembleSize;
      md.writeQuorumSize = writeQuorum;
      md.ackQuorumSize = ackQuorum;
      md.ensembles[0] = std::move(bookies);
      md.digestType = DigestType::kCrc32c;
      md.password = config_.password;
      md.ctimeMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
      md.customMetadata = std::move(custom);
      ledgers_->createLedgerMetadata(
          id, md, loop, [this, id, loop, cb = std::move(cb)](BkResult rc, VersionedMetadata vm) {
            if (rc != BkResult::kOk) return cb(rc, nullptr);
            auto h = std::make_shared<LedgerHandle>(*this, *loop, bookiesOn(*loop), id,
                                                    std::move(vm), true);
            cb(BkResult::kOk, std::move(h));
          });
    });
  });
}

void BookKeeperClient::openLedger(int64_t ledgerId, HandleCallback cb, bool recovery) {
  net::EventLoop* loop = &loopFor(ledgerId);
  if (closed_) return loop->execute([cb] { cb(BkResult::kClientClosed, nullptr); });
  ledgers_->readLedgerMetadata(
      ledgerId, loop,
      [this, ledgerId, loop, recovery, cb = std::move(cb)](BkResult rc, VersionedMetadata vm) {
        if (rc != BkResult::kOk) return cb(rc, nullptr);
        bool closedLedger = vm.metadata.state == LedgerState::kClosed;
        auto h = std::make_shared<LedgerHandle>(*this, *loop, bookiesOn(*loop), ledgerId,
                                                std::move(vm), false);
        if (closedLedger) return cb(BkResult::kOk, std::move(h));
        if (recovery) {
          return h->recover([h, cb](BkResult rc) {
            if (rc != BkResult::kOk) return cb(rc, nullptr);
            cb(BkResult::kOk, h);
          });
        }
        h->readLastAddConfirmed([h, cb](BkResult rc, int64_t) {
          if (rc != BkResult::kOk) return cb(rc, nullptr);
          cb(BkResult::kOk, h);
        });
      });
}

void BookKeeperClient::deleteLedger(int64_t ledgerId, std::function<void(BkResult)> cb) {
  ledgers_->removeLedgerMetadata(ledgerId, &loopFor(ledgerId), std::move(cb));
}

void BookKeeperClient::readLedgerMetadata(int64_t ledgerId,
                                          std::function<void(BkResult, VersionedMetadata)> cb) {
  ledgers_->readLedgerMetadata(ledgerId, &loopFor(ledgerId), std::move(cb));
}

void BookKeeperClient::close() {
  if (closed_.exchange(true)) return;
  if (loops_) {
    for (int i = 0; i < loops_->size(); ++i) {
      std::promise<void> done;
      BookieClient* b = bookies_[static_cast<size_t>(i)].get();
      loops_->at(i).execute([b, &done] {
        b->close();
        done.set_value();
      });
      done.get_future().wait();
    }
  }
  if (store_) store_->close();
  if (loops_) loops_->stop();
  bookies_.clear();
}

}  // namespace magnetar::bookkeeper
