// Consumer and Producer: a client's endpoint on a topic. Immutable identity plus state owned by
// the topic's ml-worker executor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "protocol/pulsar_api.pb.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

class ServerCnx;
class Subscription;
class PersistentTopic;

using SubType = proto::CommandSubscribe::SubType;

// Thread: identity fields are immutable; the rest belongs to the topic's executor.
class Consumer {
 public:
  Consumer(uint64_t id, std::string name, std::shared_ptr<ServerCnx> cnx, SubType type,
           int priorityLevel)
      : id_(id), name_(std::move(name)), cnx_(std::move(cnx)), type_(type),
        priorityLevel_(priorityLevel) {}

  uint64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  const std::shared_ptr<ServerCnx>& cnx() const { return cnx_; }
  SubType subType() const { return type_; }
  int priorityLevel() const { return priorityLevel_; }

  // --- topic executor state ---
  int64_t permits = 0;                             // messages the client can still take
  // Dispatched, not acked: position -> messages in the entry and its sticky-key hash (-1: none).
  struct PendingAck {
    int32_t messages = 1;
    int32_t keyHash = -1;
  };
  std::map<storage::Position, PendingAck> pendingAcks;
  int64_t unackedMessages = 0;
  bool blockedOnUnacked = false;
  bool closed = false;
  // Key_Shared: explicit hash ranges (STICKY mode); empty for AUTO_SPLIT.
  std::vector<std::pair<int32_t, int32_t>> stickyRanges;
  bool allowOutOfOrderDelivery = false;
  // Stats.
  uint64_t msgOutCounter = 0;
  uint64_t bytesOutCounter = 0;
  int64_t connectedSinceMs = 0;

 private:
  const uint64_t id_;
  const std::string name_;
  const std::shared_ptr<ServerCnx> cnx_;
  const SubType type_;
  const int priorityLevel_;
};

// Thread: identity immutable; counters belong to the topic's executor.
class Producer {
 public:
  Producer(uint64_t id, std::string name, std::shared_ptr<ServerCnx> cnx, bool exclusive)
      : id_(id), name_(std::move(name)), cnx_(std::move(cnx)), exclusive_(exclusive) {}
  uint64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  const std::shared_ptr<ServerCnx>& cnx() const { return cnx_; }
  bool exclusive() const { return exclusive_; }

  uint64_t msgInCounter = 0;
  uint64_t bytesInCounter = 0;
  bool closed = false;

 private:
  const uint64_t id_;
  const std::string name_;
  const std::shared_ptr<ServerCnx> cnx_;
  const bool exclusive_;
};

}  // namespace magnetar::broker
