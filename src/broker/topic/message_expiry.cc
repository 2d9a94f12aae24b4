#include "broker/topic/message_expiry.h"

#include <chrono>

#include "broker/common/wall_clock.h"
#include "broker/topic/entry_metadata.h"

namespace magnetar::broker {
namespace {

using storage::Position;

// Scans forward from the first unacked entry; keeps itself alive through the read callbacks.
struct ExpiryScan : std::enable_shared_from_this<ExpiryScan> {
  std::shared_ptr<PersistentTopic> topic;
  std::string sub;
  int64_t ttlSeconds = 0;
  int64_t nowMs = 0;
  std::optional<Position> lastExpired;
  std::function<void(Status)> done;

  void step(Position from) {
    auto& ml = topic->ledger();
    if (from > ml.lastConfirmedEntry() || from.entryId < 0) return finish();
    auto self = shared_from_this();
    ml.asyncReadEntries(from, 1000, 64 << 20,
                        [self](const Status& s, std::vector<storage::Entry> es) {
                          if (!s.isOk()) return self->done(s);
                          if (es.empty()) return self->finish();
                          for (auto& e : es) {
                            EntryMetadataPeek md;
                            if (!peekEntryMetadata(e.data.view(), &md).isOk() ||
                                !isEntryExpired(md.publishTime, self->nowMs, self->ttlSeconds)) {
                              return self->finish();
                            }
                            self->lastExpired = e.position;
                          }
                          self->step(self->topic->ledger().nextValidPosition(es.back().position));
                        });
  }

  void finish() {
    if (!lastExpired) return done(Status::ok());
    expireUpTo(topic, sub, *lastExpired, done);
  }
};

}  // namespace

void expireByTime(const std::shared_ptr<PersistentTopic>& topic, const std::string& sub,
                  int64_t ttlSeconds, std::function<void(Status)> cb) {
  Subscription* s = topic->subscription(sub);
  if (!s) return cb(Status::notFound("Subscription not found"));
  auto scan = std::make_shared<ExpiryScan>();
  scan->topic = topic;
  scan->sub = sub;
  scan->ttlSeconds = ttlSeconds;
  scan->nowMs = wallClockMs();
  scan->done = std::move(cb);
  scan->step(topic->ledger().nextValidPosition(s->cursor().markDeletedPosition()));
}

void expireUpTo(const std::shared_ptr<PersistentTopic>& topic, const std::string& sub,
                storage::Position upTo, const std::function<void(Status)>& cb) {
  Subscription* s = topic->subscription(sub);
  if (!s) return cb(Status::notFound("Subscription not found"));
  Position lac = topic->ledger().lastConfirmedEntry();
  if (upTo > lac) upTo = lac;
  if (upTo.entryId < 0 || upTo <= s->cursor().markDeletedPosition()) return cb(Status::ok());
  int64_t before = s->msgBacklog();
  s->cursor().asyncMarkDelete(upTo, [topic, sub, before, cb](const Status& st) {
    if (st.isOk()) {
      if (Subscription* s2 = topic->subscription(sub)) {
        int64_t after = s2->msgBacklog();
        if (before > after) {
          s2->addExpired(static_cast<uint64_t>(before - after), wallClockMs());
        }
      }
    }
    cb(st);
  });
}

}  // namespace magnetar::broker
