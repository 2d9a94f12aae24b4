#include "bookkeeper/ledger_metadata.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/evp.h>

#include "bookkeeper/ledger_metadata.pb.h"

namespace magnetar::bookkeeper {
namespace {

// LedgerMetadataSerDe.VERSION_KEY_BYTES and METADATA_FORMAT_VERSION_3.
constexpr std::string_view kVersionKey = "BookieMetadataFormatVersion\t";
constexpr int kFormatVersion3 = 3;
constexpr size_t kMaxVersionDigits = 10;  // LedgerMetadataSerDe.MAX_VERSION_DIGITS

std::string base64(std::string_view s) {
  std::string out(4 * ((s.size() + 2) / 3), '\0');
  int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string_view digestName(DigestType d) {
  switch (d) {
    case DigestType::kCrc32:
      return "CRC32";
    case DigestType::kHmac:
      return "MAC";  // DigestType.MAC in the client API
    case DigestType::kCrc32c:
      return "CRC32C";
    case DigestType::kDummy:
      return "DUMMY";
  }
  return "?";
}

void writeVarint32(std::string& out, uint32_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

}  // namespace

const std::vector<BookieId>& LedgerMetadata::ensembleFor(int64_t entryId) const {
  auto it = ensembles.upper_bound(entryId);
  if (it != ensembles.begin()) --it;
  return it->second;
}

std::string serializeLedgerMetadata(const LedgerMetadata& md) {
  pb::LedgerMetadataFormat f;
  f.set_quorumsize(md.writeQuorumSize);
  f.set_ackquorumsize(md.ackQuorumSize);
  f.set_ensemblesize(md.ensembleSize);
  f.set_length(md.length);
  f.set_lastentryid(md.lastEntryId);
  f.set_state(static_cast<pb::LedgerMetadataFormat::State>(md.state));
  if (md.ctimeMs > 0) f.set_ctime(md.ctimeMs);
  f.set_digesttype(static_cast<pb::LedgerMetadataFormat::DigestType>(md.digestType));
  f.set_password(md.password);
  for (const auto& [k, v] : md.customMetadata) {
    auto* e = f.add_custommetadata();
    e->set_key(k);
    e->set_value(v);
  }
  for (const auto& [first, bookies] : md.ensembles) {
    auto* seg = f.add_segment();
    seg->set_firstentryid(first);
    for (const auto& b : bookies) seg->add_ensemblemember(b);
  }
  f.set_ctoken(md.cToken);
  std::string body = f.SerializeAsString();
  std::string out(kVersionKey);
  out += std::to_string(kFormatVersion3);
  out += '\n';
  writeVarint32(out, static_cast<uint32_t>(body.size()));
  out += body;
  return out;
}

Result<LedgerMetadata> parseLedgerMetadata(std::string_view b) {
  if (b.substr(0, kVersionKey.size()) != kVersionKey) {
    return Status::corruption("ledger metadata header corrupt");
  }
  b.remove_prefix(kVersionKey.size());
  size_t nl = b.find('\n');
  if (nl == std::string_view::npos || nl == 0 || nl > kMaxVersionDigits) {
    return Status::corruption("ledger metadata: no format version line");
  }
  std::string version(b.substr(0, nl));
  b.remove_prefix(nl + 1);
  if (version != "3") {
    return Status::unsupported("ledger metadata format version " + version +
                               " (only 3, BookKeeper's since 4.9, is read)");
  }
  uint32_t size = 0;
  int shift = 0;
  size_t i = 0;
  for (;; ++i) {
    if (i >= b.size() || shift > 28) return Status::corruption("ledger metadata: bad length");
    auto c = static_cast<uint8_t>(b[i]);
    size |= uint32_t{c & 0x7fu} << shift;
    shift += 7;
    if ((c & 0x80) == 0) break;
  }
  b.remove_prefix(i + 1);
  if (b.size() < size) return Status::corruption("ledger metadata: truncated protobuf");
  pb::LedgerMetadataFormat f;
  if (!f.ParseFromArray(b.data(), static_cast<int>(size))) {
    return Status::corruption("ledger metadata: invalid LedgerMetadataFormat");
  }
  LedgerMetadata md;
  md.ensembleSize = f.ensemblesize();
  md.writeQuorumSize = f.quorumsize();
  md.ackQuorumSize = f.has_ackquorumsize() ? f.ackquorumsize() : f.quorumsize();
  md.length = f.length();
  md.lastEntryId = f.has_lastentryid() ? f.lastentryid() : -1;
  md.state = static_cast<LedgerState>(f.state());
  md.digestType = f.has_digesttype() ? static_cast<DigestType>(f.digesttype()) : DigestType::kCrc32;
  md.password = f.password();
  md.ctimeMs = f.ctime();
  md.cToken = f.ctoken();
  for (const auto& e : f.custommetadata()) md.customMetadata[e.key()] = e.value();
  for (const auto& s : f.segment()) {
    md.ensembles[s.firstentryid()] =
        std::vector<BookieId>(s.ensemblemember().begin(), s.ensemblemember().end());
  }
  if (md.ensembles.empty() || md.ensembleSize <= 0 || md.writeQuorumSize <= 0 ||
      md.ackQuorumSize <= 0 || md.writeQuorumSize > md.ensembleSize ||
      md.ackQuorumSize > md.writeQuorumSize) {
    return Status::corruption("ledger metadata: inconsistent quorums or no ensemble");
  }
  for (const auto& [first, bookies] : md.ensembles) {
    if (static_cast<int32_t>(bookies.size()) != md.ensembleSize) {
      return Status::corruption("ledger metadata: segment at entry " + std::to_string(first) +
                                " has " + std::to_string(bookies.size()) + " bookies");
    }
  }
  return md;
}

std::string ledgerPath(std::string_view root, int64_t ledgerId) {
  if (ledgerId < 0x7fffffffLL) {
    std::string id = fmt::format("{:010d}", ledgerId);
    return fmt::format("{}/{}/{}/L{}", root, id.substr(0, 2), id.substr(2, 4), id.substr(6, 4));
  }
  std::string id = fmt::format("{:019d}", ledgerId);
  return fmt::format("{}/{}/{}/{}/{}/L{}", root, id.substr(0, 3), id.substr(3, 4), id.substr(7, 4),
                     id.substr(11, 4), id.substr(15, 4));
}

Result<std::string> parseLayout(std::string_view b) {
  size_t nl = b.find('\n');
  if (nl == std::string_view::npos) return Status::corruption("ledger layout: no version line");
  std::string_view version = b.substr(0, nl);
  if (version != "2") {
    return Status::unsupported("ledger layout format version " + std::string(version));
  }
  std::string_view rest = b.substr(nl + 1);
  size_t colon = rest.rfind(':');
  std::string cls(rest.substr(0, colon));
  if (cls != "org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory" &&
      cls != "org.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory") {
    return Status::unsupported("ledger manager " + cls +
                               " (only the hierarchical ledger managers are supported)");
  }
  return cls;
}

std::string_view ledgerStateName(LedgerState s) {
  switch (s) {
    case LedgerState::kOpen:
      return "OPEN";
    case LedgerState::kInRecovery:
      return "IN_RECOVERY";
    case LedgerState::kClosed:
      return "CLOSED";
  }
  return "UNKNOWN";
}

std::string ledgerMetadataToString(const LedgerMetadata& md) {
  std::string s = fmt::format(
      "LedgerMetadata{{formatVersion=3, ensembleSize={}, writeQuorumSize={}, "
      "ackQuorumSize={}, state={}",
      md.ensembleSize, md.writeQuorumSize, md.ackQuorumSize, ledgerStateName(md.state));
  if (md.state == LedgerState::kClosed) {
    s += fmt::format(", length={}, lastEntryId={}", md.length, md.lastEntryId);
  }
  s += fmt::format(", digestType={}, password=base64:{}, ensembles={{", digestName(md.digestType),
                   base64(md.password));
  bool first = true;
  for (const auto& [id, bookies] : md.ensembles) {
    s += fmt::format("{}{}=[{}]", first ? "" : ", ", id, fmt::join(bookies, ", "));
    first = false;
  }
  s += "}, customMetadata={";
  first = true;
  for (const auto& [k, v] : md.customMetadata) {
    s += fmt::format("{}{}=base64:{}", first ? "" : ", ", k, base64(v));
    first = false;
  }
  s += "}}";
  return s;
}

}  // namespace magnetar::bookkeeper
