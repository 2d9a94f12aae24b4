// GCC 12 -O2 reports a false maybe-uninitialized in the inlined destructor of the
// Result<std::vector<std::string>> that std::function hands to the getChildren callback (in
// <functional>, hence before the includes).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "bookkeeper/ledger_manager.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include "base/logging.h"

namespace magnetar::bookkeeper {

void LedgerManager::checkLayout(net::Executor* ex, std::function<void(BkResult, std::string)> cb) {
  std::string path = root_ + "/LAYOUT";
  store_->get(path, ex, [path, cb = std::move(cb)](Result<std::optional<metadata::GetResult>> r) {
    if (!r.isOk()) return cb(BkResult::kMetadataError, r.status().toString());
    if (!r->has_value()) {
      return cb(BkResult::kMetadataError,
                path + " does not exist: no BookKeeper cluster initialised there");
    }
    auto cls = parseLayout((*r)->value);
    if (!cls.isOk()) return cb(BkResult::kMetadataError, cls.status().message());
    cb(BkResult::kOk, *cls);
  });
}

void LedgerManager::availableBookies(net::Executor* ex, BookiesCallback cb) {
  store_->getChildren(root_ + "/available", ex,
                      [cb = std::move(cb)](Result<std::vector<std::string>> r) {
                        std::vector<BookieId> out;
                        if (!r.isOk()) return cb(BkResult::kMetadataError, std::move(out));
                        for (const auto& c : r.value()) {
                          if (c != "readonly") out.push_back(c);
                        }
                        std::sort(out.begin(), out.end());
                        cb(BkResult::kOk, std::move(out));
                      });
}

void LedgerManager::generateLedgerId(net::Executor* ex, IdCallback cb) {
  // ZkLedgerIdGenerator: an EPHEMERAL_SEQUENTIAL "<root>/idgen/ID-", its sequence number is the
  // id, then the node is deleted.
  std::string prefix = root_ + "/idgen/ID-";
  metadata::PutOptions opts;
  opts.ephemeral = true;
  opts.sequential = true;
  store_->put(prefix, "", opts, ex,
              [this, prefix, ex, cb = std::move(cb)](Result<metadata::Stat> r) {
                if (!r.isOk()) {
                  MLOG_WARN("bookkeeper: ledger id generation failed: {}", r.status().toString());
                  return cb(BkResult::kMetadataError, -1);
                }
                const std::string& path = r->path;
                int64_t id = -1;
                try {
                  id = std::stoll(path.substr(prefix.size()));
                } catch (...) {
                  return cb(BkResult::kMetadataError, -1);
                }
                store_->remove(path, std::nullopt, ex, [](const Status&) {});
                if (id < 0 || id >= 0x7fffffffLL) return cb(BkResult::kMetadataError, -1);
                cb(BkResult::kOk, id);
              });
}

void LedgerManager::createLedgerMetadata(int64_t ledgerId, const LedgerMetadata& md,
                                         net::Executor* ex, MetadataCallback cb) {
  metadata::PutOptions opts;
  opts.expectedVersion = metadata::kNotExists;
  store_->put(ledgerPath(root_, ledgerId), serializeLedgerMetadata(md), opts, ex,
              [md, cb = std::move(cb)](Result<metadata::Stat> r) {
                if (!r.isOk()) {
                  cb(r.status().code() == StatusCode::kBadVersion ? BkResult::kMetadataVersion
                                                                  : BkResult::kMetadataError,
                     {});
                  return;
                }
                cb(BkResult::kOk, VersionedMetadata{md, r->version});
              });
}

void LedgerManager::readLedgerMetadata(int64_t ledgerId, net::Executor* ex, MetadataCallback cb) {
  store_->get(ledgerPath(root_, ledgerId), ex,
              [ledgerId, cb = std::move(cb)](Result<std::optional<metadata::GetResult>> r) {
                if (!r.isOk()) return cb(BkResult::kMetadataError, {});
                if (!r->has_value()) return cb(BkResult::kNoSuchLedger, {});
                auto md = parseLedgerMetadata((*r)->value);
                if (!md.isOk()) {
                  MLOG_WARN("bookkeeper: ledger {} metadata: {}", ledgerId, md.status().toString());
                  return cb(BkResult::kMetadataError, {});
                }
                cb(BkResult::kOk, VersionedMetadata{std::move(*md), (*r)->stat.version});
              });
}

void LedgerManager::writeLedgerMetadata(int64_t ledgerId, const LedgerMetadata& md,
                                        metadata::Version version, net::Executor* ex,
                                        MetadataCallback cb) {
  metadata::PutOptions opts;
  opts.expectedVersion = version;
  store_->put(ledgerPath(root_, ledgerId), serializeLedgerMetadata(md), opts, ex,
              [md, cb = std::move(cb)](Result<metadata::Stat> r) {
                if (!r.isOk()) {
                  auto c = r.status().code();
                  cb(c == StatusCode::kBadVersion ? BkResult::kMetadataVersion
                     : c == StatusCode::kNotFound ? BkResult::kNoSuchLedger
                                                  : BkResult::kMetadataError,
                     {});
                  return;
                }
                cb(BkResult::kOk, VersionedMetadata{md, r->version});
              });
}

void LedgerManager::removeLedgerMetadata(int64_t ledgerId, net::Executor* ex, DoneCallback cb) {
  store_->remove(
      ledgerPath(root_, ledgerId), std::nullopt, ex, [cb = std::move(cb)](const Status& s) {
        if (s.isOk()) return cb(BkResult::kOk);
        cb(s.code() == StatusCode::kNotFound ? BkResult::kNoSuchLedger : BkResult::kMetadataError);
      });
}

namespace {

bool allDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// State of one listLedgers walk: directories still being listed, ids found, first error.
struct LedgerWalk {
  std::mutex mu;
  int pending = 0;
  bool failed = false;
  std::vector<int64_t> ids;
  std::function<void(BkResult, std::vector<int64_t>)> cb;
};

void walkLedgers(metadata::Store* store, net::Executor* ex, const std::string& path,
                 const std::string& digits, const std::shared_ptr<LedgerWalk>& w) {
  store->getChildren(path, ex, [store, ex, path, digits, w](Result<std::vector<std::string>> r) {
    std::vector<std::pair<std::string, std::string>> dirs;
    std::function<void(BkResult, std::vector<int64_t>)> done;
    BkResult rc = BkResult::kOk;
    std::vector<int64_t> ids;
    {
      std::lock_guard<std::mutex> l(w->mu);
      if (!r.isOk() && r.status().code() != StatusCode::kNotFound) w->failed = true;
      if (r.isOk() && !w->failed) {
        for (const auto& c : r.value()) {
          if (c.size() == 5 && c[0] == 'L' && allDigits(c.substr(1)) && !digits.empty()) {
            w->ids.push_back(std::stoll(digits + c.substr(1)));
          } else if (allDigits(c) && digits.size() + c.size() <= 15) {
            std::string child = path;
            child += '/';
            child += c;
            dirs.emplace_back(std::move(child), digits + c);
          }
        }
      }
      w->pending += static_cast<int>(dirs.size()) - 1;
      if (w->pending == 0) {
        done = std::move(w->cb);
        rc = w->failed ? BkResult::kMetadataError : BkResult::kOk;
        if (!w->failed) ids = std::move(w->ids);
        std::sort(ids.begin(), ids.end());
      }
    }
    if (done) return done(rc, std::move(ids));
    for (const auto& [p, d] : dirs) walkLedgers(store, ex, p, d, w);
  });
}

}  // namespace

void LedgerManager::listLedgers(net::Executor* ex,
                                std::function<void(BkResult, std::vector<int64_t>)> cb) {
  auto w = std::make_shared<LedgerWalk>();
  w->pending = 1;
  w->cb = std::move(cb);
  walkLedgers(store_, ex, root_, "", w);
}

}  // namespace magnetar::bookkeeper
