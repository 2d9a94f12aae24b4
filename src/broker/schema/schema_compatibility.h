// Schema types, compatibility strategies and Pulsar's compatibility checks: Avro schema
// resolution (avro_schema.h) for AVRO and JSON definitions (what Pulsar's
// AvroSchemaBasedCompatibilityCheck asks of Avro's SchemaValidator), the root message rule for
// PROTOBUF_NATIVE, the type check and the ALWAYS_INCOMPATIBLE rule for the other types.
// Pure functions; any thread.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_SCHEMA)
#error "broker/schema is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "broker/schema/avro_schema.h"

namespace magnetar::broker {

// Pulsar's SchemaType (org.apache.pulsar.common.schema.SchemaType), with its values: 0..20 are
// also the protocol's Schema.Type numbers. Written to the metadata store by name.
enum class SchemaType : int {
  NONE = 0,
  STRING = 1,
  JSON = 2,
  PROTOBUF = 3,
  AVRO = 4,
  BOOLEAN = 5,
  INT8 = 6,
  INT16 = 7,
  INT32 = 8,
  INT64 = 9,
  FLOAT = 10,
  DOUBLE = 11,
  DATE = 12,
  TIME = 13,
  TIMESTAMP = 14,
  KEY_VALUE = 15,
  INSTANT = 16,
  LOCAL_DATE = 17,
  LOCAL_TIME = 18,
  LOCAL_DATE_TIME = 19,
  PROTOBUF_NATIVE = 20,
  BYTES = -1,
  AUTO_CONSUME = -3,
};

// "AVRO", "JSON", ... as Pulsar prints them (messages, REST JSON).
const char* schemaTypeName(SchemaType t);
// The type of a name; nullopt for an unknown one.
std::optional<SchemaType> schemaTypeFromName(std::string_view name);
// The protocol's Schema.Type number <-> SchemaType (AutoConsume = 21; None for BYTES, as the
// Java client sends no schema for BYTES). Unknown numbers give NONE.
SchemaType schemaTypeFromProto(int protoType);
int schemaTypeToProto(SchemaType t);

// Pulsar's SchemaCompatibilityStrategy. UNDEFINED: the next level (broker setting) decides.
enum class SchemaCompatibilityStrategy {
  UNDEFINED,
  ALWAYS_INCOMPATIBLE,
  ALWAYS_COMPATIBLE,
  BACKWARD,
  FORWARD,
  FULL,
  BACKWARD_TRANSITIVE,
  FORWARD_TRANSITIVE,
  FULL_TRANSITIVE,
};
const char* strategyName(SchemaCompatibilityStrategy s);
std::optional<SchemaCompatibilityStrategy> strategyFromName(std::string_view name);
// BACKWARD_TRANSITIVE, FORWARD_TRANSITIVE, FULL_TRANSITIVE: checked against every version.
bool isTransitive(SchemaCompatibilityStrategy s);

// Pulsar's SchemaData: what a client or the admin API gives for a topic.
struct SchemaData {
  SchemaType type = SchemaType::NONE;
  std::string data;  // the definition (Avro JSON for AVRO/JSON/PROTOBUF; empty for primitives)
  std::map<std::string, std::string> properties;
};

// Whether `candidate` may follow `existing` (latest first; the versions after the last delete)
// under `strategy`, as Pulsar's SchemaRegistryServiceImpl: a non-transitive strategy looks at the
// latest only; ALWAYS_COMPATIBLE accepts everything; a different type is refused ("Incompatible
// schema: exists schema type X, new schema type Y"); an identical definition is accepted.
// PROTOBUF_NATIVE must keep its root message's full name (Pulsar's
// ProtobufNativeSchemaCompatibilityCheck; "Unknown SchemaCompatibilityStrategy." under
// ALWAYS_INCOMPATIBLE); PROTOBUF and the other types are refused only under ALWAYS_INCOMPATIBLE
// (Pulsar's default schemaRegistryCompatibilityCheckers have no PROTOBUF checker).
// Errors: kNotAllowed with Pulsar's IncompatibleSchemaException message.
// KEY_VALUE: Pulsar's KeyValueSchemaCompatibilityCheck (the key and value types must stay,
// "Key schemas or Value schemas are different schema type, ..."; then each part by its type's
// checker).
Status checkCompatibility(const std::vector<const SchemaData*>& existingLatestFirst,
                          const SchemaData& candidate, SchemaCompatibilityStrategy strategy);
// The type's checker alone, `from` already of candidate's type and chosen for the strategy
// (the latest or all), no shortcut for an identical definition (KEY_VALUE parts). Same errors.
Status checkByType(const std::vector<const SchemaData*>& from, const SchemaData& candidate,
                   SchemaCompatibilityStrategy strategy);

// Whether two schemas are the same for registration (Pulsar's getSchemaVersionBySchemaData):
// same type and bytes, or for AVRO/JSON/PROTOBUF the same parsed Avro schema.
bool sameSchema(const SchemaData& a, const SchemaData& b);

// Pulsar's SchemaDataValidator: an AVRO or PROTOBUF definition must parse as Avro, a JSON one as
// Avro or as a JSON object (the old Jackson JSON-schema format); STRING data must be empty or
// "null", the other primitive types' empty; AUTO_CONSUME is client-side only. KEY_VALUE and
// PROTOBUF_NATIVE are not looked into. Errors: kInvalidArgument with Pulsar's message
// ("Invalid schema definition data for AVRO schema", ...).
Status validateSchemaData(const SchemaData& s);

}  // namespace magnetar::broker
