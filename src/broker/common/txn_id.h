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

struct TxnIDHash {
  size_t operator()(const TxnID& t) const {
    return std::hash<uint64_t>()(t.mostBits * 0x9e3779b97f4a7c15ULL ^ t.leastBits);
  }
};

}  // namespace magnetar::broker
