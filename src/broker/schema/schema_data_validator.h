// The checks of Pulsar's SchemaDataValidator that go beyond a parse: Avro names (its
// CompatibleNameValidator), KEY_VALUE schema data (Pulsar's KeyValueSchemaInfo encoding) and
// PROTOBUF_NATIVE descriptors (ProtobufNativeSchemaUtils.deserialize). validateSchemaData
// (schema_compatibility.h) calls them. Pure functions; any thread.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_SCHEMA)
#error "broker/schema is not below this broker part (src/broker/README.md)"
#endif

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace magnetar::broker {

struct SchemaData;

// Every name in an Avro schema definition (named types and their namespaces, field names, enum
// symbols) as Pulsar's CompatibleNameValidator accepts it: a letter, '_' or '$', then letters,
// digits, '_' or '$' (non-ASCII bytes count as letters); a schema object's "type" must be a
// string. kInvalidArgument otherwise, also when `text` is not JSON.
Status validateAvroNames(std::string_view text);

// KEY_VALUE schema data: [i32 BE key length][key data][i32 BE value length][value data], the key
// and value types in the properties "key.schema.type" / "value.schema.type" (BYTES when absent).
std::string encodeKeyValueSchemaData(std::string_view key, std::string_view value);
// The key and value data; nullopt when the lengths do not fit the data.
std::optional<std::pair<std::string, std::string>> decodeKeyValueSchemaData(std::string_view data);
// Validates both parts with validateSchemaData. kInvalidArgument when the data does not decode
// or a part's type is client-side (AUTO, AUTO_PUBLISH, AUTO_CONSUME: "Schema AUTO is a
// client-side schema type", Pulsar's SchemaDataValidator); an EXTERNAL part is not looked into;
// kInternal when a type property names no schema type (Pulsar's unexpected error).
Status validateKeyValueSchemaData(const SchemaData& s);
// The key and value type names of KEY_VALUE schema data as its properties give them ("BYTES"
// when absent), unchecked.
std::pair<std::string, std::string> keyValuePartTypeNames(const SchemaData& s);
// The admin REST form of a KEY_VALUE definition, {"key": K, "value": V} (K, V JSON values),
// to the stored data: K and V as Gson writes them (numbers as given, java_json.h), a part ""
// stored empty (Pulsar's convertKeyValueDataStringToSchemaInfoSchema). kInvalidArgument when
// `text` is not an object with both members.
Result<std::string> keyValueDataFromJson(std::string_view text);
// Stored KEY_VALUE data back to the REST form (Pulsar's convertKeyValueSchemaInfoDataToString):
// {"key":K,"value":V}, each part as Jackson writes its parsed tree (java_json.h), "" for a part
// of a primitive type, a JSON string for a part that is not JSON; the data itself when it does
// not decode.
std::string keyValueDataToJson(const SchemaData& s);

// A PROTOBUF_NATIVE definition: JSON {"fileDescriptorSet": base64 FileDescriptorSet,
// "rootMessageTypeName", "rootFileDescriptorName"} whose files build and hold the root message.
// kInvalidArgument with Pulsar's messages ("deserialize ProtobufNative Schema failed", "protobuf
// root message descriptor is null, ...").
Status validateProtobufNativeSchema(std::string_view text);
// The full name of that root message (Pulsar's ProtobufNativeSchemaUtils.deserialize(..)
// .getFullName()), the same errors.
Result<std::string> protobufNativeRootMessageName(std::string_view text);

}  // namespace magnetar::broker
