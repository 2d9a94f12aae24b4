// Pulsar's managed-ledger formats on ZooKeeper and BookKeeper
// (docs/managed-ledger-bookkeeper-format.md): znode paths, the topic-name encoding Pulsar uses in
// them, the ledgers' custom metadata, and the conversions between the MLDataFormats messages
// (ml_data_formats.proto) and storage's cursor state. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/buffer.h"
#include "base/status.h"
#include "storage/bk/ml_data_formats.pb.h"
#include "storage/cursor_state.h"
#include "storage/ledger_set.h"
#include "storage/managed_ledger.h"
#include "storage/metadata_codec.h"

namespace magnetar::storage::bk {

// Pulsar's root of managed-ledger znodes (MetaStoreImpl.BASE_NODE).
inline constexpr char kManagedLedgersRoot[] = "/managed-ledgers";

// java.net.URLEncoder.encode(s, UTF-8), as Pulsar's Codec.encode: [A-Za-z0-9.*_-] unchanged, ' '
// as '+', every other byte as %XX (upper-case hex).
std::string urlEncode(std::string_view s);
// java.net.URLDecoder.decode: '+' as ' ', %XX as the byte. kInvalidArgument for a bad escape.
Result<std::string> urlDecode(std::string_view s);

// Storage's ledger name ("tenant/ns/persistent/local") -> Pulsar's managed-ledger name
// (TopicName.getPersistenceNamingEncoding: the local name URL-encoded, so "a/b c" is "a%2Fb+c").
// Names of another shape (no domain component) are used as they are.
std::string pulsarLedgerName(std::string_view name);
// The reverse of pulsarLedgerName.
Result<std::string> storageLedgerName(std::string_view pulsarName);

// "<root>/<pulsar name>" and "<root>/<pulsar name>/<cursor>" (MetaStoreImpl's paths).
std::string managedLedgerPath(std::string_view root, std::string_view name);
std::string cursorPath(std::string_view root, std::string_view name, std::string_view cursor);

// Custom metadata of a data ledger (LedgerMetadataUtils.buildBaseManagedLedgerMetadata):
// application=pulsar, component=managed-ledger, pulsar/managed-ledger=<pulsar name>.
std::map<std::string, std::string> dataLedgerMetadata(std::string_view pulsarName);
// A cursor ledger's: the data ledger's plus pulsar/cursor=<cursor name>
// (buildAdditionalMetadataForCursor, merged as ManagedLedgerImpl.asyncCreateLedger does).
std::map<std::string, std::string> cursorLedgerMetadata(std::string_view pulsarName,
                                                        std::string_view cursor);

// ---- Compacted ledgers (Pulsar's TwoPhaseCompactor / CompactedTopicImpl) ----

// Pulsar's topic name of a storage ledger name: "tenant/ns/persistent/local" ->
// "persistent://tenant/ns/local". Names of another shape are returned as they are.
std::string pulsarTopicName(std::string_view name);
// A MessageIdData (PulsarApi.proto) with ledgerId (1) and entryId (2) only, as Pulsar's
// MessageIdImpl.toByteArray writes a non-batch id without a partition.
std::string messageIdDataBytes(Position id);
// ledgerId and entryId of a MessageIdData; other fields skipped. kCorruption when it does not
// parse or lacks either.
Result<Position> parseMessageIdData(std::string_view bytes);
// RawMessageImpl.serialize: [u32 BE idSize][MessageIdData][u32 BE size][entry bytes], the entry as
// stored in the topic (metadata and payload).
Buffer encodeRawMessage(Position id, std::string_view entry);
// RawMessageImpl.deserializeFrom: the id's position and the entry bytes (a copy). kCorruption,
// saying what, when a size runs past the end or the id does not parse (bytes after the entry are
// ignored, as Pulsar's slice does).
Result<Entry> parseRawMessage(std::string_view bytes);
// Custom metadata of a compacted ledger (LedgerMetadataUtils.buildMetadataForCompactedLedger):
// application=pulsar, component=compacted-ledger, pulsar/compactedTopic=<Pulsar topic name>,
// pulsar/compactedTo=<MessageIdData of the horizon>.
std::map<std::string, std::string> compactedLedgerMetadata(std::string_view pulsarTopic,
                                                           Position horizon);

// A ManagedLedgerInfo znode's value. Empty bytes (what Pulsar writes when it creates the node) is
// an empty info. kUnsupported for a compressed value (magic 0x4778:
// managedLedgerInfoCompressionType other than NONE), kCorruption for bytes that do not parse.
Result<mledger::ManagedLedgerInfo> parseManagedLedgerInfo(std::string_view bytes);
// The same for a ManagedCursorInfo znode (managedCursorInfoCompressionType).
Result<mledger::ManagedCursorInfo> parseManagedCursorInfo(std::string_view bytes);
// A cursor ledger entry. kCorruption when it does not parse.
Result<mledger::PositionInfo> parsePositionInfo(std::string_view bytes);

// What a PositionInfo or ManagedCursorInfo holds, with Pulsar's open-closed ranges
// (lower, upper] turned into closed ranges [lower + 1, upper] (still unnormalised: a range's first
// position may be past its ledger's end; restoreCursor fixes that with the ledger list).
// Individually deleted entries stored as LongListMap bitsets (managedLedgerPersistIndividualAckAs
// LongArray) become one closed range per run of set bits.
CursorMeta cursorMetaFrom(const mledger::PositionInfo& p);
CursorMeta cursorMetaFrom(const mledger::ManagedCursorInfo& c);

// The cursor state recovered on `ledgers`: ranges moved to existing positions and merged where
// adjacent, the mark-delete position kept at or before `lastConfirmed`.
CursorState restoreCursor(const CursorMeta& m, const LedgerSet& ledgers, Position lastConfirmed);

// Limits of what is persisted per cursor (managedLedgerMaxUnackedRangesToPersist,
// managedLedgerMaxBatchDeletedIndexToPersist).
struct CursorPersistLimits {
  int maxUnackedRanges = 10000;
  int maxBatchDeletedIndexes = 10000;
};

// The PositionInfo Pulsar's ManagedCursorImpl.persistPositionToLedger writes: the mark-delete
// position, the acked ranges as open-closed ranges split at ledger boundaries (at most
// maxUnackedRanges), the properties, the batch ack sets (at most maxBatchDeletedIndexes).
mledger::PositionInfo makePositionInfo(const CursorState& s, const LedgerSet& ledgers,
                                       const CursorPersistLimits& limits);
// The ManagedCursorInfo of persistPositionMetaStore: the cursor ledger id (-1: none, the state is
// here), mark-delete position, properties, lastActive (ms since the epoch), the cursor's string
// properties (kept as read; Magnetar sets none); with `withState` also the ranges and batch ack
// sets (a cursor without a ledger, or closed).
mledger::ManagedCursorInfo makeCursorInfo(
    int64_t cursorsLedgerId, const CursorState& s, const LedgerSet& ledgers,
    const CursorPersistLimits& limits, int64_t lastActiveMs, bool withState,
    const std::map<std::string, std::string>& cursorProperties = {});

}  // namespace magnetar::storage::bk
