// TxnID: a transaction's id, as Pulsar's org.apache.pulsar.client.api.transaction.TxnID. The
// most significant bits are the coordinator id (the partition of
// pulsar/system/transaction_coordinator_assign that issued it), the least significant bits the
// coordinator's sequence. On the wire: txnid_most_bits / txnid_least_bits of the TC commands,
// SEND, ACK and MessageMetadata.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_COMMON)
#error "broker/common is not below this broker part (src/broker/README.md)"
#endif

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace magnetar::broker {

struct TxnID {
  uint64_t mostBits = 0;   // coordinator id
  uint64_t leastBits = 0;  // sequence within the coordinator

  // "(most,least)", Pulsar's TxnID.toString(), used in its errors, stats keys and admin paths.
  std::string toString() const {
    return "(" + std::to_string(mostBits) + "," + std::to_string(leastBits) + ")";
  }
  friend bool operator==(const TxnID& a, const TxnID& b) {
    return a.mostBits == b.mostBits && a.leastBits == b.leastBits;
  }
  friend bool operator!=(const TxnID& a, const TxnID& b) { return !(a == b); }
  friend bool operator<(const TxnID& a, const TxnID& b) {
    return a.mostBits != b.mostBits ? a.mostBits < b.mostBits : a.leastBits < b.leastBits;
  }
};

// Low water marks per coordinator id. A coordinator's mark: every txn of it with a sequence <= it
// has ended; -1 before any (Pulsar's long; the wire's uint64 txnid_least_bits_of_low_watermark
// read back as signed). Absent: nothing known, as -1.
using LowWaterMarks = std::map<uint64_t, int64_t>;

// True when txn ended by its coordinator's mark in marks (Pulsar's signed compare).
inline bool atOrBelowLowWaterMark(const LowWaterMarks& marks, const TxnID& txn) {
  auto it = marks.find(txn.mostBits);
  return it != marks.end() && static_cast<int64_t>(txn.leastBits) <= it->second;
}

// Raises coordinator tc's mark to lwm (marks only move up); returns the mark kept.
inline int64_t raiseLowWaterMark(LowWaterMarks& marks, uint64_t tc, int64_t lwm) {
  auto [it, fresh] = marks.emplace(tc, lwm);
  if (!fresh && lwm > it->second) it->second = lwm;
  return it->second;
}

struct TxnIDHash {
  size_t operator()(const TxnID& t) const {
    return std::hash<uint64_t>()(t.mostBits * 0x9e3779b97f4a7c15ULL ^ t.leastBits);
  }
};

}  // namespace magnetar::broker
