#include "broker/schema/schema_compatibility.h"

#include <fmt/format.h>

#include <boost/json.hpp>

#include "broker/schema/schema_data_validator.h"

namespace magnetar::broker {

namespace json = boost::json;

namespace {

struct TypeName {
  SchemaType type;
  const char* name;
};
constexpr TypeName kTypeNames[] = {
    {SchemaType::NONE, "NONE"},
    {SchemaType::STRING, "STRING"},
    {SchemaType::JSON, "JSON"},
    {SchemaType::PROTOBUF, "PROTOBUF"},
    {SchemaType::AVRO, "AVRO"},
    {SchemaType::BOOLEAN, "BOOLEAN"},
    {SchemaType::INT8, "INT8"},
    {SchemaType::INT16, "INT16"},
    {SchemaType::INT32, "INT32"},
    {SchemaType::INT64, "INT64"},
    {SchemaType::FLOAT, "FLOAT"},
    {SchemaType::DOUBLE, "DOUBLE"},
    {SchemaType::DATE, "DATE"},
    {SchemaType::TIME, "TIME"},
    {SchemaType::TIMESTAMP, "TIMESTAMP"},
    {SchemaType::KEY_VALUE, "KEY_VALUE"},
    {SchemaType::INSTANT, "INSTANT"},
    {SchemaType::LOCAL_DATE, "LOCAL_DATE"},
    {SchemaType::LOCAL_TIME, "LOCAL_TIME"},
    {SchemaType::LOCAL_DATE_TIME, "LOCAL_DATE_TIME"},
    {SchemaType::PROTOBUF_NATIVE, "PROTOBUF_NATIVE"},
    {SchemaType::BYTES, "BYTES"},
    {SchemaType::AUTO_CONSUME, "AUTO_CONSUME"},
};

constexpr int kProtoAutoConsume = 21;

struct StrategyName {
  SchemaCompatibilityStrategy strategy;
  const char* name;
};
constexpr StrategyName kStrategyNames[] = {
    {SchemaCompatibilityStrategy::UNDEFINED, "UNDEFINED"},
    {SchemaCompatibilityStrategy::ALWAYS_INCOMPATIBLE, "ALWAYS_INCOMPATIBLE"},
    {SchemaCompatibilityStrategy::ALWAYS_COMPATIBLE, "ALWAYS_COMPATIBLE"},
    {SchemaCompatibilityStrategy::BACKWARD, "BACKWARD"},
    {SchemaCompatibilityStrategy::FORWARD, "FORWARD"},
    {SchemaCompatibilityStrategy::FULL, "FULL"},
    {SchemaCompatibilityStrategy::BACKWARD_TRANSITIVE, "BACKWARD_TRANSITIVE"},
    {SchemaCompatibilityStrategy::FORWARD_TRANSITIVE, "FORWARD_TRANSITIVE"},
    {SchemaCompatibilityStrategy::FULL_TRANSITIVE, "FULL_TRANSITIVE"},
};

}  // namespace

const char* schemaTypeName(SchemaType t) {
  for (const auto& n : kTypeNames) {
    if (n.type == t) return n.name;
  }
  return "NONE";
}

std::optional<SchemaType> schemaTypeFromName(std::string_view name) {
  for (const auto& n : kTypeNames) {
    if (name == n.name) return n.type;
  }
  return std::nullopt;
}

SchemaType schemaTypeFromProto(int protoType) {
  if (protoType == kProtoAutoConsume) return SchemaType::AUTO_CONSUME;
  if (protoType < 0 || protoType > static_cast<int>(SchemaType::PROTOBUF_NATIVE)) {
    return SchemaType::NONE;
  }
  return static_cast<SchemaType>(protoType);
}

int schemaTypeToProto(SchemaType t) {
  if (t == SchemaType::AUTO_CONSUME) return kProtoAutoConsume;
  int v = static_cast<int>(t);
  return v < 0 ? 0 : v;
}

const char* strategyName(SchemaCompatibilityStrategy s) {
  for (const auto& n : kStrategyNames) {
    if (n.strategy == s) return n.name;
  }
  return "UNDEFINED";
}

std::optional<SchemaCompatibilityStrategy> strategyFromName(std::string_view name) {
  for (const auto& n : kStrategyNames) {
    if (name == n.name) return n.strategy;
  }
  return std::nullopt;
}

bool isTransitive(SchemaCompatibilityStrategy s) {
  return s == SchemaCompatibilityStrategy::BACKWARD_TRANSITIVE ||
         s == SchemaCompatibilityStrategy::FORWARD_TRANSITIVE ||
         s == SchemaCompatibilityStrategy::FULL_TRANSITIVE;
}

namespace {

bool usesAvroDefinition(SchemaType t) {
  return t == SchemaType::AVRO || t == SchemaType::JSON || t == SchemaType::PROTOBUF;
}

const char* kIncompatiblePrefix = "Error during schema compatibility check with strategy ";

Status avroIncompatible(SchemaCompatibilityStrategy strategy, const AvroSchema& reader,
                        const AvroSchema& writer) {
  return Status::notAllowed(fmt::format(
      "{}{}: org.apache.avro.SchemaValidationException: Unable to read schema: \n{}\nusing "
      "schema:\n{}",
      kIncompatiblePrefix, strategyName(strategy), avroPrettyString(writer),
      avroPrettyString(reader)));
}

// Avro's SchemaValidatorBuilder strategies over the parsed existing schemas (latest first).
Status checkAvro(const std::vector<const SchemaData*>& existing, const SchemaData& candidate,
                 SchemaCompatibilityStrategy strategy) {
  std::vector<std::shared_ptr<const AvroSchema>> from;
  for (const SchemaData* e : existing) {
    auto parsed = parseAvroSchema(e->data);
    if (!parsed.isOk()) {
      return Status::notAllowed("org.apache.avro.SchemaParseException: " +
                                parsed.status().message());
    }
    from.push_back(*parsed);
  }
  auto to = parseAvroSchema(candidate.data);
  if (!to.isOk()) {
    return Status::notAllowed("org.apache.avro.SchemaParseException: " + to.status().message());
  }
  const AvroSchema& next = **to;
  if (strategy == SchemaCompatibilityStrategy::ALWAYS_COMPATIBLE) return Status::ok();
  bool backward = strategy == SchemaCompatibilityStrategy::BACKWARD ||
                  strategy == SchemaCompatibilityStrategy::BACKWARD_TRANSITIVE ||
                  strategy == SchemaCompatibilityStrategy::FULL ||
                  strategy == SchemaCompatibilityStrategy::FULL_TRANSITIVE;
  bool forward = strategy == SchemaCompatibilityStrategy::FORWARD ||
                 strategy == SchemaCompatibilityStrategy::FORWARD_TRANSITIVE ||
                 strategy == SchemaCompatibilityStrategy::FULL ||
                 strategy == SchemaCompatibilityStrategy::FULL_TRANSITIVE;
  if (!backward && !forward) {  // ALWAYS_INCOMPATIBLE (Pulsar's NeverSchemaValidator)
    if (!from.empty()) return avroIncompatible(strategy, next, next);
    return Status::ok();
  }
  size_t n = isTransitive(strategy) ? from.size() : std::min<size_t>(1, from.size());
  for (size_t i = 0; i < n; ++i) {
    const AvroSchema& old = *from[i];
    if (backward && !canRead(next, old)) return avroIncompatible(strategy, next, old);
    if (forward && !canRead(old, next)) return avroIncompatible(strategy, old, next);
  }
  return Status::ok();
}

// Pulsar's ProtobufNativeSchemaCompatibilityCheck, the default checker for PROTOBUF_NATIVE: under
// every strategy but ALWAYS_COMPATIBLE (accepted earlier) and ALWAYS_INCOMPATIBLE (no case of its
// switch) the root message's full name must stay the same; fields are not compared.
Status checkProtobufNative(const std::vector<const SchemaData*>& existing,
                           const SchemaData& candidate, SchemaCompatibilityStrategy strategy) {
  if (strategy == SchemaCompatibilityStrategy::ALWAYS_INCOMPATIBLE) {
    return Status::notAllowed("Unknown SchemaCompatibilityStrategy.");
  }
  auto to = protobufNativeRootMessageName(candidate.data);
  if (!to.isOk()) return Status::notAllowed(to.status().message());
  for (const SchemaData* e : existing) {
    auto from = protobufNativeRootMessageName(e->data);
    if (!from.isOk()) return Status::notAllowed(from.status().message());
    if (*from != *to) {
      return Status::notAllowed(
          fmt::format("Protobuf root message change is not allowed under the '{}' strategy. "
                      "Original message name: '{}', new message name: '{}'.",
                      strategyName(strategy), *from, *to));
    }
  }
  return Status::ok();
}

}  // namespace

bool sameSchema(const SchemaData& a, const SchemaData& b) {
  if (a.type != b.type) return false;
  if (a.data == b.data) return true;
  if (!usesAvroDefinition(a.type)) return false;
  auto pa = parseAvroSchema(a.data);
  auto pb = parseAvroSchema(b.data);
  return pa.isOk() && pb.isOk() && avroEquals(**pa, **pb);
}

Status checkCompatibility(const std::vector<const SchemaData*>& existingLatestFirst,
                          const SchemaData& candidate, SchemaCompatibilityStrategy strategy) {
  if (existingLatestFirst.empty() || strategy == SchemaCompatibilityStrategy::ALWAYS_COMPATIBLE) {
    return Status::ok();
  }
  std::vector<const SchemaData*> from = existingLatestFirst;
  if (!isTransitive(strategy)) from.resize(1);
  for (const SchemaData* e : from) {
    if (e->type != candidate.type) {
      return Status::notAllowed(
          fmt::format("Incompatible schema: exists schema type {}, new schema type {}",
                      schemaTypeName(e->type), schemaTypeName(candidate.type)));
    }
  }
  // Non-transitive: the same definition as the latest needs no check (Pulsar's SchemaHash).
  if (!isTransitive(strategy) && from[0]->data == candidate.data) return Status::ok();
  return checkByType(from, candidate, strategy);
}

namespace {

// Pulsar's KeyValueSchemaCompatibilityCheck: the key and value types must stay ("Key schemas or
// Value schemas are different schema type, ..."), then the key parts are checked by the key
// type's checker and the value parts by the value type's.
Status checkKeyValue(const std::vector<const SchemaData*>& from, const SchemaData& candidate,
                     SchemaCompatibilityStrategy strategy) {
  auto [toKeyName, toValueName] = keyValuePartTypeNames(candidate);
  auto toParts = decodeKeyValueSchemaData(candidate.data);
  if (!toParts) return Status::notAllowed("Invalid schema definition data for KEY_VALUE schema");
  std::vector<SchemaData> keys, values;
  for (const SchemaData* e : from) {
    auto [keyName, valueName] = keyValuePartTypeNames(*e);
    if (keyName != toKeyName || valueName != toValueName) {
      return Status::notAllowed(fmt::format(
          "Key schemas or Value schemas are different schema type, from key schema type is {} "
          "and to key schema is {}, from value schema is {} and to value schema is {}",
          keyName, toKeyName, valueName, toValueName));
    }
    auto parts = decodeKeyValueSchemaData(e->data);
    if (!parts) return Status::notAllowed("Invalid schema definition data for KEY_VALUE schema");
    keys.push_back(SchemaData{SchemaType::NONE, std::move(parts->first), {}});
    values.push_back(SchemaData{SchemaType::NONE, std::move(parts->second), {}});
  }
  // A type Magnetar does not know (EXTERNAL) gets Pulsar's default checker, as BYTES does.
  SchemaType keyType = schemaTypeFromName(toKeyName).value_or(SchemaType::BYTES);
  SchemaType valueType = schemaTypeFromName(toValueName).value_or(SchemaType::BYTES);
  auto check = [&](std::vector<SchemaData>& parts, SchemaType type, std::string data) {
    std::vector<const SchemaData*> ptrs;
    for (auto& p : parts) {
      p.type = type;
      ptrs.push_back(&p);
    }
    return checkByType(ptrs, SchemaData{type, std::move(data), {}}, strategy);
  };
  if (Status k = check(keys, keyType, toParts->first); !k) return k;
  return check(values, valueType, toParts->second);
}

}  // namespace

Status checkByType(const std::vector<const SchemaData*>& from, const SchemaData& candidate,
                   SchemaCompatibilityStrategy strategy) {
  if (strategy == SchemaCompatibilityStrategy::ALWAYS_COMPATIBLE) return Status::ok();
  if (candidate.type == SchemaType::AVRO) return checkAvro(from, candidate, strategy);
  if (candidate.type == SchemaType::JSON) {
    // Pulsar's JsonSchemaCompatibilityCheck: Avro rules when the definitions are Avro; a
    // definition in the old JSON-schema format is accepted against an Avro one and vice versa.
    for (const SchemaData* e : from) {
      if (!parseAvroSchema(e->data).isOk()) return Status::ok();
    }
    if (!parseAvroSchema(candidate.data).isOk()) {
      boost::system::error_code ec;
      json::value v = json::parse(candidate.data, ec);
      if (!ec && v.is_object()) return Status::ok();
      return Status::notAllowed("Unknown schema format");
    }
    return checkAvro(from, candidate, strategy);
  }
  if (candidate.type == SchemaType::PROTOBUF_NATIVE) {
    return checkProtobufNative(from, candidate, strategy);
  }
  if (candidate.type == SchemaType::KEY_VALUE) return checkKeyValue(from, candidate, strategy);
  // Pulsar's default checker (SchemaCompatibilityCheck.DEFAULT), also for PROTOBUF: its
  // ProtobufSchemaCompatibilityCheck is not in the default schemaRegistryCompatibilityCheckers.
  if (strategy == SchemaCompatibilityStrategy::ALWAYS_INCOMPATIBLE) {
    return Status::notAllowed("Schema compatibility strategy is ALWAYS_INCOMPATIBLE");
  }
  return Status::ok();
}

Status validateSchemaData(const SchemaData& s) {
  switch (s.type) {
    case SchemaType::AVRO:
    case SchemaType::JSON:
    case SchemaType::PROTOBUF: {
      // Pulsar's StructSchemaDataValidator: an Avro schema with its CompatibleNameValidator (its
      // fallback for JSON, a Jackson JsonSchema, accepted none of the definitions tried on the
      // reference broker), and no top-level union for AVRO.
      if (!parseAvroSchema(s.data).isOk() || !validateAvroNames(s.data).isOk()) {
        return Status::invalidArgument(
            fmt::format("Invalid schema definition data for {} schema", schemaTypeName(s.type)));
      }
      if (s.type == SchemaType::AVRO) {
        boost::system::error_code ec;
        json::value v = json::parse(s.data, ec);
        if (!ec && v.is_array()) {
          return Status::invalidArgument("Avro schema typed [UNION] is not supported");
        }
      }
      return Status::ok();
    }
    case SchemaType::STRING:
      // The Python client sends "null".
      if (s.data.empty() || s.data == "null") return Status::ok();
      return Status::invalidArgument("Invalid schema definition data for string schema : '" +
                                     s.data + "'");
    case SchemaType::AUTO_CONSUME:
      return Status::invalidArgument("Schema AUTO_CONSUME is a client-side schema type");
    case SchemaType::NONE:
    case SchemaType::BYTES:
      return Status::ok();
    case SchemaType::KEY_VALUE:
      return validateKeyValueSchemaData(s);
    case SchemaType::PROTOBUF_NATIVE:
      return validateProtobufNativeSchema(s.data);
    default:  // the primitive types
      if (s.data.empty()) return Status::ok();
      return Status::invalidArgument(fmt::format(
          "Invalid schema definition data for primitive schemas :length of schema data should "
          "be zero, but {} bytes is found",
          s.data.size()));
  }
}

}  // namespace magnetar::broker
