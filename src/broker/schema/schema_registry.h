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
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "broker/common/topic_name.h"
#include "broker/schema/schema_compatibility.h"
#include "metadata/cache.h"
#include "metadata/store.h"
#include "net/executor.h"

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
// escapePathComponent); docs/broker-metadata-format.md.
inline constexpr const char* kSchemasRoot = "/admin/magnetar/schemas";

// Thread-safe: reads answer from memory (one mutex, never held across I/O). The mutators are
// asynchronous (Pulsar's SchemaRegistryService): with a store attached they write the schema id's
// record through a MetadataCache, compare-and-set at the version read (retried when another broker
// wrote first), and call back on the executor the caller names once the store answered; without
// a store they change memory and call back at once (posted, never inline).
class SchemaRegistry {
 public:
  using VersionCallback = std::function<void(Result<int64_t>)>;

  SchemaRegistry();
  ~SchemaRegistry();

  // Reads every record under kSchemasRoot of `store` (standalone: the local store; cluster mode:
  // the configuration store, shared by every broker) and follows the changes any session makes.
  // loop: the executor of the registry's store callbacks (a metadata loop, not an I/O loop).
  // ready(status of the first listing) runs on loop once loaded. store and loop outlive this
  // (detach() first). Thread: any, once.
  void attach(metadata::Store* store, net::Executor* loop, std::function<void(Status)> ready);
  // Stops following the store (the registry keeps what it has, in memory only). Thread: any.
  void detach();

  // The latest version (nullopt when none or deleted), or `version` among the live versions.
  std::optional<StoredSchema> getSchema(const std::string& id,
                                        std::optional<int64_t> version = std::nullopt) const;
  // The live versions, oldest first.
  std::vector<StoredSchema> getAllSchemas(const std::string& id) const;
  bool hasSchema(const std::string& id) const { return getSchema(id).has_value(); }

  // Pulsar's putSchemaIfAbsent: the version of an identical live schema, else checks
  // `strategy` against the live versions and stores a new version. cb runs on ex. Errors:
  // kNotAllowed (incompatible, Pulsar's message), the store's.
  void putSchemaIfAbsent(const std::string& id, const SchemaData& schema,
                         SchemaCompatibilityStrategy strategy, net::Executor* ex,
                         VersionCallback cb);
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
  // Adds a tombstone and calls back with its version; with `force` forgets every version (cb gets
  // the version the tombstone would have had). cb runs on ex. Errors: the store's.
  void deleteSchema(const std::string& id, bool force, net::Executor* ex, VersionCallback cb);

 private:
  using Versions = std::vector<StoredSchema>;
  // Live versions of `id`.
  std::vector<const StoredSchema*> liveLocked(const std::string& id) const REQUIRES(mu_);
  // Sets (non-empty) or forgets id's versions in memory.
  void apply(const std::string& id, Versions versions);
  // Writes id's record with `change` (current versions -> new ones, nullopt: no write) and
  // calls back with the version `change` chose (*chosen).
  void update(const std::string& id,
              const std::function<Result<std::optional<Versions>>(Versions)>& change,
              const std::shared_ptr<int64_t>& chosen, net::Executor* ex, VersionCallback cb);

  mutable Mutex mu_;
  std::map<std::string, Versions> schemas_ GUARDED_BY(mu_);
  // Set by attach(), then read-only until detach().
  std::shared_ptr<metadata::MetadataCache<Versions>> cache_;
  std::shared_ptr<metadata::ChildrenMirror<Versions>> mirror_;
  net::Executor* loop_ = nullptr;
};

// The store's text form of one id's versions (exposed for tests); see
// docs/broker-metadata-format.md. Malformed lines are skipped.
std::string encodeSchemaRecord(const std::vector<StoredSchema>& versions);
std::vector<StoredSchema> decodeSchemaRecord(const std::string& text);

}  // namespace magnetar::broker
