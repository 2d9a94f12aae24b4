// GCC 12 -O2 reports a false maybe-uninitialized in the inlined destructor of a
// Result<std::vector<std::string>> in a store callback (as in bookkeeper/ledger_manager.cc).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "broker/cluster/shared_records.h"

#include <chrono>
#include <future>
#include <memory>

#include "base/dcheck.h"
#include "base/logging.h"

namespace magnetar::broker::cluster {

namespace {

template <class T>
Result<T> waitFor(std::future<Result<T>>& f, int timeoutMs, const std::string& path) {
  if (f.wait_for(std::chrono::milliseconds(timeoutMs + 5000)) != std::future_status::ready) {
    return Status::error(StatusCode::kTimeout, "metadata store: no answer for " + path);
  }
  return f.get();
}

std::string withoutSlash(const std::string& prefix) {
  return prefix.size() > 1 && prefix.back() == '/' ? prefix.substr(0, prefix.size() - 1) : prefix;
}

}  // namespace

SharedRecords::SharedRecords(metadata::Store* store, int operationTimeoutMs)
    : store_(store), operationTimeoutMs_(operationTimeoutMs) {}

SharedRecords::~SharedRecords() { stop(); }

void SharedRecords::start() {
  if (started_) return;
  started_ = true;
  loop_.start();
  watchLoop_.start();
  listener_ = store_->registerListener(
      [this](const metadata::Notification& n) { onNotification(n); }, &watchLoop_);
  sessionListener_ = store_->registerSessionListener(
      [this](metadata::SessionEvent e) {
        if (e != metadata::SessionEvent::kSessionReestablished || !started_) return;
        for (const auto& [root, fn] : roots_) list(root, true);
      },
      &watchLoop_);
}

void SharedRecords::stop() {
  if (!started_) return;
  started_ = false;
  if (listener_) store_->unregisterListener(*listener_);
  listener_.reset();
  if (sessionListener_) store_->unregisterListener(*sessionListener_);
  sessionListener_.reset();
  watchLoop_.stop();
  loop_.stop();
}

Result<std::string> SharedRecords::get(const std::string& key) {
  MAGNETAR_DCHECK(!loop_.inExecutorThread() && !watchLoop_.inExecutorThread());
  auto p = std::make_shared<std::promise<Result<std::optional<metadata::GetResult>>>>();
  auto f = p->get_future();
  store_->get(key, &loop_,
              [p](const Result<std::optional<metadata::GetResult>>& r) { p->set_value(r); });
  auto r = waitFor(f, operationTimeoutMs_, key);
  if (!r.isOk()) return r.status();
  if (!r->has_value()) return Status::notFound(key);
  return (*r)->value;
}

Status SharedRecords::put(const std::string& key, const std::string& value) {
  MAGNETAR_DCHECK(!loop_.inExecutorThread() && !watchLoop_.inExecutorThread());
  auto p = std::make_shared<std::promise<Result<metadata::Stat>>>();
  auto f = p->get_future();
  store_->put(key, value, metadata::PutOptions{}, &loop_,
              [p](const Result<metadata::Stat>& r) { p->set_value(r); });
  auto r = waitFor(f, operationTimeoutMs_, key);
  return r.isOk() ? Status::ok() : r.status();
}

Status SharedRecords::remove(const std::string& key) {
  MAGNETAR_DCHECK(!loop_.inExecutorThread() && !watchLoop_.inExecutorThread());
  auto p = std::make_shared<std::promise<Result<bool>>>();
  auto f = p->get_future();
  store_->remove(key, std::nullopt, &loop_, [p](const Status& s) {
    p->set_value(s.isOk() || s.code() == StatusCode::kNotFound ? Result<bool>(true)
                                                               : Result<bool>(s));
  });
  auto r = waitFor(f, operationTimeoutMs_, key);
  return r.isOk() ? Status::ok() : r.status();
}

Status SharedRecords::write(const std::vector<storage::MetadataOp>& ops) {
  for (const auto& op : ops) {
    Status s;
    switch (op.kind) {
      case storage::MetadataOp::Kind::kPut:
        s = put(op.key, op.value);
        break;
      case storage::MetadataOp::Kind::kDelete:
        s = remove(op.key);
        break;
      case storage::MetadataOp::Kind::kDeletePrefix: {
        auto all = scan(op.key);
        if (!all.isOk()) return all.status();
        for (const auto& [k, v] : *all) {
          if (Status r = remove(k); !r.isOk()) return r;
        }
        break;
      }
    }
    if (!s.isOk()) return s;
  }
  return Status::ok();
}

Result<std::vector<std::string>> SharedRecords::getChildren(const std::string& path) {
  MAGNETAR_DCHECK(!loop_.inExecutorThread() && !watchLoop_.inExecutorThread());
  auto p = std::make_shared<std::promise<Result<std::vector<std::string>>>>();
  auto f = p->get_future();
  store_->getChildren(withoutSlash(path), &loop_,
                      [p](const Result<std::vector<std::string>>& r) { p->set_value(r); });
  return waitFor(f, operationTimeoutMs_, path);
}

Result<std::vector<std::pair<std::string, std::string>>> SharedRecords::scan(
    const std::string& prefix) {
  std::string root = withoutSlash(prefix);
  auto names = getChildren(root);
  if (!names.isOk()) return names.status();
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& n : *names) {
    std::string key = root;
    key.append("/").append(n);
    auto v = get(key);
    if (v.status().code() == StatusCode::kNotFound) continue;  // deleted in between
    if (!v.isOk()) return v.status();
    out.emplace_back(key, std::move(*v));
  }
  return out;
}

