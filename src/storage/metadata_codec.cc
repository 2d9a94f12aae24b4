#include "storage/metadata_codec.h"

#include <cstdio>
#include <cstring>

#include "storage/metadata_store.h"

namespace magnetar::storage {

namespace {
constexpr uint8_t kVersion = 1;

class Writer {
 public:
  void u8(uint8_t v) { s_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; i++) s_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; i++) s_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  std::string take() { return std::move(s_); }

 private:
  std::string s_;
};

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  bool u8(uint8_t* v) {
    if (pos_ + 1 > s_.size()) return false;
    *v = static_cast<uint8_t>(s_[pos_++]);
    return true;
  }
  bool u32(uint32_t* v) {
    if (pos_ + 4 > s_.size()) return false;
    *v = 0;
    for (int i = 0; i < 4; i++)
      *v |= static_cast<uint32_t>(static_cast<uint8_t>(s_[pos_++])) << (8 * i);
    return true;
  }
  bool u64(uint64_t* v) {
    if (pos_ + 8 > s_.size()) return false;
    *v = 0;
    for (int i = 0; i < 8; i++)
      *v |= static_cast<uint64_t>(static_cast<uint8_t>(s_[pos_++])) << (8 * i);
    return true;
  }
  bool i64(int64_t* v) {
    uint64_t u;
    if (!u64(&u)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

std::string hex16(int64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

std::string mlKey(const std::string& name) { return kMlPrefix + escapePathComponent(name); }
std::string cursorPrefix(const std::string& name) {
  return kCursorPrefix + escapePathComponent(name) + "/";
}
std::string cursorKey(const std::string& name, const std::string& cursor) {
  return cursorPrefix(name) + escapePathComponent(cursor);
}
std::string indexLedgerPrefix(int64_t ledgerId) { return kIndexPrefix + hex16(ledgerId) + "/"; }
std::string indexKey(int64_t ledgerId, int64_t firstEntryId) {
  return indexLedgerPrefix(ledgerId) + hex16(firstEntryId);
}

std::string encodeLedgerList(const std::vector<LedgerMeta>& ledgers) {
  Writer w;
  w.u8(kVersion);
  w.u32(static_cast<uint32_t>(ledgers.size()));
  for (const auto& l : ledgers) {
    w.i64(l.ledgerId);
    w.i64(l.closedAt);
    w.i64(l.createdMs);
  }
  return w.take();
}

std::optional<std::vector<LedgerMeta>> decodeLedgerList(const std::string& v) {
  Reader r(v);
  uint8_t ver;
  uint32_t n;
  if (!r.u8(&ver) || ver != kVersion || !r.u32(&n)) return std::nullopt;
  std::vector<LedgerMeta> out(n);
  for (auto& l : out) {
    if (!r.i64(&l.ledgerId) || !r.i64(&l.closedAt) || !r.i64(&l.createdMs)) return std::nullopt;
  }
  if (!r.done()) return std::nullopt;
  return out;
}

std::string encodeCursor(const CursorMeta& c) {
  Writer w;
  w.u8(kVersion);
  w.i64(c.markDelete.ledgerId);
  w.i64(c.markDelete.entryId);
  w.u32(static_cast<uint32_t>(c.ranges.size()));
  for (const auto& [a, b] : c.ranges) {
    w.i64(a.ledgerId);
    w.i64(a.entryId);
    w.i64(b.ledgerId);
    w.i64(b.entryId);
  }
  return w.take();
}

std::optional<CursorMeta> decodeCursor(const std::string& v) {
  Reader r(v);
  uint8_t ver;
  uint32_t n;
  CursorMeta c;
  if (!r.u8(&ver) || ver != kVersion || !r.i64(&c.markDelete.ledgerId) ||
      !r.i64(&c.markDelete.entryId) || !r.u32(&n)) {
    return std::nullopt;
  }
  c.ranges.resize(n);
  for (auto& [a, b] : c.ranges) {
    if (!r.i64(&a.ledgerId) || !r.i64(&a.entryId) || !r.i64(&b.ledgerId) || !r.i64(&b.entryId)) {
      return std::nullopt;
    }
  }
  if (!r.done()) return std::nullopt;
  return c;
}

std::string encodeRun(const JournalRun& run) {
  Writer w;
  w.u8(kVersion);
  w.u64(run.segment);
  w.u64(run.offset);
  w.u32(run.length);
  w.u32(static_cast<uint32_t>(run.count));
  w.i64(run.dataBytes);
  return w.take();
}

std::optional<JournalRun> decodeRun(const std::string& key, const std::string& v) {
  // key: /ml-index/<16 hex>/<16 hex>
  size_t p = sizeof(kIndexPrefix) - 1;
  if (key.size() != p + 33 || key[p + 16] != '/') return std::nullopt;
  JournalRun run;
  run.ledgerId = static_cast<int64_t>(std::stoull(key.substr(p, 16), nullptr, 16));
  run.firstEntryId = static_cast<int64_t>(std::stoull(key.substr(p + 17, 16), nullptr, 16));
  Reader r(v);
  uint8_t ver;
  uint32_t count;
  if (!r.u8(&ver) || ver != kVersion || !r.u64(&run.segment) || !r.u64(&run.offset) ||
      !r.u32(&run.length) || !r.u32(&count) || !r.i64(&run.dataBytes) || !r.done()) {
    return std::nullopt;
  }
  run.count = static_cast<int32_t>(count);
  return run;
}

std::string encodeU64(uint64_t v) {
  Writer w;
  w.u64(v);
  return w.take();
}

std::optional<uint64_t> decodeU64(const std::string& v) {
  Reader r(v);
  uint64_t x;
  if (!r.u64(&x) || !r.done()) return std::nullopt;
  return x;
}

std::string encodeCheckpoint(uint64_t segment, uint64_t offset) {
  Writer w;
  w.u8(kVersion);
  w.u64(segment);
  w.u64(offset);
  return w.take();
}

std::optional<std::pair<uint64_t, uint64_t>> decodeCheckpoint(const std::string& v) {
  Reader r(v);
  uint8_t ver;
  uint64_t s, o;
  if (!r.u8(&ver) || ver != kVersion || !r.u64(&s) || !r.u64(&o) || !r.done()) return std::nullopt;
  return std::make_pair(s, o);
}

}  // namespace magnetar::storage
