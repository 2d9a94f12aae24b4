// SchemaRegistry: the schemas of topics (Pulsar's SchemaRegistryService), versioned per schema id
// and persisted in the metadata store (docs/broker-metadata-format.md). The schema id is the base
// topic name without the domain ("tenant/ns/topic"), so the partitions of a partitioned topic
// share one schema, as Pulsar. Versions are 0, 1, ... per id; a delete adds a tombstone version,
// and only the versions after the last tombstone count (Pulsar's trimDeletedSchemaAndGetList).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_SCHEMA)
#error "broker/schema is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "broker/common/topic_name.h"
#include "broker/schema/schema_compatibility.h"
#include "storage/metadata_store.h"

namespace magnetar::broker {

// One stored version (Pulsar's SchemaAndMetadata / StoredSchema).
struct StoredSchema {
  int64_t version = 0;
  SchemaData schema;
  int64_t timestampMs = 0;  // wall clock at registration
  bool deleted = false;     // a tombstone
};

// The 8-byte big-endian version Pulsar's LongSchemaVersion sends on the wire; "" when absent.
std::string encodeSchemaVersion(std::optional<int64_t> version);
// nullopt for anything but 8 bytes.
std::optional<int64_t> decodeSchemaVersion(const std::string& bytes);

// Pulsar's schema id of a topic: "tenant/ns/topic" of its partitioned (base) topic.
std::string schemaIdOf(const TopicName& name);

// The node under which schemas are stored, one child per schema id (escaped by
// storage::escapePathComponent); docs/broker-metadata-format.md.
inline constexpr const char* kSchemasRoot = "/admin/magnetar/schemas";

// Thread-safe (one mutex); any thread, but the mutators write through to the store
// synchronously: call them off the I/O threads (topic executors, admin threads).
class SchemaRegistry {
 public:
  // Loads every /admin/magnetar/schemas/ record of `store` and writes later changes to it.
  // store outlives this. Errors: the store's (the registry stays in memory only).
  Status attachStore(storage::MetadataStore* store);
  // Cluster mode: one schema id's record as another broker stored it (nullopt: removed),
  // applied to the cache without writing. Thread: any.
  void applyRecord(const std::string& id, const std::optional<std::string>& text);

  // The latest version (nullopt when none or deleted), or `version` among the live versions.
  std::optional<StoredSchema> getSchema(const std::string& id,
                                        std::optional<int64_t> version = std::nullopt) const;
  // The live versions, oldest first.
  std::vector<StoredSchema> getAllSchemas(const std::string& id) const;
  bool hasSchema(const std::string& id) const { return getSchema(id).has_value(); }

  // Pulsar's putSchemaIfAbsent: the version of an identical live schema, else checks
  // `strategy` against the live versions and stores a new version. Errors: kNotAllowed
  // (incompatible, Pulsar's message), the store's.
  Result<int64_t> putSchemaIfAbsent(const std::string& id, const SchemaData& schema,
                                    SchemaCompatibilityStrategy strategy);
  // The version of an identical live schema, or -1.
  int64_t findSchemaVersion(const std::string& id, const SchemaData& schema) const;
  // Whether `schema` could be added under `strategy` (nothing stored). Errors: kNotAllowed, or
  // validateSchemaData's (the definition is validated first, as Pulsar does).
  Status checkCompatible(const std::string& id, const SchemaData& schema,
                         SchemaCompatibilityStrategy strategy) const;
  // Pulsar's checkConsumerCompatibility: a consumer's schema must be readable against the
  // latest (BACKWARD, FORWARD, FORWARD_TRANSITIVE, FULL check BACKWARD against the latest; the
  // other strategies all versions). Errors: kNotFound when the topic has no schema,
  // kNotAllowed when incompatible.
  Status checkConsumerCompatibility(const std::string& id, const SchemaData& schema,
                                    SchemaCompatibilityStrategy strategy) const;
  // Adds a tombstone and returns its version; with `force` forgets every version (returns the
  // version the tombstone would have had). Errors: the store's.
  Result<int64_t> deleteSchema(const std::string& id, bool force);

 private:
  // Live versions of `id`.
  std::vector<const StoredSchema*> liveLocked(const std::string& id) const REQUIRES(mu_);
  Status persistLocked(const std::string& id) REQUIRES(mu_);

  mutable Mutex mu_;
  std::map<std::string, std::vector<StoredSchema>> schemas_ GUARDED_BY(mu_);
  storage::MetadataStore* store_ GUARDED_BY(mu_) = nullptr;
};

// The store's text form of one id's versions (exposed for tests); see
// docs/broker-metadata-format.md. Malformed lines are skipped.
std::string encodeSchemaRecord(const std::vector<StoredSchema>& versions);
std::vector<StoredSchema> decodeSchemaRecord(const std::string& text);

}  // namespace magnetar::broker