void SharedRecords::watch(const std::string& root, RecordFn fn) {
  watchLoop_.execute([this, root, fn = std::move(fn)] {
    roots_[root] = fn;
    // A child watch needs the node: create it empty when missing (as the registries' first
    // write would).
    metadata::PutOptions o;
    o.expectedVersion = metadata::kNotExists;
    store_->put(root, "", o, &watchLoop_,
                [this, root](const Result<metadata::Stat>&) { list(root); });
  });
}

void SharedRecords::list(const std::string& root, bool all) {
  MAGNETAR_DCHECK_ON(watchLoop_);
  store_->getChildren(
      root, &watchLoop_, [this, root, all](const Result<std::vector<std::string>>& r) {
        if (!r.isOk()) {
          MLOG_WARN("shared records: cannot list {}: {}", root, r.status().message());
          return;
        }
        std::set<std::string> now(r->begin(), r->end());
        std::set<std::string> old = std::move(children_[root]);
        children_[root] = now;
        for (const auto& c : now) {
          if (all || !old.count(c)) read(root, c);
        }
        auto fn = roots_.find(root);
        for (const auto& c : old) {
          if (!now.count(c) && fn != roots_.end()) fn->second(c, std::nullopt);
        }
      });
}

void SharedRecords::read(const std::string& root, const std::string& name) {
  MAGNETAR_DCHECK_ON(watchLoop_);
  std::string path = root;
  path.append("/").append(name);
  store_->get(path, &watchLoop_,
              [this, root, name, path](Result<std::optional<metadata::GetResult>> r) {
                if (!r.isOk()) {
                  MLOG_WARN("shared records: cannot read {}: {}", path, r.status().message());
                  return;
                }
                auto fn = roots_.find(root);
                if (fn == roots_.end()) return;
                fn->second(name, r->has_value() ? std::optional((*r)->value) : std::nullopt);
              });
}

void SharedRecords::onNotification(const metadata::Notification& n) {
  MAGNETAR_DCHECK_ON(watchLoop_);
  if (!started_) return;
  if (n.type == metadata::NotificationType::kChildrenChanged) {
    if (roots_.count(n.path)) list(n.path);
    return;
  }
  std::string parent = metadata::parentPath(n.path);
  auto known = children_.find(parent);
  if (known == children_.end() || !roots_.count(parent)) return;
  std::string name = n.path.substr(parent.size() + 1);
  // A new child arrives through the parent's children watch; a known one is read again (which
  // also sets the next watch). A deleted one is reported by the listing.
  if (known->second.count(name) && n.type != metadata::NotificationType::kDeleted) {
    read(parent, name);
  }
}

}  // namespace magnetar::broker::cluster
