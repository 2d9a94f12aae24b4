// LedgerManager: BookKeeper's cluster metadata in ZooKeeper through metadata::Store, laid out as a
// BookKeeper 4.17 cluster with the (default) hierarchical ledger manager has it:
//   <root>/LAYOUT                 the ledger manager layout (checked once by checkLayout)
//   <root>/available/<host:port>  writable bookies (ephemeral, registered by the bookies)
//   <root>/idgen/ID-<10 digits>   ledger ids: ephemeral-sequential, created then deleted
//                                 (ZkLedgerIdGenerator); the sequence number is the id
//   <root>/<hierarchical path>    each ledger's metadata (LedgerMetadataSerDe format 3), written
//                                 by compare-and-set on the znode version
// Every callback runs on the executor passed with the call. Thread: any; holds no state but the
// store and the root.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bookkeeper/ledger_metadata.h"
#include "bookkeeper/protocol.h"
#include "metadata/store.h"

namespace magnetar::bookkeeper {

// Metadata with the znode version it was read or written at (for the next CAS).
struct VersionedMetadata {
  LedgerMetadata metadata;
  metadata::Version version = 0;
};

class LedgerManager {
 public:
  using MetadataCallback = std::function<void(BkResult, VersionedMetadata)>;
  using IdCallback = std::function<void(BkResult, int64_t)>;
  using BookiesCallback = std::function<void(BkResult, std::vector<BookieId>)>;
  using DoneCallback = std::function<void(BkResult)>;

  // root: the ledgers root path of the metadata service URI ("/ledgers").
  LedgerManager(metadata::Store* store, std::string root) : store_(store), root_(std::move(root)) {}
  const std::string& root() const { return root_; }

  // Reads <root>/LAYOUT: kOk for the hierarchical ledger managers; kMetadataError naming the
  // problem otherwise (no cluster initialised there, another ledger manager).
  void checkLayout(net::Executor* ex, std::function<void(BkResult, std::string)> cb);
  // Writable bookies: the children of <root>/available except "readonly", sorted.
  void availableBookies(net::Executor* ex, BookiesCallback cb);
  // A new ledger id from <root>/idgen (ZkLedgerIdGenerator: ids below 2^31-1).
  void generateLedgerId(net::Executor* ex, IdCallback cb);
  // Creates the ledger's znode; kMetadataVersion if it already exists.
  void createLedgerMetadata(int64_t ledgerId, const LedgerMetadata& md, net::Executor* ex,
                            MetadataCallback cb);
  // kNoSuchLedger when the znode is missing; kMetadataError for unreadable metadata.
  void readLedgerMetadata(int64_t ledgerId, net::Executor* ex, MetadataCallback cb);
  // Compare-and-set at `version`: kMetadataVersion when another writer got there first.
  void writeLedgerMetadata(int64_t ledgerId, const LedgerMetadata& md, metadata::Version version,
                           net::Executor* ex, MetadataCallback cb);
  // Removes the znode (any version); kNoSuchLedger when missing.
  void removeLedgerMetadata(int64_t ledgerId, net::Executor* ex, DoneCallback cb);
  // Every ledger id under <root>, sorted (HierarchicalLedgerManager's iterator): walks the
  // all-digit directories ("00/0000", long layout "000/0000/0000/0000") down to the "L<4 digits>"
  // leaves; the id is the concatenated digits. Other znodes (available, idgen, LAYOUT, cookies,
  // underreplication, ...) are skipped. kMetadataError when ZooKeeper fails.
  void listLedgers(net::Executor* ex, std::function<void(BkResult, std::vector<int64_t>)> cb);

 private:
  metadata::Store* store_;
  std::string root_;
};

}  // namespace magnetar::bookkeeper
