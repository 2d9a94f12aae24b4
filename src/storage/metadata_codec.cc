#include "storage/metadata_codec.h"

#include <climits>
#include <cstdio>
#include <cstring>

#include "storage/metadata_store.h"

namespace magnetar::storage {

namespace {
constexpr uint8_t kVersion = 1;
constexpr uint8_t kLedgerListVersion = 2;
constexpr uint8_t kTerminatedVersion = 1;
constexpr uint8_t kCursorVersion = 2;  // 2: + batch ack sets and properties

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
  void bytes(const std::string& b) { s_.append(b); }
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
  bool bytes(uint32_t n, std::string* out) {
    if (pos_ + n > s_.size()) return false;
    out->assign(s_, pos_, n);
    pos_ += n;
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

std::string terminatedKey(const std::string& name) {
  return kTerminatedPrefix + escapePathComponent(name);
}

std::string encodeTerminated(Position p) {
  Writer w;
  w.u8(kTerminatedVersion);
  w.i64(p.ledgerId);
  w.i64(p.entryId);
  return w.take();
}

std::optional<Position> decodeTerminated(const std::string& v) {
  Reader r(v);
  uint8_t ver;
  Position p;
  if (!r.u8(&ver) || ver != kTerminatedVersion || !r.i64(&p.ledgerId) || !r.i64(&p.entryId) ||
      !r.done()) {
    return std::nullopt;
  }
  return p;
}

std::string encodeLedgerList(const std::vector<LedgerMeta>& ledgers) {
  Writer w;
  w.u8(kLedgerListVersion);
  w.u32(static_cast<uint32_t>(ledgers.size()));
  for (const auto& l : ledgers) {
    w.i64(l.ledgerId);
    w.i64(l.closedAt);
    w.i64(l.createdMs);
    w.i64(l.closedMs);
  }
  return w.take();
}

std::optional<std::vector<LedgerMeta>> decodeLedgerList(const std::string& v) {
  Reader r(v);
  uint8_t ver;
  uint32_t n;
  if (!r.u8(&ver) || (ver != 1 && ver != kLedgerListVersion) || !r.u32(&n)) return std::nullopt;
  // n comes from disk: at most what the value can hold (24 or 32 bytes each) before allocating.
  if (n > v.size() / (ver == 1 ? 24 : 32)) return std::nullopt;
  std::vector<LedgerMeta> out(n);
  for (auto& l : out) {
    if (!r.i64(&l.ledgerId) || !r.i64(&l.closedAt) || !r.i64(&l.createdMs)) return std::nullopt;
    if (ver == 1) {
      l.closedMs = l.closedAt >= 0 ? l.createdMs : 0;
    } else if (!r.i64(&l.closedMs)) {
      return std::nullopt;
    }
  }
  if (!r.done()) return std::nullopt;
  return out;
}

std::string encodeCursor(const CursorMeta& c) {
  Writer w;
  w.u8(kCursorVersion);
  w.i64(c.markDelete.ledgerId);
  w.i64(c.markDelete.entryId);
  w.u32(static_cast<uint32_t>(c.ranges.size()));
  for (const auto& [a, b] : c.ranges) {
    w.i64(a.ledgerId);
    w.i64(a.entryId);
    w.i64(b.ledgerId);
    w.i64(b.entryId);
  }
  w.u32(static_cast<uint32_t>(c.batchDeleted.size()));
  for (const auto& [p, set] : c.batchDeleted) {
    w.i64(p.ledgerId);
    w.i64(p.entryId);
    w.u32(static_cast<uint32_t>(set.size()));
    for (int64_t word : set) w.i64(word);
  }
  w.u32(static_cast<uint32_t>(c.properties.size()));
  for (const auto& [k, v] : c.properties) {
    w.u32(static_cast<uint32_t>(k.size()));
    w.bytes(k);
    w.i64(v);
  }
  return w.take();
}

std::optional<CursorMeta> decodeCursor(const std::string& v) {
  Reader r(v);
  uint8_t ver;
  uint32_t n;
  CursorMeta c;
  if (!r.u8(&ver) || (ver != 1 && ver != kCursorVersion) || !r.i64(&c.markDelete.ledgerId) ||
      !r.i64(&c.markDelete.entryId) || !r.u32(&n) || n > v.size() / 32) {
    return std::nullopt;
  }
  c.ranges.resize(n);
  for (auto& [a, b] : c.ranges) {
    if (!r.i64(&a.ledgerId) || !r.i64(&a.entryId) || !r.i64(&b.ledgerId) || !r.i64(&b.entryId)) {
      return std::nullopt;
    }
  }
  if (ver >= 2) {
    if (!r.u32(&n) || n > v.size() / 20) return std::nullopt;
    c.batchDeleted.resize(n);
    for (auto& [p, set] : c.batchDeleted) {
      uint32_t words;
      if (!r.i64(&p.ledgerId) || !r.i64(&p.entryId) || !r.u32(&words) || words > v.size() / 8) {
        return std::nullopt;
      }
      set.resize(words);
      for (auto& word : set) {
        if (!r.i64(&word)) return std::nullopt;
      }
    }
    if (!r.u32(&n) || n > v.size() / 12) return std::nullopt;
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t len;
      std::string key;
      int64_t val;
      if (!r.u32(&len) || !r.bytes(len, &key) || !r.i64(&val)) return std::nullopt;
      c.properties[std::move(key)] = val;
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
  // Keys come from disk: exactly 16 hex digits each, else not a run (no exception).
  auto hex16 = [&key](size_t at, int64_t* out) {
    uint64_t v = 0;
    for (size_t i = at; i < at + 16; i++) {
      char c = key[i];
      int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) return false;
      v = v << 4 | static_cast<uint64_t>(d);
    }
    *out = static_cast<int64_t>(v);
    return true;
  };
  JournalRun run;
  if (!hex16(p, &run.ledgerId) || !hex16(p + 17, &run.firstEntryId)) return std::nullopt;
  Reader r(v);
  uint8_t ver;
  uint32_t count;
  if (!r.u8(&ver) || ver != kVersion || !r.u64(&run.segment) || !r.u64(&run.offset) ||
      !r.u32(&run.length) || !r.u32(&count) || !r.i64(&run.dataBytes) || !r.done()) {
    return std::nullopt;
  }
  // A run names one journal record: reject what no record can be, so a damaged index cannot
  // make a read allocate gigabytes (fuzz_journal).
  if (count == 0 || count > INT32_MAX || run.length < kRecordFrameSize + kEntriesHeaderSize ||
      run.length > kRecordFrameSize + kMaxRecordPayload || run.ledgerId < 0 ||
      run.firstEntryId < 0) {
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
