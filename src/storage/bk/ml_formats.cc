#include "storage/bk/ml_formats.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace magnetar::storage::bk {

namespace {

constexpr char kHex[] = "0123456789ABCDEF";

bool isUnreserved(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_' || c == '*';
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "tenant/ns/<domain>/" prefix length of a topic's ledger name, or 0 for names of another shape.
size_t topicPrefixLength(std::string_view name) {
  size_t a = name.find('/');
  if (a == std::string_view::npos || a == 0) return 0;
  size_t b = name.find('/', a + 1);
  if (b == std::string_view::npos || b == a + 1) return 0;
  size_t c = name.find('/', b + 1);
  if (c == std::string_view::npos || c + 1 >= name.size()) return 0;
  std::string_view domain = name.substr(b + 1, c - b - 1);
  if (domain != "persistent" && domain != "non-persistent") return 0;
  return c + 1;
}

// MetaStoreImpl's compressed layout starts with the short 0x4778.
bool compressed(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x47 &&
         static_cast<unsigned char>(bytes[1]) == 0x78;
}

void addPosition(mledger::NestedPositionInfo* p, int64_t ledgerId, int64_t entryId) {
  p->set_ledgerid(ledgerId);
  p->set_entryid(entryId);
}

// Our closed ranges as Pulsar's open-closed ranges, one per ledger (its range set is per ledger).
template <typename Ranges>
void appendRanges(const CursorState& s, const LedgerSet& ledgers, int maxRanges, Ranges* out) {
  s.forEachRange([&](Position first, const CursorState::Range& r) {
    for (auto it = ledgers.ledgers().lower_bound(first.ledgerId);
         it != ledgers.ledgers().end() && it->first <= r.last.ledgerId; ++it) {
      const int64_t id = it->first;
      int64_t lo = id == first.ledgerId ? first.entryId : 0;
      int64_t hi = id == r.last.ledgerId ? r.last.entryId : it->second.entries - 1;
      if (hi < lo) continue;
      if (out->size() >= maxRanges) return false;
      auto* m = out->Add();
      addPosition(m->mutable_lowerendpoint(), id, lo - 1);
      addPosition(m->mutable_upperendpoint(), id, hi);
    }
    return true;
  });
}

template <typename Batches>
void appendBatches(const CursorState& s, int maxIndexes, Batches* out) {
  for (const auto& [p, set] : s.batchDeleted()) {
    if (out->size() >= maxIndexes) return;
    auto* b = out->Add();
    addPosition(b->mutable_position(), p.ledgerId, p.entryId);
    for (int64_t w : set) b->add_deleteset(w);
  }
}

template <typename Props>
void appendProperties(const CursorState& s, Props* out) {
  for (const auto& [name, value] : s.properties()) {
    auto* lp = out->Add();
    lp->set_name(name);
    lp->set_value(value);
  }
}

// Reads the parts PositionInfo and ManagedCursorInfo share.
template <typename Msg>
void readCommon(const Msg& msg, CursorMeta* m) {
  for (const auto& r : msg.individualdeletedmessages()) {
    const auto& lo = r.lowerendpoint();
    const auto& hi = r.upperendpoint();
    m->ranges.emplace_back(Position{lo.ledgerid(), lo.entryid() + 1},
                           Position{hi.ledgerid(), hi.entryid()});
  }
  for (const auto& p : msg.properties()) m->properties[p.name()] = p.value();
  for (const auto& b : msg.batchedentrydeletionindexinfo()) {
    AckSet set(b.deleteset().begin(), b.deleteset().end());
    m->batchDeleted.emplace_back(Position{b.position().ledgerid(), b.position().entryid()},
                                 std::move(set));
  }
}

}  // namespace

std::string urlEncode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (isUnreserved(c)) {
      out.push_back(ch);
    } else if (c == ' ') {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

Result<std::string> urlDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%') {
      int hi = i + 2 < s.size() ? hexValue(s[i + 1]) : -1;
      int lo = i + 2 < s.size() ? hexValue(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return Status::invalidArgument("bad %-escape in '" + std::string(s) + "'");
      }
      out.push_back(static_cast<char>(hi << 4 | lo));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string pulsarLedgerName(std::string_view name) {
  size_t n = topicPrefixLength(name);
  if (n == 0) return std::string(name);
  return std::string(name.substr(0, n)) + urlEncode(name.substr(n));
}

Result<std::string> storageLedgerName(std::string_view pulsarName) {
  size_t n = topicPrefixLength(pulsarName);
  if (n == 0) return std::string(pulsarName);
  auto local = urlDecode(pulsarName.substr(n));
  if (!local.isOk()) return local.status();
  return std::string(pulsarName.substr(0, n)) + *local;
}

std::string managedLedgerPath(std::string_view root, std::string_view name) {
  return std::string(root) + "/" + pulsarLedgerName(name);
}

std::string cursorPath(std::string_view root, std::string_view name, std::string_view cursor) {
  return managedLedgerPath(root, name) + "/" + std::string(cursor);
}

std::map<std::string, std::string> dataLedgerMetadata(std::string_view pulsarName) {
  return {{"application", "pulsar"},
          {"component", "managed-ledger"},
          {"pulsar/managed-ledger", std::string(pulsarName)}};
}

std::map<std::string, std::string> cursorLedgerMetadata(std::string_view pulsarName,
                                                        std::string_view cursor) {
  auto m = dataLedgerMetadata(pulsarName);
  m["pulsar/cursor"] = std::string(cursor);
  return m;
}

std::string pulsarTopicName(std::string_view name) {
  // tenant/ns/domain/local
  size_t a = name.find('/');
  size_t b = a == std::string_view::npos ? a : name.find('/', a + 1);
  size_t c = b == std::string_view::npos ? b : name.find('/', b + 1);
  if (c == std::string_view::npos) return std::string(name);
  std::string out(name.substr(b + 1, c - b - 1));
  out.append("://");
  out.append(name.substr(0, b));
  out.push_back('/');
  out.append(name.substr(c + 1));
  return out;
}

namespace {

void putVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool getVarint(std::string_view* in, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in->empty()) return false;
    auto b = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    *v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

uint32_t getBE32(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
}

void putBE32(uint32_t v, uint8_t* p) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

}  // namespace

std::string messageIdDataBytes(Position id) {
  std::string s;
  s.push_back(0x08);  // field 1 (ledgerId), varint
  putVarint(static_cast<uint64_t>(id.ledgerId), &s);
  s.push_back(0x10);  // field 2 (entryId), varint
  putVarint(static_cast<uint64_t>(id.entryId), &s);
  return s;
}

Result<Position> parseMessageIdData(std::string_view in) {
  Position p;
  bool ledger = false;
  bool entry = false;
  while (!in.empty()) {
    uint64_t tag = 0;
    if (!getVarint(&in, &tag)) return Status::corruption("MessageIdData: truncated tag");
    uint64_t v = 0;
    switch (tag & 7) {
      case 0:
        if (!getVarint(&in, &v)) return Status::corruption("MessageIdData: truncated varint");
        if (tag >> 3 == 1) {
          p.ledgerId = static_cast<int64_t>(v);
          ledger = true;
        } else if (tag >> 3 == 2) {
          p.entryId = static_cast<int64_t>(v);
          entry = true;
        }
        break;
      case 1:
      case 5: {
        size_t n = (tag & 7) == 1 ? 8 : 4;
        if (in.size() < n) return Status::corruption("MessageIdData: truncated fixed field");
        in.remove_prefix(n);
        break;
      }
      case 2:
        if (!getVarint(&in, &v) || v > in.size()) {
          return Status::corruption("MessageIdData: truncated length-delimited field");
        }
        in.remove_prefix(static_cast<size_t>(v));
        break;
      default:
        return Status::corruption("MessageIdData: wire type " + std::to_string(tag & 7));
    }
  }
  if (!ledger || !entry) return Status::corruption("MessageIdData without ledgerId or entryId");
  return p;
}

Buffer encodeRawMessage(Position id, std::string_view entry) {
  std::string idBytes = messageIdDataBytes(id);
  Buffer b = Buffer::allocate(8 + idBytes.size() + entry.size());
  uint8_t* p = b.mutableData();
  putBE32(static_cast<uint32_t>(idBytes.size()), p);
  std::memcpy(p + 4, idBytes.data(), idBytes.size());
  putBE32(static_cast<uint32_t>(entry.size()), p + 4 + idBytes.size());
  if (!entry.empty()) std::memcpy(p + 8 + idBytes.size(), entry.data(), entry.size());
  return b;
}

Result<Entry> parseRawMessage(std::string_view in) {
  if (in.size() < 4) return Status::corruption("RawMessage: shorter than its id size");
  uint32_t idSize = getBE32(in.data());
  in.remove_prefix(4);
  if (idSize > in.size()) {
    return Status::corruption("RawMessage: id size " + std::to_string(idSize) + " past the end (" +
                              std::to_string(in.size()) + " bytes left)");
  }
  auto id = parseMessageIdData(in.substr(0, idSize));
  if (!id.isOk()) return Status::corruption("RawMessage: " + id.status().message());
  in.remove_prefix(idSize);
  if (in.size() < 4) return Status::corruption("RawMessage: no payload size after the id");
  uint32_t size = getBE32(in.data());
  in.remove_prefix(4);
  if (size > in.size()) {
    return Status::corruption("RawMessage: payload size " + std::to_string(size) +
                              " past the end (" + std::to_string(in.size()) + " bytes left)");
  }
  Entry e;
  e.position = *id;
  e.data = Buffer::copyOf(in.data(), size);
  return e;
}

std::map<std::string, std::string> compactedLedgerMetadata(std::string_view pulsarTopic,
                                                           Position horizon) {
  return {{"application", "pulsar"},
          {"component", "compacted-ledger"},
          {"pulsar/compactedTopic", std::string(pulsarTopic)},
          {"pulsar/compactedTo", messageIdDataBytes(horizon)}};
}

namespace {
// A message of type M from bytes: kCorruption naming `what` when they do not parse; with
// `compression` (the setting that would compress it), MetaStoreImpl's compressed layout is
// refused (kUnsupported).
template <class M>
Result<M> parseMessage(std::string_view bytes, const std::string& what,
                       const char* compression = nullptr) {
  M m;
  if (compression && compressed(bytes)) {
    return Status::unsupported("compressed " + what + " (" + compression + " other than NONE)");
  }
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::corruption(what + " does not parse");
  }
  return m;
}
}  // namespace

Result<mledger::ManagedLedgerInfo> parseManagedLedgerInfo(std::string_view bytes) {
  if (bytes.empty()) return mledger::ManagedLedgerInfo{};
  return parseMessage<mledger::ManagedLedgerInfo>(bytes, "ManagedLedgerInfo",
                                                  "managedLedgerInfoCompressionType");
}

Result<mledger::ManagedCursorInfo> parseManagedCursorInfo(std::string_view bytes) {
  return parseMessage<mledger::ManagedCursorInfo>(bytes, "ManagedCursorInfo",
                                                  "managedCursorInfoCompressionType");
}

Result<mledger::PositionInfo> parsePositionInfo(std::string_view bytes) {
  return parseMessage<mledger::PositionInfo>(bytes, "PositionInfo");
}

CursorMeta cursorMetaFrom(const mledger::PositionInfo& p) {
  CursorMeta m;
  m.markDelete = Position{p.ledgerid(), p.entryid()};
  readCommon(p, &m);
  if (p.individualdeletedmessages_size() == 0) {
    // ConcurrentOpenLongPairRangeSet.toRanges: per ledger, BitSet.toLongArray of acked entries.
    for (const auto& l : p.individualdeletedmessageranges()) {
      int64_t runStart = -1;
      const int64_t bits = static_cast<int64_t>(l.values_size()) * 64;
      for (int64_t e = 0; e <= bits; ++e) {
        bool set =
            e < bits &&
            ((static_cast<uint64_t>(l.values(static_cast<int>(e / 64))) >> (e % 64)) & 1) != 0;
        if (set && runStart < 0) runStart = e;
        if (!set && runStart >= 0) {
          m.ranges.emplace_back(Position{l.key(), runStart}, Position{l.key(), e - 1});
          runStart = -1;
        }
      }
    }
  }
  return m;
}

CursorMeta cursorMetaFrom(const mledger::ManagedCursorInfo& c) {
  CursorMeta m;
  m.markDelete = Position{c.markdeleteledgerid(), c.markdeleteentryid()};
  readCommon(c, &m);
  return m;
}

CursorState restoreCursor(const CursorMeta& m, const LedgerSet& ledgers, Position lastConfirmed) {
  std::vector<std::pair<Position, Position>> ranges;
  for (const auto& [first, last] : m.ranges) {
    Position f = ledgers.ceil(first);
    if (!ledgers.contains(f) || f > last) continue;
    ranges.emplace_back(f, last);
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<Position, Position>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && ledgers.next(merged.back().second) >= r.first) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  CursorState s;
  s.restore(std::min(m.markDelete, lastConfirmed), merged, ledgers);
  s.restoreBatchDeleted(m.batchDeleted, ledgers);
  s.setProperties(m.properties);
  return s;
}

mledger::PositionInfo makePositionInfo(const CursorState& s, const LedgerSet& ledgers,
                                       const CursorPersistLimits& limits) {
  mledger::PositionInfo p;
  p.set_ledgerid(s.markDelete().ledgerId);
  p.set_entryid(s.markDelete().entryId);
  appendRanges(s, ledgers, limits.maxUnackedRanges, p.mutable_individualdeletedmessages());
  appendProperties(s, p.mutable_properties());
  appendBatches(s, limits.maxBatchDeletedIndexes, p.mutable_batchedentrydeletionindexinfo());
  return p;
}

mledger::ManagedCursorInfo makeCursorInfo(
    int64_t cursorsLedgerId, const CursorState& s, const LedgerSet& ledgers,
    const CursorPersistLimits& limits, int64_t lastActiveMs, bool withState,
    const std::map<std::string, std::string>& cursorProperties) {
  mledger::ManagedCursorInfo c;
  c.set_cursorsledgerid(cursorsLedgerId);
  c.set_markdeleteledgerid(s.markDelete().ledgerId);
  c.set_markdeleteentryid(s.markDelete().entryId);
  c.set_lastactive(lastActiveMs);
  appendProperties(s, c.mutable_properties());
  if (withState) {
    appendRanges(s, ledgers, limits.maxUnackedRanges, c.mutable_individualdeletedmessages());
    appendBatches(s, limits.maxBatchDeletedIndexes, c.mutable_batchedentrydeletionindexinfo());
  }
  for (const auto& [k, v] : cursorProperties) {
    auto* sp = c.add_cursorproperties();
    sp->set_name(k);
    sp->set_value(v);
  }
  return c;
}

}  // namespace magnetar::storage::bk
